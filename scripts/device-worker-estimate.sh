# Runs on the GPU machine over .device/ (songloom and test-batch packed, .gl/ carried): the acoustic
# worker on CUDA (the batch tests), `songloom devices` through Vulkan (the wgpu estimate from probed
# rates), and a 30 s 8-bit song through Vulkan to hold the estimate against. Sized for a short lease;
# the summary is written as it goes. BATCH=1 adds #32's table at the fastest DiT precision (fp8,
# windows together; about 4 minutes), with the DiT's rate against the ceiling measured beside it.
# STAGES=1 adds the wgpu stages (8-bit) with the tiled convolutions and without
# (SONGLOOM_WGPU_CONV_TILED=0): the vocoder window's time, about 2 x 150 s.
source scripts/device-unpack.sh
S=$OUT/summary.txt
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $S
SONGLOOM_TEST_DEVICES=cuda timeout 45 /tmp/b/test-batch on_cuda windows_of --nocapture > $OUT/test-batch.log 2>&1
{ echo "== test-batch rc=$?"; grep -h "test result\|panicked\|equal\|together" $OUT/test-batch.log | head; } >> $S
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $icd ] && export VK_DRIVER_FILES=$icd
timeout 40 /tmp/b/songloom devices > $OUT/devices.txt 2>&1
{ echo "== devices rc=$?"; cat $OUT/devices.txt; } >> $S
timeout ${SONG_LIMIT:-175} /tmp/b/songloom bench --device wgpu --what song --duration 30 --precision bf16 --weights 8bit > $OUT/wgpu-song.txt 2>&1
{ echo "== wgpu song 30 s rc=$?"; cat $OUT/wgpu-song.txt; } >> $S
if [ "${STAGES:-0}" = 1 ]; then
  for tiled in 1 0; do
    SONGLOOM_WGPU_CONV_TILED=$tiled timeout 170 /tmp/b/songloom bench --device wgpu --what stages --precision bf16 \
      --weights 8bit > $OUT/stages-tiled$tiled.txt 2>&1
    { echo "== wgpu stages, tiled convolutions $tiled, rc=$?"; cat $OUT/stages-tiled$tiled.txt; } >> $S
  done
fi
if [ "${BATCH:-0}" = 1 ]; then
  timeout ${BATCH_LIMIT:-260} /tmp/b/songloom bench --device cuda --what batch --duration 60 --weights 8bit \
    --precision fp8 --songs 1,2,4,8 > $OUT/batch-fp8.txt 2>&1
  { echo "== batch fp8 rc=$?"; cat $OUT/batch-fp8.txt; } >> $S
fi
cat $S

