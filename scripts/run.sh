#!/usr/bin/env bash
# The main job on a fresh Debian/Ubuntu machine: installs what is missing, builds, generates a song
# with the embedded default model, writes (replaces) song.wav and plays it where a sound device exists. The
# binary it builds is the whole product: `target/release/songloom serve` serves the browser page.
# Extra arguments go to `songloom generate` (e.g. --model DIR --duration 60 --seed 7).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
# The browser page first: the binary embeds it, so `songloom serve` from it serves the page.
bash scripts/build-web.sh
cargo build --release --locked -p songloom
exec ./target/release/songloom generate \
    --prompt "a folk song played on piano with bass with drums in D major at 100 BPM" \
    --lyrics "[instrumental]" \
    --duration 12 --seed 1 --out song.wav --force "$@"
