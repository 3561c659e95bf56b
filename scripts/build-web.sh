#!/usr/bin/env bash
# Builds the browser page's bundle into web/dist (git-ignored), which the next build of songloom
# embeds (app/build.rs), so `songloom serve` serves it: the songloom-web crate for wasm32, then
# wasm-bindgen's JavaScript glue. wasm-bindgen-cli comes from crates.io at the version
# Cargo.lock holds for the wasm-bindgen crate (the two must agree), built here, not downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target list --installed 2>/dev/null | grep -q wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/"/, "", $3); print $3; exit }' Cargo.lock)
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$version" ]; then
    echo "installing wasm-bindgen-cli $version from crates.io (once)" >&2
    # --locked where its own lock file resolves here; otherwise the newest compatible dependencies.
    cargo install wasm-bindgen-cli --version "$version" --locked || cargo install wasm-bindgen-cli --version "$version"
fi
cargo build --release --locked --target wasm32-unknown-unknown -p songloom-web
wasm-bindgen --target web --no-typescript --out-dir web/dist \
    "${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/release/songloom_web.wasm"
ls -l web/dist
