#!/bin/bash
# Builds and runs the quantized-product bench (lab.cu) on the GPU machine, timing the kernels of
# kernels/gemv_quant.cu against a copy of an earlier version of that file, given as BEFORE (make it
# here, where the history is, and it travels with the tree):
#   git show 92dcb05:kernels/gemv_quant.cu > tools/gemv-lab/before.cu     # (git-ignored)
#   BEFORE=tools/gemv-lab/before.cu bash tools/gemv-lab/run.sh             # on the GPU machine
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${BEFORE:?name a copy of an earlier kernels/gemv_quant.cu (see the comment at the top)}"
(echo 'namespace before {'; sed 's/extern "C" //' "$BEFORE"; echo '}') >/tmp/gemv_quant_before.cu
cd tools/gemv-lab
nvcc -O3 -std=c++17 -arch=sm_90a -lineinfo -o /tmp/gemv-lab lab.cu
/tmp/gemv-lab
