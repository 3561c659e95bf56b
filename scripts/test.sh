#!/usr/bin/env bash
# Runs the whole test suite on a fresh Debian/Ubuntu machine, installing what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo nextest run --workspace --locked --no-fail-fast
# The interface crate also builds for the browser.
rustup target list --installed 2>/dev/null | grep -q wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
cargo check --locked --target wasm32-unknown-unknown -p songloom-ui
