#!/bin/bash
# Runs on the GPU machine over what scripts/device-pack.sh packed into .device/: 60 s songs (8-bit
# AR, bf16 DiT) with the acoustic half's products planned for all SMs and for fewer
# (SONGLOOM_CUDA_ACOUSTIC_SMS=N for each N of SMS_LIST but "all"), in turns, ROUNDS times; then
# the DiT pair alone at each (`--what stages`: the main thread's products are planned alike). Does
# leaving SMs free for the AR half's short kernels bring the AR frame inside the song nearer its
# time alone, and what does it cost the DiT? $OUT/summary.txt grows as it goes.
source scripts/device-unpack.sh
S=$OUT/summary.txt
B=/tmp/b/songloom
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee -a $S
limit() {  # the environment that plans the products for $1 SMs ("all": none)
  [ "$1" = all ] && echo "SONGLOOM_CUDA_ACOUSTIC_SMS=" || echo "SONGLOOM_CUDA_ACOUSTIC_SMS=$1"
}
for round in $(seq ${ROUNDS:-2}); do
  for sms in ${SMS_LIST:-all 116 100}; do
    tag=$sms-$round
    timeout ${SONG_LIMIT:-90} env $(limit $sms) $B bench --device cuda --what song --duration 60 --precision ${PRECISION:-bf16} \
      --weights 8bit > $R/song-$tag.txt 2>&1
    echo "rc=$?" >> $R/song-$tag.txt
    { echo "== song, acoustic products on $sms SMs, round $round"; grep -h "^song:\|where the time\|host work a frame\|rc=" $R/song-$tag.txt; } >> $S
  done
done
for sms in ${SMS_LIST:-all 116 100}; do
  timeout ${STAGES_LIMIT:-90} env $(limit $sms) $B bench --device cuda --what stages --precision bf16 --weights 8bit > $R/stages-$sms.txt 2>&1
  { echo "== stages, products on $sms SMs"; grep -h -i "dit\|decode step\|depth frame" $R/stages-$sms.txt; } >> $S
done
tar czf $OUT/run.tar.gz -C $R .
cat $S
