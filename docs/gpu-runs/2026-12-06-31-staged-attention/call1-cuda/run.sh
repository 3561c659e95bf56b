# Runs on the GPU machine over .device/ (scripts/device-pack.sh with TESTS="ops parity"): the CUDA
# bf16 attention with its keys and values staged once a call (SONGLOOM_CUDA_ATTENTION_STAGED=1)
# against converting them in every block of queries (=0), in one lease. First ops' attention tests
# (the rotated attention against its composition bit for bit, the fast precisions' bound) and the
# DiT's parity with each; the run stops there if the staged one fails. Then, alternating, `bench
# --what dit-ops` (the block's ops at seq 690) for each of VARIANTS ("0", "1", "1w4": staged with
# blocks of 4 warps), the stages with 8-bit AR weights (the DiT pair) for 0 and 1, and a 60 s song
# for 0 and 1 (SONGS=0 leaves the songs out), nvidia-smi sampling the memory. The summary goes to
# $OUT/summary.txt as it goes, so a lease cut short still says what it measured.
source scripts/device-unpack.sh
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee -a $S
export SONGLOOM_TEST_DEVICES=cuda
variant() {
  case $1 in
    0) echo SONGLOOM_CUDA_ATTENTION_STAGED=0 ;;
    1) echo SONGLOOM_CUDA_ATTENTION_STAGED=1 ;;
    1w4) echo SONGLOOM_CUDA_ATTENTION_STAGED=1 SONGLOOM_CUDA_ATTENTION_WARPS=4 ;;
  esac
}
for v in 1 0; do
  env $(variant $v) timeout 60 /tmp/b/test-ops attention --nocapture --test-threads=1 > $OUT/ops-$v.log 2>&1
  rc=$?
  { echo "== ops attention, staged $v, rc=$rc"; grep -h "test result\|panicked\|worst\|skipped\|control\|bit" $OUT/ops-$v.log | head -20; } >> $S
  env $(variant $v) timeout 120 /tmp/b/test-parity --nocapture --test-threads=1 > $OUT/parity-$v.log 2>&1
  prc=$?
  { echo "== parity, staged $v, rc=$prc"; grep -h "test result\|panicked\|cuda" $OUT/parity-$v.log | head -30; } >> $S
  # The timings of a kernel that computes wrong attention are not worth the lease.
  [ $v = 1 ] && { [ $rc = 0 ] && [ $prc = 0 ] || { cat $S; exit 1; }; }
done
for round in 1 2; do
  for v in ${VARIANTS:-0 1 1w4}; do
    env $(variant $v) timeout 60 /tmp/b/songloom bench --device cuda --what dit-ops --precision bf16 --repeat 20 > $OUT/dit-ops-$v-$round.txt 2>&1
    { echo "== dit-ops bf16, staged $v, round $round, rc=$?"; grep -i "attention\|block\|windows" $OUT/dit-ops-$v-$round.txt; } >> $S
  done
done
for v in 0 1; do
  env $(variant $v) timeout 150 /tmp/b/songloom bench --device cuda --what stages --precision bf16 --weights 8bit > $OUT/stages-$v.txt 2>&1
  { echo "== stages 8bit bf16, staged $v, rc=$?"; grep -i "DiT\|decode step\|depth frame\|vocoder" $OUT/stages-$v.txt; } >> $S
done
if [ "${SONGS:-1}" = 1 ]; then
  for run in 0-1 1-1 0-2 1-2; do
    v=${run%-*}
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > $OUT/smi-song-$run.txt &
    smi=$!
    env $(variant $v) timeout 120 /tmp/b/songloom bench --device cuda --what song --duration 60 --precision bf16 --weights 8bit > $OUT/song-$run.txt 2>&1
    rc=$?; kill $smi
    { echo "== 60 s song 8bit bf16, staged $v (run $run), rc=$rc, nvidia-smi peak $(sort -n $OUT/smi-song-$run.txt | tail -1) MiB"; grep "song:\|first audio\|AR frame\|acoustic\|both\|plan:" $OUT/song-$run.txt; } >> $S
  done
fi
cat $S
