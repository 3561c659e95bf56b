# Runs on the GPU machine over .device/ (songloom and songloom-prev packed, .gl/ carried) the
# parts named in PARTS (default "conformance gemm conv stages"), writing a summary as it goes, so
# a lease cut short still returns what was done:
# - conformance: where packed (TESTS=conformance), the conformance suite through Vulkan, and
#   where packed (TESTS="conformance ops"), ops' attention test (its key tiles are more than
#   one); the run stops there if either fails;
# - gemm: the wgpu products of each binary in GEMM_BINS (default songloom-prev songloom;
#   `bench --what gemm`, decode weights past the caches);
# - conv: the vocoder's convolutions, tiled and not (`bench --what conv`);
# - stages: the wgpu stages of each binary in STAGES_BINS (default songloom), WEIGHTS (default
#   8bit) the AR weights;
# - tiled: the f32 attention without the matrix units (SONGLOOM_WGPU_COOPERATIVE=0), `bench --what
#   dit-ops` of songloom-prev and songloom (time the padding of 90570e5 with PREV a build of 5373dd1);
# - song: a 60 s song through Vulkan with WEIGHTS, nvidia-smi sampling the memory;
# - tiers: 20 s songs under `--max-memory 12` and `--max-memory 8`, nvidia-smi sampling the
#   memory.
# TAG goes into the stages' and song's file names (runs of the script with other settings, such
# as SONGLOOM_WGPU_SUBMIT_DISPATCHES=1024 set on its command line).
source scripts/device-unpack.sh
S=$OUT/summary.txt
PARTS=${PARTS:-conformance gemm conv stages}
WEIGHTS=${WEIGHTS:-8bit}
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $S
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $icd ] && export VK_DRIVER_FILES=$icd
has() { case " $PARTS " in *" $1 "*) return 0;; esac; return 1; }
if has conformance && [ -x /tmp/b/test-conformance ]; then
  SONGLOOM_TEST_DEVICES=wgpu timeout 120 /tmp/b/test-conformance every_backend --nocapture > $OUT/conformance.log 2>&1
  rc=$?
  { echo "== conformance through Vulkan rc=$rc"; grep -h "cases passed\|failures on\|test result\|FAIL\|worst" $OUT/conformance.log | grep -v "worst 0.00e0" | head -80; } >> $S
  if [ -x /tmp/b/test-ops ]; then
    SONGLOOM_TEST_DEVICES=wgpu timeout 120 /tmp/b/test-ops attention --nocapture > $OUT/ops-attention.log 2>&1
    ops=$?
    { echo "== ops attention through Vulkan rc=$ops"; grep -h "test result\|panicked\|expected" $OUT/ops-attention.log | head; } >> $S
    [ $ops = 0 ] || rc=$ops
  fi
  # The timings of a binary that computes wrong products are not worth the lease.
  [ $rc = 0 ] || { cat $S; exit 1; }
fi
if has gemm; then
  for b in ${GEMM_BINS:-songloom-prev songloom}; do
    timeout 90 /tmp/b/$b bench --device wgpu --what gemm --precision bf16 > $OUT/gemm-$b.txt 2>&1
    { echo "== gemm wgpu $b rc=$?"; cat $OUT/gemm-$b.txt; } >> $S
  done
fi
if has conv; then
  for tiled in 0 1; do
    SONGLOOM_WGPU_CONV_TILED=$tiled timeout 60 /tmp/b/songloom bench --device wgpu --what conv > $OUT/conv-tiled$tiled.txt 2>&1
    { echo "== conv wgpu, tiled $tiled, rc=$?"; cat $OUT/conv-tiled$tiled.txt; } >> $S
  done
fi
if has stages; then
  for b in ${STAGES_BINS:-songloom}; do
    timeout ${STAGES_LIMIT:-220} /tmp/b/$b bench --device wgpu --what stages --precision bf16 --weights $WEIGHTS > $OUT/stages-$b$TAG.txt 2>&1
    { echo "== wgpu stages $b $WEIGHTS $TAG rc=$?"; cat $OUT/stages-$b$TAG.txt; } >> $S
  done
fi
if has tiled; then
  for b in songloom-prev songloom; do
    SONGLOOM_WGPU_COOPERATIVE=0 timeout 120 /tmp/b/$b bench --device wgpu --what dit-ops --precision bf16 --repeat 3 > $OUT/dit-ops-f32-$b.txt 2>&1
    { echo "== dit-ops without the matrix units, $b, rc=$?"; cat $OUT/dit-ops-f32-$b.txt; } >> $S
  done
fi
if has song; then
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > $OUT/smi$TAG.txt &
  smi=$!
  timeout ${SONG_LIMIT:-300} /tmp/b/songloom bench --device wgpu --what song --duration 60 --precision bf16 --weights $WEIGHTS > $OUT/wgpu-song$TAG.txt 2>&1
  rc=$?; kill $smi
  { echo "== wgpu song 60 s $WEIGHTS $TAG rc=$rc, nvidia-smi peak $(sort -n $OUT/smi$TAG.txt | tail -1) MiB"; cat $OUT/wgpu-song$TAG.txt; } >> $S
fi
if has tiers; then
  for mem in 12 8; do
    t=$OUT/song20-$mem$TAG
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > $t-smi.txt &
    smi=$!
    timeout ${TIER_LIMIT:-170} /tmp/b/songloom bench --device wgpu --what song --duration 20 --precision bf16 --max-memory $mem > $t.txt 2>&1
    rc=$?; kill $smi
    { echo "== 20 s song, --max-memory $mem $TAG, rc=$rc, nvidia-smi peak $(sort -n $t-smi.txt | tail -1) MiB"; grep "plan:\|song:\|where the time\|memory after the song\|error" $t.txt; } >> $S
  done
fi
cat $S
