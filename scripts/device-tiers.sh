#!/bin/bash
# Runs on the GPU machine over what scripts/device-pack.sh packed into .device/: the CUDA tests
# (TESTS), the GEMMs and quantized GEMVs against the device-copy ceiling, the stages under each of
# FORMATS (alternating, ROUNDS times, with songloom-prev's beside them when packed), the formats' distances at full size, and a 60 s song under
# each of TIERS (see SONG_ROUNDS, SONG_NO_GRAPHS, SONG_PREV below), each as "name:precision:weights:mode:max-memory" (max-memory "-" for none), with
# nvidia-smi sampling the device's memory every 200 ms. BIN names the packed binary to run (songloom
# unless given, e.g. songloom-prev where only that one travels). Logs go to $OUT/run.tar.gz, the summary
# to $OUT/summary.txt (printed last).
source scripts/device-unpack.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,memory.used --format=csv > $R/smi.txt
for t in ${TESTS-conformance memory parity_quantized parity pipeline kernels ops recorded}; do
  [ -x /tmp/b/test-$t ] && { /tmp/b/test-$t --nocapture --test-threads=1 > $R/test-$t.log 2>&1; echo "test-$t rc=$?" >> $R/summary.txt; grep "test result" $R/test-$t.log >> $R/summary.txt; grep -B2 -A12 "panicked" $R/test-$t.log | head -40 >> $R/summary.txt; }
done
grep -h "cuda: .*q[48]" $R/test-parity_quantized.log >> $R/summary.txt 2>/dev/null
B=/tmp/b/${BIN:-songloom}
[ -n "${GEMM-1}" ] && $B bench --device cuda --what gemm > $R/gemm.txt 2>&1
for r in $(seq ${ROUNDS:-1}); do
  for w in ${FORMATS-bf16 8bit 4bit}; do
    [ -x /tmp/b/songloom-prev ] && /tmp/b/songloom-prev bench --device cuda --what stages --precision bf16 --weights $w > $R/stages-prev-$w-$r.txt 2>&1
    $B bench --device cuda --what stages --precision bf16 --weights $w > $R/stages-$w-$r.txt 2>&1
  done
done
[ -n "${QUANT-1}" ] && $B bench --device cuda --what quant > $R/quant.txt 2>&1
# One 60 s song: song NAME PRECISION WEIGHTS MODE LIMIT BINARY [ENV...], with nvidia-smi sampling.
song() {
  local name=$1 precision=$2 weights=$3 mode=$4 limit=$5 bin=$6; shift 6
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > $R/smi-$name.txt &
  local smi=$!
  env "$@" $bin bench --device cuda --what song --duration 60 --precision $precision --weights $weights --mode $mode $limit > $R/song-$name.txt 2>&1
  echo "rc=$?" >> $R/song-$name.txt
  kill $smi; wait $smi 2>/dev/null
  echo "nvidia-smi peak $(sort -n $R/smi-$name.txt | tail -1) MiB (idle $(sort -n $R/smi-$name.txt | head -1) MiB)" >> $R/song-$name.txt
}
# SONG_ROUNDS rounds of every tier; SONG_NO_GRAPHS=1 runs each song again with the steps op by op
# (SONGLOOM_CUDA_GRAPHS=0), SONG_PREV=1 again by songloom-prev.
for r in $(seq ${SONG_ROUNDS:-1}); do
  for tier in $TIERS; do
    IFS=: read name precision weights mode memory <<< "$tier"
    limit=""; [ "$memory" != "-" ] && limit="--max-memory $memory"
    song $name-$r $precision $weights $mode "$limit" $B
    [ -n "${SONG_NO_GRAPHS:-}" ] && song nographs-$name-$r $precision $weights $mode "$limit" $B SONGLOOM_CUDA_GRAPHS=0
    [ -n "${SONG_PREV:-}" ] && [ -x /tmp/b/songloom-prev ] && song prev-$name-$r $precision $weights $mode "$limit" /tmp/b/songloom-prev
  done
done
for f in $R/song-*.txt; do echo "== $(basename $f)"; cat $f; done > $R/songs.txt
cat $R/summary.txt $R/gemm.txt $R/stages-*.txt $R/quant.txt $R/songs.txt 2>/dev/null
cp $R/summary.txt $OUT/summary.txt
tar czf $OUT/run.tar.gz -C $R .
