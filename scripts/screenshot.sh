#!/bin/bash
# Takes docs/screenshot-generating.png (1280x800): the real window under Xvfb (wgpu on lavapipe), a song from
# the embedded test model in the library, and a second one mid-generation (started with Ctrl+Enter).
# Needs: Xvfb, xdotool, imagemagick's `import`, mesa-vulkan-drivers; run after a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-target/release/songloom}
home=$(mktemp -d)
export HOME=$home XDG_DATA_HOME=$home/data XDG_CACHE_HOME=$home/cache
# No sound card under Xvfb: ALSA's null device stands in, so the player runs (as fast as it is fed).
echo 'pcm.!default { type plug slave.pcm "null" }' > "$home/.asoundrc"
"$bin" generate --prompt "warm lo-fi piano, soft drums, 80 BPM" --lyrics $'[verse]\nla la la' --duration 12 \
    --out "$home/first.wav" --no-play --save >/dev/null
Xvfb :99 -screen 0 1280x800x24 >/dev/null 2>&1 &
xvfb=$!
trap 'kill $xvfb $app 2>/dev/null || true; rm -rf "$home"' EXIT
export DISPLAY=:99
sleep 2
"$bin" >/dev/null 2>&1 &
app=$!
sleep "${WINDOW_WAIT:-6}"
window=$(xdotool search --name Songloom | head -1)
xdotool windowfocus --sync "$window"
xdotool key --window "$window" ctrl+Return
xdotool mousemove 1200 780
sleep "${GENERATION_WAIT:-4}"
import -window root docs/screenshot-generating.png
echo "wrote docs/screenshot-generating.png"
