# Runs on the GPU machine over .device/ (songloom and songloom-prev packed, .gl/ carried). First,
# where packed (TESTS=conformance), the conformance suite through Vulkan, which the int8 GEMV and
# the tiled transposed convolutions have not yet passed on a GPU. Then the wgpu decode products,
# this binary against songloom-prev (`bench --what gemm`, weights past the caches), the vocoder's
# convolutions tiled and not (`bench --what conv`), and this binary's wgpu stages (8-bit weights).
# SONG=1 runs a 60 s 8-bit song through Vulkan instead, nvidia-smi sampling the memory. The summary
# is written as it goes, so a lease cut short still returns what was done.
source scripts/device-unpack.sh
S=$OUT/summary.txt
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $S
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $icd ] && export VK_DRIVER_FILES=$icd
if [ -x /tmp/b/test-conformance ]; then
  SONGLOOM_TEST_DEVICES=wgpu timeout 120 /tmp/b/test-conformance every_backend --nocapture > $OUT/conformance.log 2>&1
  { echo "== conformance through Vulkan rc=$?"; grep -h "cases passed\|failures on\|test result" $OUT/conformance.log; } >> $S
fi
if [ "${SONG:-0}" = 1 ]; then
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > $OUT/smi.txt &
  timeout ${SONG_LIMIT:-400} /tmp/b/songloom bench --device wgpu --what song --duration 60 --precision bf16 --weights 8bit > $OUT/wgpu-song.txt 2>&1
  rc=$?; kill %1
  { echo "== wgpu song 60 s rc=$rc, nvidia-smi peak $(sort -n $OUT/smi.txt | tail -1) MiB"; cat $OUT/wgpu-song.txt; } >> $S
  cat $S; exit 0
fi
for b in songloom-prev songloom; do
  timeout 90 /tmp/b/$b bench --device wgpu --what gemm --precision bf16 > $OUT/gemm-$b.txt 2>&1
  { echo "== gemm wgpu $b rc=$?"; cat $OUT/gemm-$b.txt; } >> $S
done
for tiled in 0 1; do
  SONGLOOM_WGPU_CONV_TILED=$tiled timeout 60 /tmp/b/songloom bench --device wgpu --what conv > $OUT/conv-tiled$tiled.txt 2>&1
  { echo "== conv wgpu, tiled $tiled, rc=$?"; cat $OUT/conv-tiled$tiled.txt; } >> $S
done
timeout ${STAGES_LIMIT:-200} /tmp/b/songloom bench --device wgpu --what stages --precision bf16 --weights 8bit > $OUT/stages.txt 2>&1
{ echo "== wgpu stages 8-bit rc=$?"; cat $OUT/stages.txt; } >> $S
cat $S
