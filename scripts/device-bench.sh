#!/bin/bash
# Runs on the GPU machine over what scripts/device-pack.sh packed into .device/: the CUDA tests
# (ops, parity, pipeline), the stage benchmarks of this binary and of songloom-prev when packed,
# the stages again under each of PRECISIONS (e.g. "tf32 bf16"), ncu of one decode step, depth frame
# or DiT forward (PROFILE_STAGES="decode depth dit", under PROFILE_PRECISION), a 60 s song under
# each of SONGS (e.g. "tf32 bf16 reference"). Everything goes under $OUT; the summary is printed last.
export LD_LIBRARY_PATH=$PWD/.device/lib:$LD_LIBRARY_PATH
export SONGLOOM_FIXTURES=$PWD/tests/fixtures
mkdir -p /tmp/b
for b in .device/*.xz; do n=$(basename $b .xz); xz -dc $b > /tmp/b/$n; chmod +x /tmp/b/$n; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/smi.txt
for t in ops parity pipeline; do
  [ -x .device/test-$t ] && { .device/test-$t --nocapture --test-threads=1 > $OUT/test-$t.log 2>&1; echo "test-$t rc=$?" >> $OUT/summary.txt; grep "test result" $OUT/test-$t.log >> $OUT/summary.txt; grep -B2 -A12 "panicked" $OUT/test-$t.log | head -40 >> $OUT/summary.txt; }
done
/tmp/b/songloom bench --device cuda --what gemm > $OUT/gemm.txt 2>&1
[ -x /tmp/b/songloom-prev ] && /tmp/b/songloom-prev bench --device cuda --what stages > $OUT/stages-prev.txt 2>&1
/tmp/b/songloom bench --device cuda --what stages > $OUT/stages-new.txt 2>&1
for p in $PRECISIONS; do /tmp/b/songloom bench --device cuda --what stages --precision $p > $OUT/stages-$p.txt 2>&1; done
for stage in ${PROFILE_STAGES:-decode depth}; do
  SONGLOOM_PROFILE=$stage timeout 200 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv /tmp/b/songloom bench --device cuda --what stages --precision ${PROFILE_PRECISION:-reference} > $OUT/ncu-$stage.csv 2> $OUT/ncu-$stage.err
done
for p in $SONGS; do /tmp/b/songloom bench --device cuda --what song --duration 60 --precision $p > $OUT/song-$p.txt 2>&1; done
grep -h "cuda tf32\|cuda bf16" $OUT/test-parity.log >> $OUT/summary.txt
cat $OUT/summary.txt $OUT/gemm.txt $OUT/stages-*.txt $OUT/song-*.txt 2>/dev/null
