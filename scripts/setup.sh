# Installs what building and testing Songloom needs where it is missing: system packages with
# apt-get, Rust (rustup) and cargo-nextest. Sourced by the other scripts.

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
# libsqlite3-dev: the library's database; mesa-vulkan-drivers (lavapipe) and libvulkan1: the wgpu
# backend runs on the CPU where there is no GPU (and its tests do). For the test command only
# (SONGLOOM_SETUP_TESTS=1): chromium and chromium-driver, for the browser test of the page
# `songloom serve` serves, curl, which runs the README's example of MiniMax's cloud API shape, and
# cargo-nextest.
packages=(build-essential pkg-config libasound2-dev libsqlite3-dev mesa-vulkan-drivers libvulkan1)
[ "${SONGLOOM_SETUP_TESTS:-}" = 1 ] && packages+=(chromium chromium-driver curl)
for pkg in "${packages[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing system packages: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

if ! command -v cargo >/dev/null 2>&1; then
    [ -x "$HOME/.cargo/bin/cargo" ] || curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c clippy,rustfmt
    export PATH="$HOME/.cargo/bin:$PATH"
fi

# 0.9.91 or later: .config/nextest.toml sets test priorities.
if [ "${SONGLOOM_SETUP_TESTS:-}" = 1 ]; then
    nextest=$(cargo nextest --version 2>/dev/null | awk 'NR == 1 { print $2 }' || true)
    if [ -z "$nextest" ] || [ "$(printf '%s\n' 0.9.91 "$nextest" | sort -V | head -n1)" != 0.9.91 ]; then
        cargo install cargo-nextest --locked
    fi
fi
