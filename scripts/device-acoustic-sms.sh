#!/bin/bash
# Runs on the GPU machine over what scripts/device-pack.sh packed into .device/: 60 s songs (8-bit
# AR, bf16 DiT) with the acoustic half's products planned for all SMs and for fewer
# (SONGLOOM_CUDA_ACOUSTIC_SMS=N for each N of SMS_LIST but "all"), in turns, ROUNDS times; then
# the stages alone at each (`--what stages` runs on one thread of normal priority, so all its
# products are planned alike: the DiT pair's line is what the setting costs the DiT). Do products
# sized for fewer SMs bring the AR frame inside the song nearer its time alone, and at what cost
# to the DiT? VAR=SONGLOOM_CUDA_ACOUSTIC_PARTITION runs the acoustic half's streams on N SMs
# instead (a green context, its products planned for its SMs; only a streamed song's acoustic
# threads take it, so the stages rows then time every thread on all SMs). Each run's first line names
# the device and the setting; $OUT/summary.txt grows as it goes. With the defaults the parts take
# about 8 minutes.
source scripts/device-unpack.sh
S=$OUT/summary.txt
B=/tmp/b/songloom
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee -a $S
VAR=${VAR:-SONGLOOM_CUDA_ACOUSTIC_SMS}
limit() {  # the environment that limits the acoustic half to $1 SMs ("all": none)
  [ "$1" = all ] && echo "$VAR=" || echo "$VAR=$1"
}
for round in $(seq ${ROUNDS:-2}); do
  for sms in ${SMS_LIST:-all 116 100}; do
    tag=$sms-$round
    timeout "${SONG_LIMIT:-90}" env "$(limit "$sms")" "$B" bench --device cuda --what song --duration 60 \
      --precision "${PRECISION:-bf16}" --weights 8bit > "$R/song-$tag.txt" 2>&1
    echo "rc=$?" >> "$R/song-$tag.txt"
    { echo "== song, $VAR on $sms SMs, round $round"
      grep -h "^device:\|^song:\|where the time\|host work a frame\|frame.s parts\|rc=" "$R/song-$tag.txt"; } >> "$S"
  done
done
for sms in ${SMS_LIST:-all 116 100}; do
  timeout "${STAGES_LIMIT:-90}" env "$(limit "$sms")" "$B" bench --device cuda --what stages --precision bf16 \
    --weights 8bit > "$R/stages-$sms.txt" 2>&1
  { echo "== stages, $VAR on $sms SMs"
    grep -h "^device:\|^DiT forward pair\|^decode step\|^depth frame" "$R/stages-$sms.txt"; } >> "$S"
done
tar czf "$OUT/run.tar.gz" -C "$R" .
cat "$S"
