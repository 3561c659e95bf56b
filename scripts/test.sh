#!/usr/bin/env bash
# Runs the whole test suite on a fresh Debian/Ubuntu machine, installing what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
SONGLOOM_SETUP_TESTS=1 source scripts/setup.sh
# One pass over a fresh tree gains nothing from incremental builds, whose caches took 2.6 GB.
export CARGO_INCREMENTAL=0
cargo fmt --all -- --check
# The browser page first: the songloom binary the tests build embeds it.
bash scripts/build-web.sh
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy --locked --target wasm32-unknown-unknown -p songloom-web -- -D warnings
SONGLOOM_REQUIRE_BROWSER=1 SONGLOOM_REQUIRE_CURL=1 cargo nextest run --workspace --locked --no-fail-fast
# The main job as the README gives it: a song from the embedded model, written (not played).
song_dir=$(mktemp -d)
trap 'rm -rf "$song_dir"' EXIT
bash scripts/run.sh --no-play --out "$song_dir/song.wav"
test -s "$song_dir/song.wav"
# And the binary it built serves the browser page by itself.
bash scripts/check-page.sh target/release/songloom
