# Session 29 call 2: which commit makes the DiT's NaN, then the 60 s song with the one that works.
source scripts/device-unpack.sh
S=$OUT/summary.txt
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $icd ] && export VK_DRIVER_FILES=$icd
for t in test-ops-head test-ops; do
  SONGLOOM_TEST_DEVICES=wgpu timeout 60 /tmp/b/$t attention --nocapture > $OUT/$t.log 2>&1
  { echo "== $t attention rc=$?"; grep -h "test result\|panicked\|expected" $OUT/$t.log | head; } >> $S
done
ok=""
for b in songloom songloom-233603f songloom-291cc9a; do
  timeout 100 /tmp/b/$b bench --device wgpu --what song --duration 10 --precision bf16 --weights 8bit > $OUT/song10-$b.txt 2>&1
  rc=$?
  { echo "== 10 s song $b rc=$rc"; grep "song:\|error" $OUT/song10-$b.txt; } >> $S
  [ $rc = 0 ] && [ -z "$ok" ] && ok=$b
done
echo "first good: $ok" >> $S
if [ -n "$ok" ]; then
  for flight in "" 2; do
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > $OUT/smi$flight.txt &
    smi=$!
    SONGLOOM_WGPU_IN_FLIGHT=$flight timeout 200 /tmp/b/$ok bench --device wgpu --what song --duration 60 --precision bf16 --weights 8bit > $OUT/song60-$ok-inflight$flight.txt 2>&1
    rc=$?; kill $smi
    { echo "== 60 s song $ok in flight '$flight' rc=$rc smi peak $(sort -n $OUT/smi$flight.txt | tail -1) MiB"; cat $OUT/song60-$ok-inflight$flight.txt; } >> $S
  done
fi
cat $S
