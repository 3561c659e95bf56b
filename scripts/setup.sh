# Installs what building and testing Songloom needs where it is missing: system packages with
# apt-get, Rust (rustup) and cargo-nextest. Sourced by the other scripts.

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
# mesa-vulkan-drivers (lavapipe) and libvulkan1: the wgpu backend runs its tests on the CPU;
# chromium and chromium-driver, for the test command only (SONGLOOM_SETUP_BROWSER=1): the browser
# test of the page `songloom serve` serves.
packages=(build-essential pkg-config libasound2-dev mesa-vulkan-drivers libvulkan1)
[ "${SONGLOOM_SETUP_BROWSER:-}" = 1 ] && packages+=(chromium chromium-driver)
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

if ! cargo nextest --version >/dev/null 2>&1; then
    cargo install cargo-nextest --locked
fi
