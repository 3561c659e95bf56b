#!/bin/bash
# Runs on the GPU machine over what .device/ holds (scripts/device-pack.sh with PREV=the binary to
# time against, packed as songloom-prev): the CUDA tests of the draws made on the device (ops,
# conformance, pipeline, batch: those TESTS packed), then 60 s songs alternating this binary and
# songloom-prev (8-bit AR, bf16 DiT, twice each; fp8 once each), then `bench --what batch` of
# 1 and 4 songs on each. Every part is cut at its timeout; $OUT/summary.txt grows as it goes.
source scripts/device-unpack.sh
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee -a $S
export SONGLOOM_TEST_DEVICES=cuda
filter() {  # the tests of each binary that run on CUDA (the others need fixtures the carry leaves out)
  case $1 in
    ops) echo "draws_on the_lists shortened" ;;
    pipeline) echo "codes_drawn streamed_equals" ;;
    batch) echo "on_cuda" ;;
  esac
}
for t in ${TESTS:-ops conformance pipeline batch}; do
  [ -x /tmp/b/test-$t ] || continue
  timeout ${TEST_LIMIT:-120} /tmp/b/test-$t $(filter $t) --nocapture --test-threads=1 > $R/test-$t.log 2>&1
  echo "test-$t rc=$?" >> $S
  grep -h "test result\|panicked\|FAILED" $R/test-$t.log | head -20 >> $S
done
unset SONGLOOM_TEST_DEVICES
song() {  # bin precision tag
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > $R/smi-$3.txt &
  local smi=$!
  timeout ${SONG_LIMIT:-60} /tmp/b/$1 bench --device cuda --what song --duration 60 --precision $2 --weights 8bit \
    > $R/song-$3.txt 2>&1
  echo "rc=$? nvidia-smi peak $(sort -n $R/smi-$3.txt | tail -1) MiB" >> $R/song-$3.txt
  kill $smi
  { echo "== song $3"; grep -h "^song:\|where the time\|host work a frame\|rc=" $R/song-$3.txt; } >> $S
}
for round in 1 2; do
  song songloom-prev bf16 prev-bf16-$round
  song songloom bf16 new-bf16-$round
done
song songloom-prev fp8 prev-fp8-1
song songloom fp8 new-fp8-1
for bin in songloom songloom-prev; do
  timeout ${BATCH_LIMIT:-110} /tmp/b/$bin bench --device cuda --what batch --duration 60 --precision bf16 \
    --weights 8bit --songs 1,4 > $R/batch-$bin.txt 2>&1
  echo "rc=$?" >> $R/batch-$bin.txt
  { echo "== batch, $bin"; cat $R/batch-$bin.txt; } >> $S
done
tar czf $OUT/run.tar.gz -C $R .
cat $S
