#!/bin/bash
# Packs what a GPU run needs into the git-ignored .device/ (carry it with the device tool):
# this tree's release binary, the CUDA-capable test binaries (conformance, ops, parity,
# parity_quantized, pipeline, memory, kernels, recorded, lora, continuation, edits, fp8, batch; or
# those TESTS names), and libasound for the binary to load.
# With PREV=path/to/songloom, that binary goes along as songloom-prev, the version to time against.
# Binaries travel xz-compressed (the carry limit is 64 MiB with the tracked tree); the GPU side
# unpacks them into /tmp/b (scripts/device-unpack.sh).
# The packed binary embeds the tiny test model, not the trained default: the tracked tree already
# carries the trained one (models/songloom-mini), and the limit counts both. The tracked tree is
# 56 MB, which leaves no room for the packed binaries: move models/songloom-mini (30 MB) and
# tests/fixtures/goldens/pipeline_long.safetensors (11 MB) out of the tree for the call, and back
# after, and pack only the tests the run needs (TESTS="batch recorded").
set -euo pipefail
cd "$(dirname "$0")/.."
out=${CARGO_TARGET_DIR:-target}/release
SONGLOOM_EMBED_MODEL=tests/fixtures/tiny-music3 cargo build --release --locked -p songloom
cargo test --release --locked -p songloom-tests --no-run
mkdir -p .device/lib
rm -f .device/*.xz .device/test-*
cp "$out/songloom" .device/songloom
[ -n "${PREV:-}" ] && cp "$PREV" .device/songloom-prev
for t in ${TESTS:-conformance ops parity parity_quantized pipeline memory kernels recorded lora continuation edits fp8 batch}; do
    cp "$(ls -t "$out"/deps/$t-* | grep -v '\.d$' | head -1)" ".device/test-$t"
done
strip .device/songloom* .device/test-*
xz -T2 -6 .device/songloom* .device/test-*
cp -L /usr/lib/x86_64-linux-gnu/libasound.so.2 .device/lib/
du -sh .device
