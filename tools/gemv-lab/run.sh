#!/bin/bash
# Builds and runs the quantized-product bench (lab.cu) on the GPU machine: the kernels of
# kernels/gemv_quant.cu beside the candidate designs of candidates.cu, plainly launched and chained.
# The engine's kernels and launch shapes come from engine_shapes.cuh, which the engine's launch-shape
# table writes (engine/src/cuda/decode_shapes.rs; SONGLOOM_WRITE_LAB=1 on its lab_file_is_current test).
#   bash tools/gemv-lab/run.sh             # on the GPU machine
set -euo pipefail
cd "$(dirname "$0")"
nvcc -O3 -std=c++17 -arch=sm_90a -lineinfo -o /tmp/gemv-lab lab.cu
/tmp/gemv-lab
