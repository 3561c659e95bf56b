#!/bin/bash
# Runs on the GPU machine over what scripts/device-pack.sh packed into .device/ (the songloom
# binary is enough; test-batch runs too when packed, its CUDA tests only): `bench --what batch` for
# each of BATCHES and each binary of BINS (default songloom, and songloom-prev where packed),
# each "name:precision:weights:max-memory:songs" (max-memory "-" for none; songs e.g. 1,2,4,8),
# with nvidia-smi sampling the device's memory every 200 ms. Logs go to $OUT/run.tar.gz, the
# summary to $OUT/summary.txt (printed last).
source scripts/device-unpack.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,memory.used --format=csv > $R/smi.txt
if [ -x /tmp/b/test-batch ]; then
  SONGLOOM_TEST_DEVICES=cuda /tmp/b/test-batch on_cuda --nocapture --test-threads=1 > $R/test-batch.log 2>&1
  echo "test-batch rc=$?" >> $R/summary.txt
  grep -h "test result\|batch against alone" $R/test-batch.log >> $R/summary.txt
  grep -B2 -A12 "panicked" $R/test-batch.log | head -40 >> $R/summary.txt
fi
bins=${BINS:-songloom $([ -x /tmp/b/songloom-prev ] && echo songloom-prev)}
for spec in ${BATCHES-8bit:bf16:8bit:-:1,2,4,8}; do
  IFS=: read -r name precision weights limit songs <<< "$spec"
  budget=""
  [ "$limit" != "-" ] && budget="--max-memory $limit"
  for bin in $bins; do
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > $R/smi-$name-$bin.txt &
    smi=$!
    timeout "${LIMIT_S:-420}" /tmp/b/$bin bench --device cuda --what batch --duration 60 --precision "$precision" \
      --weights "$weights" $budget --songs "$songs" > $R/batch-$name-$bin.txt 2>&1
    echo "rc=$?" >> $R/batch-$name-$bin.txt
    kill $smi
    echo "$name $bin: nvidia-smi peak $(sort -n $R/smi-$name-$bin.txt | tail -1) MiB" >> $R/summary.txt
  done
done
cat $R/summary.txt $R/batch-*.txt
cp $R/summary.txt $OUT/summary.txt
tar czf $OUT/run.tar.gz -C $R .
