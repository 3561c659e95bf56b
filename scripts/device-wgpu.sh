#!/bin/bash
# Runs on the GPU machine over what scripts/device-pack.sh packed into .device/: the wgpu backend
# through NVIDIA's Vulkan driver (the loader unpacked from .gl/, see the device tool's README):
# the devices it sees, the tests (TESTS) on wgpu beside the CPU, the main job on the embedded
# model, then the benchmarks (WHAT, default gemm and stages) on DEVICES (wgpu and CUDA) in one run
# (and on songloom-prev where packed),
# with nvidia-smi sampling memory. Logs to $OUT/run.tar.gz, the summary to $OUT/summary.txt.
# .gl/ (git-ignored through .git/info/exclude) is made once on the development machine:
#   mkdir -p .gl /tmp/amd64/partial; o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
#   apt-get $o update; (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
source scripts/device-unpack.sh
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $icd ] && export VK_DRIVER_FILES=$icd
B=/tmp/b/${MAIN_BIN:-songloom}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv > $R/smi.txt
$B devices > $R/devices.txt 2>&1
cat $R/smi.txt $R/devices.txt > $R/summary.txt
for t in ${TESTS-conformance ops parity pipeline memory}; do
  [ -x /tmp/b/test-$t ] || continue
  SONGLOOM_TEST_DEVICES=wgpu timeout -k 15 ${TEST_LIMIT:-240} /tmp/b/test-$t --nocapture --test-threads=1 > $R/test-$t.log 2>&1
  echo "test-$t rc=$?" >> $R/summary.txt
  grep -h "test result\|^wgpu\|wgpu:" $R/test-$t.log | head -20 >> $R/summary.txt
  grep -B2 -A12 "panicked" $R/test-$t.log | head -30 >> $R/summary.txt
done
for d in ${MAIN_DEVICES-wgpu cuda}; do
  /usr/bin/time -f "$d main job: %e s wall" $B generate --device $d --prompt "a calm piano piece" \
    --lyrics "[verse]\nla la la" --duration 10 --seed 3 --no-play --out $R/main-$d.wav >> $R/summary.txt 2>&1
  echo "main job on $d rc=$?" >> $R/summary.txt
done
# With songloom-prev packed (PREV= in scripts/device-pack.sh), each bench also runs on it, right
# after this binary's, so the two versions are timed in the same lease (BINS names other binaries
# of /tmp/b to run instead); with NOCOOP=1, this binary
# again without the cooperative-matrix products (songloom-nocoop: SONGLOOM_WGPU_COOPERATIVE=0).
bins=${BINS:-songloom $([ -x /tmp/b/songloom-prev ] && echo songloom-prev)}
[ -n "${NOCOOP:-}" ] && bins="$bins songloom-nocoop"
for what in ${WHAT-gemm stages}; do
  for d in ${DEVICES-wgpu cuda}; do
    for bin in $bins; do
      log=$R/bench-$what-$d-$bin.txt
      exe=/tmp/b/$bin; cooperative=1
      [ $bin = songloom-nocoop ] && { exe=/tmp/b/songloom; cooperative=0; [ $d = wgpu ] || continue; }
      nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > $R/smi-$what-$d-$bin.txt &
      smi=$!
      SONGLOOM_WGPU_COOPERATIVE=$cooperative timeout -k 15 ${BENCH_LIMIT:-300} $exe bench --device $d --what $what --precision ${PRECISION:-bf16} ${BENCH_ARGS:-} > $log 2>&1
      echo "rc=$?" >> $log
      kill $smi; wait $smi 2>/dev/null
      echo "nvidia-smi peak $(sort -n $R/smi-$what-$d-$bin.txt | tail -1) MiB" >> $log
      { echo "== bench $what on $d, $bin"; cat $log; } >> $R/summary.txt
    done
  done
done
cat $R/summary.txt
cp $R/summary.txt $OUT/summary.txt
tar czf $OUT/run.tar.gz -C $R .
