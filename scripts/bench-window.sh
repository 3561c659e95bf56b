#!/usr/bin/env bash
# The same song from the window and from the CLI on this machine: the window under Xvfb (wgpu on
# lavapipe, the software renderer a machine without a GPU draws with), Generate pressed with
# Ctrl+Enter on its first draft (the embedded model, 30 s); then the CLI with the seed the window
# drew, so both make the same song. Prints each one's time (the engine's own, from the library)
# and the CPU time its process took; the window's beyond the CLI's is what drawing it cost.
# Needs: Xvfb, xdotool, bc; run after a release build (BIN= to point elsewhere).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${BIN:-target/release/songloom}")
home=$(mktemp -d)
export HOME=$home XDG_DATA_HOME=$home/data XDG_CACHE_HOME=$home/cache XDG_CONFIG_HOME=$home/config
# No sound device: the window's player says so and the CLI does not play either (ALSA's null
# device, which plays as fast as it is fed, would keep a core busy in the player's callback).
Xvfb :98 -screen 0 1280x800x24 >/dev/null 2>&1 &
xvfb=$!
app=
trap 'kill $xvfb $app 2>/dev/null || true; rm -rf "$home"' EXIT
export DISPLAY=:98
sleep 2
# CPU seconds (user + system) a process has taken so far.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat"; }
songs() { "$bin" library list --json 2>/dev/null | wc -l; }

"$bin" >/dev/null 2>&1 &
app=$!
for _ in $(seq 100); do
    window=$(xdotool search --name Songloom 2>/dev/null | head -1 || true)
    [ -n "$window" ] && break
    sleep 0.2
done
[ -n "$window" ] || { echo "the window did not open" >&2; exit 1; }
# The device probe (wgpu on lavapipe) ends before the song starts.
sleep "${WINDOW_WAIT:-8}"
idle_from=$(cpu_s "$app")
sleep 5
idle_cpu=$(echo "$(cpu_s "$app") - $idle_from" | bc -l)
xdotool windowfocus --sync "$window"
cpu_before=$(cpu_s "$app")
start=$(date +%s.%N)
xdotool key --window "$window" ctrl+Return
until [ "$(songs)" -ge 1 ]; do
    sleep 0.2
    kill -0 "$app" || { echo "the window exited" >&2; exit 1; }
done
wall=$(echo "$(date +%s.%N) - $start" | bc -l)
cpu=$(echo "$(cpu_s "$app") - $cpu_before" | bc -l)
song=$("$bin" library list --json | head -1)
# Where the window's CPU time went, by thread name.
threads=$(for t in /proc/"$app"/task/*; do
    echo "$(tr ' ' _ < "$t/comm") $(awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "$t/stat")"
done | awk '{ s[$1] += $2 } END { for (n in s) printf "%s %.1f\n", n, s[n] }' | sort -k2 -n -r | head -8 | paste -sd, -)
kill "$app"
wait "$app" 2>/dev/null || true
app=
seed=$(echo "$song" | sed -n 's/.*"seed":\([0-9]*\).*/\1/p')
engine_s=$(echo "$song" | sed -n 's/.*"total_s":\([0-9.]*\).*/\1/p')
seconds=$(echo "$song" | sed -n 's/.*"seconds":\([0-9.]*\).*/\1/p')
printf 'window: %.1f s of audio (seed %s) in %.1f s (engine), %.1f s from the key to the library; %.1f CPU s; idle window %.2f CPU s a second\n' \
    "$seconds" "$seed" "$engine_s" "$wall" "$cpu" "$(echo "$idle_cpu / 5" | bc -l)"
echo "window threads, CPU s since start: $threads"

/usr/bin/time -f '%e %U %S' -o "$home/time" "$bin" generate \
    --prompt "a folk song played on piano with bass with drums in D major at 100 BPM" \
    --instrumental --duration 30 --seed "$seed" --out "$home/cli.wav" --no-play --save >"$home/cli.log" 2>&1
read -r cli_wall cli_user cli_sys < "$home/time"
cli=$("$bin" library list --json | head -1)
cli_engine_s=$(echo "$cli" | sed -n 's/.*"total_s":\([0-9.]*\).*/\1/p')
cli_seconds=$(echo "$cli" | sed -n 's/.*"seconds":\([0-9.]*\).*/\1/p')
printf 'cli:    %.1f s of audio (seed %s) in %.1f s (engine), %.1f s wall; %.1f CPU s\n' \
    "$cli_seconds" "$seed" "$cli_engine_s" "$cli_wall" "$(echo "$cli_user + $cli_sys" | bc -l)"
printf 'window / cli (engine time): %.2f\n' "$(echo "$engine_s / $cli_engine_s" | bc -l)"
