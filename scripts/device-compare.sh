#!/bin/bash
# Runs on the GPU machine over what .device/ holds (scripts/device-pack.sh, with the binary to
# time against packed as songloom-$BASE: BASE=prev for what `PREV=path` packs): on CUDA the recorded-step tests (test-recorded) and the
# batch's lists (test-ops), `bench --what batch` of 8-bit songs of DURATION seconds (default 20)
# for SONGS at once (default 1,4) on this binary and then on songloom-$BASE, then the stages on
# wgpu through NVIDIA's Vulkan driver (the loader from .gl/) on both. Each part is cut at its
# timeout so the whole fits a short lease; what is done is appended to $OUT/summary.txt as it
# goes, so a run cut short still says what it measured. The logs go to $OUT/run.tar.gz.
source scripts/device-unpack.sh
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee -a $S
bins="songloom songloom-${BASE:?name the binary to time against}"
export SONGLOOM_TEST_DEVICES=cuda
timeout 40 /tmp/b/test-recorded --nocapture --test-threads=1 > $R/test-recorded.log 2>&1
echo "test-recorded rc=$?" >> $S
grep -h "test result\|panicked\|replayed" $R/test-recorded.log | head -20 >> $S
timeout 25 /tmp/b/test-ops the_lists_of_a_batch shortened_lists --nocapture --test-threads=1 > $R/test-ops.log 2>&1
echo "test-ops rc=$?" >> $S
grep -h "test result\|panicked\|shortened" $R/test-ops.log >> $S
for bin in $bins; do
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > $R/smi-batch-$bin.txt &
  smi=$!
  timeout ${BATCH_LIMIT:-60} /tmp/b/$bin bench --device cuda --what batch --duration ${DURATION:-20} --precision bf16 \
    --weights 8bit --songs ${SONGS:-1,4} > $R/batch-$bin.txt 2>&1
  echo "rc=$? nvidia-smi peak $(sort -n $R/smi-batch-$bin.txt | tail -1) MiB" >> $R/batch-$bin.txt
  kill $smi
  { echo "== batch on cuda, $bin"; cat $R/batch-$bin.txt; } >> $S
done
unset SONGLOOM_TEST_DEVICES
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $icd ] && export VK_DRIVER_FILES=$icd
for bin in $bins; do
  timeout ${STAGES_LIMIT:-45} /tmp/b/$bin bench --device wgpu --what stages --precision bf16 > $R/stages-$bin.txt 2>&1
  echo "rc=$?" >> $R/stages-$bin.txt
  { echo "== stages on wgpu, $bin"; cat $R/stages-$bin.txt; } >> $S
done
tar czf $OUT/run.tar.gz -C $R .
cat $S
