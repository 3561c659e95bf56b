#!/bin/bash
# Builds and runs the quantized-product bench (lab.cu) on the GPU machine: `bash tools/gemv-lab/run.sh`.
# BEFORE names a copy of kernels/gemv_quant.cu to time against (default: the one beside this script).
set -euo pipefail
cd "$(dirname "$0")"
(echo 'namespace before {'; sed 's/extern "C" //' "${BEFORE:-gemv_quant_before.cu}"; echo '}') >/tmp/gemv_quant_before.cu
nvcc -O3 -std=c++17 -arch=sm_90a -lineinfo -o /tmp/gemv-lab lab.cu
/tmp/gemv-lab
