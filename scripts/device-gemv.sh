# Runs on the GPU machine over .device/ (songloom, songloom-prev and test-batch packed, .gl/
# carried): the acoustic worker's CUDA tests; the wgpu decode products through Vulkan, this
# binary against songloom-prev (`bench --what gemm`, weights past the caches); `songloom devices`
# with the tiled convolutions and without; the wgpu stages (8-bit) and a 30 s 8-bit song through
# Vulkan. The summary is written as it goes, so a lease cut short still returns what was done.
source scripts/device-unpack.sh
S=$OUT/summary.txt
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $S
SONGLOOM_TEST_DEVICES=cuda timeout 45 /tmp/b/test-batch on_cuda windows_of --nocapture > $OUT/test-batch.log 2>&1
{ echo "== test-batch rc=$?"; grep -h "test result\|panicked\|equal\|together" $OUT/test-batch.log | head; } >> $S
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $icd ] && export VK_DRIVER_FILES=$icd
for b in songloom-prev songloom; do
  timeout 90 /tmp/b/$b bench --device wgpu --what gemm --precision bf16 > $OUT/gemm-$b.txt 2>&1
  { echo "== gemm wgpu $b rc=$?"; cat $OUT/gemm-$b.txt; } >> $S
done
for tiled in 1 0; do
  SONGLOOM_WGPU_CONV_TILED=$tiled timeout 40 /tmp/b/songloom devices > $OUT/devices-tiled$tiled.txt 2>&1
  { echo "== devices, tiled convolutions $tiled, rc=$?"; cat $OUT/devices-tiled$tiled.txt; } >> $S
done
timeout ${STAGES_LIMIT:-170} /tmp/b/songloom bench --device wgpu --what stages --precision bf16 --weights 8bit > $OUT/stages.txt 2>&1
{ echo "== wgpu stages 8-bit rc=$?"; cat $OUT/stages.txt; } >> $S
timeout ${SONG_LIMIT:-150} /tmp/b/songloom bench --device wgpu --what song --duration 30 --precision bf16 --weights 8bit > $OUT/wgpu-song.txt 2>&1
{ echo "== wgpu song 30 s rc=$?"; cat $OUT/wgpu-song.txt; } >> $S
cat $S
