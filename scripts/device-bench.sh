#!/bin/bash
# Runs on the GPU machine over what scripts/device-pack.sh packed into .device/: the CUDA tests
# (conformance, ops, parity, pipeline, kernels), the stage benchmarks of this binary and of
# songloom-prev when packed (alternating, ROUNDS times, so their spread shows),
# the stages again under each of PRECISIONS (e.g. "tf32 bf16"), ncu of one decode step, depth frame
# or DiT forward (PROFILE_STAGES="decode depth dit", under PROFILE_PRECISION), a 60 s song under
# each of SONGS (e.g. "tf32 bf16 reference"). The logs go to $R/run.tar.gz (the device tool
# returns at most 8 files) and the summary to $R/summary.txt; the summary is printed last.
source scripts/device-unpack.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt
for t in conformance ops parity pipeline kernels; do
  [ -x /tmp/b/test-$t ] && { /tmp/b/test-$t --nocapture --test-threads=1 > $R/test-$t.log 2>&1; echo "test-$t rc=$?" >> $R/summary.txt; grep "test result" $R/test-$t.log >> $R/summary.txt; grep -B2 -A12 "panicked" $R/test-$t.log | head -40 >> $R/summary.txt; }
done
/tmp/b/songloom bench --device cuda --what gemm > $R/gemm.txt 2>&1
for r in $(seq ${ROUNDS:-1}); do
  [ -x /tmp/b/songloom-prev ] && /tmp/b/songloom-prev bench --device cuda --what stages > $R/stages-prev-$r.txt 2>&1
  /tmp/b/songloom bench --device cuda --what stages > $R/stages-new-$r.txt 2>&1
done
for p in $PRECISIONS; do /tmp/b/songloom bench --device cuda --what stages --precision $p > $R/stages-$p.txt 2>&1; done
for stage in $PROFILE_STAGES; do
  SONGLOOM_PROFILE=$stage timeout 200 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv /tmp/b/songloom bench --device cuda --what stages --precision ${PROFILE_PRECISION:-reference} > $R/ncu-$stage.csv 2> $R/ncu-$stage.err
done
for p in $SONGS; do /tmp/b/songloom bench --device cuda --what song --duration 60 --precision $p > $R/song-$p.txt 2>&1; done
grep -h "cuda tf32\|cuda bf16" $R/test-parity.log >> $R/summary.txt
cat $R/summary.txt $R/gemm.txt $R/stages-*.txt $R/song-*.txt 2>/dev/null
cp $R/summary.txt $OUT/summary.txt
tar czf $OUT/run.tar.gz -C $R .
