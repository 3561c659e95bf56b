#!/usr/bin/env bash
# Checks that a songloom binary serves the browser page by itself: starts `serve` on a free port,
# fetches the page and its bundle, stops it. The test command runs it on the binary the main job
# built (`bash scripts/check-page.sh target/release/songloom`).
set -euo pipefail
bin=${1:-target/release/songloom}
log=$(mktemp)
library=$(mktemp -d)
"$bin" serve --listen 127.0.0.1:0 --library "$library" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$log" "$library"' EXIT
addr=
for _ in $(seq 1200); do
    addr=$(sed -n 's|^serving on http://||p' "$log" | head -1)
    [ -n "$addr" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.1
done
[ -n "$addr" ] || { echo "songloom serve did not start within 120 s" >&2; cat "$log" >&2; exit 1; }
for path in / /pkg/songloom_web.js /pkg/songloom_web_bg.wasm; do
    exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}"
    printf 'GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$path" "$addr" >&3
    read -r status_line <&3 || true
    exec 3<&-
    case "$status_line" in
        "HTTP/1.1 200"*) ;;
        *) echo "$bin serve answered $path with: $status_line" >&2; cat "$log" >&2; exit 1 ;;
    esac
done
echo "$bin serves the browser page at http://$addr/"
