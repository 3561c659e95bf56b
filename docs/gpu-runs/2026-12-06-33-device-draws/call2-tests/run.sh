#!/bin/bash
# Runs on the GPU machine over what .device/ holds (scripts/device-pack.sh): every packed test
# binary with CUDA as the test device, then, where .gl/ came along (the Vulkan loader, see
# scripts/device-wgpu.sh), the conformance, ops and pipeline tests through NVIDIA's Vulkan driver.
# FILTER_<name> narrows a binary's tests (the carry leaves out fixtures some CPU-only tests read);
# each binary is cut at TEST_LIMIT seconds. $OUT/summary.txt grows as it goes; logs in run.tar.gz.
source scripts/device-unpack.sh
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $S
run_tests() {  # device
  for b in /tmp/b/test-*; do
    t=${b#/tmp/b/test-}
    [ "$1" = wgpu ] && [[ " conformance ops pipeline " != *" $t "* ]] && continue
    filter=FILTER_$t
    SONGLOOM_TEST_DEVICES=$1 timeout ${TEST_LIMIT:-120} $b ${!filter} --nocapture --test-threads=1 \
      > $R/$1-$t.log 2>&1
    echo "$1 test-$t rc=$?" >> $S
    grep -h "test result\|panicked\|FAILED\|failures on\|cases passed" $R/$1-$t.log | head -12 >> $S
  done
}
run_tests cuda
if ls .gl/*.deb > /dev/null 2>&1; then
  for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
  icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  [ -f $icd ] && export VK_DRIVER_FILES=$icd
  run_tests wgpu
fi
tar czf $OUT/run.tar.gz -C $R .
cat $S
