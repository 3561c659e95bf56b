#!/bin/bash
# Runs on the GPU machine over what scripts/device-pack.sh packed into .device/: the engine on the
# whole H200 and on 20 of its SMs (SONGLOOM_CUDA_SMS=20, a green context: Jetson Thor's SM count),
# each running the stage benchmarks under FORMATS and a 60 s song under each of TIERS (as in
# device-tiers.sh, "name:precision:weights:mode:max-memory"), nvidia-smi sampling memory. Logs go to
# $OUT/run.tar.gz, the summary to $OUT/summary.txt (printed last).
source scripts/device-unpack.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,memory.used --format=csv > $R/smi.txt
B=/tmp/b/songloom
SONGLOOM_CUDA_SMS=20 $B devices > $R/devices-20.txt 2>&1
for sms in ${SMS_LIST-all 20}; do
  env_sms=""; [ "$sms" != all ] && env_sms="SONGLOOM_CUDA_SMS=$sms"
  for w in ${FORMATS-8bit 4bit}; do
    env $env_sms $B bench --device cuda --what stages --precision bf16 --weights $w > $R/stages-$sms-$w.txt 2>&1
  done
  for tier in $TIERS; do
    IFS=: read name precision weights mode memory <<< "$tier"
    limit=""; [ "$memory" != "-" ] && limit="--max-memory $memory"
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > $R/smi-$sms-$name.txt &
    smi=$!
    env $env_sms $B bench --device cuda --what song --duration 60 --precision $precision --weights $weights --mode $mode $limit > $R/song-$sms-$name.txt 2>&1
    echo "rc=$?" >> $R/song-$sms-$name.txt
    kill $smi; wait $smi 2>/dev/null
  done
done
for f in $R/devices-20.txt $R/stages-*.txt $R/song-*.txt; do echo "== $(basename $f)"; cat $f; done > $R/summary.txt
cp $R/summary.txt $OUT/summary.txt
tar czf $OUT/run.tar.gz -C $R .
cat $R/summary.txt
