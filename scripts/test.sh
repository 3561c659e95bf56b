#!/usr/bin/env bash
# Runs the whole test suite on a fresh Debian/Ubuntu machine, installing what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo nextest run --workspace --locked --no-fail-fast
