#!/usr/bin/env bash
# The aarch64 lane: llama.cpp's tools from the engine's own source, cross-built for an i8mm phone CPU by
# `edgepilot build --target aarch64`, plus CPU libraries for older cores, run with qemu-user.
#
#   scripts/aarch64-lane.sh            # set the lane up (idempotent: a second run only says where it is)
#   scripts/aarch64-lane.sh --print    # print the lane directory and exit 0 if it is ready, 1 if not
#
# What it does (Debian/Ubuntu, as root or with sudo for apt):
#   1. apt-installs gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu, qemu-user-static if a command is missing;
#   2. runs `edgepilot build --target aarch64 --arm-arch armv8.2-a+dotprod+i8mm` (the default aarch64 target,
#      so this is the build tests/toolchain use too: llama.cpp is compiled once for both): the engine's vendored
#      llama.cpp (llama-cpp-python's sdist, the commit the engine runs, so buffer sizes measured on the lane
#      are the ones the engine logs), all of edgepilot's tools, ~15-20 min with -j2, "up to date" once built;
#   3. builds libggml-cpu alone twice more from that source with the same cmake flags, for a dotprod CPU
#      without i8mm (armv8.2-a+dotprod) and a NEON-only one (armv8-a), ~2 min each: in this llama.cpp the
#      repack layouts follow the compile flags, so each feature set needs its own CPU library. It replaces
#      the tools' one through LD_LIBRARY_PATH.
#
# Where: the tools in edgepilot's tools directory (`edgepilot build --target aarch64 --print-only` names it:
# ${XDG_CACHE_HOME:-~/.cache}/edgepilot/tools/aarch64-VERSION/bin); the lane's own part, the CPU libraries and
# the stamp, in $EDGEPILOT_AARCH64_LANE, else ${XDG_CACHE_HOME:-~/.cache}/edgepilot/aarch64-lane (LANE/cpu-dotprod/bin,
# LANE/cpu-neon/bin). Run one (QEMU_CPU=max has dotprod and i8mm; cortex-a53 has neither and the i8mm build dies
# there with SIGILL):
#   QEMU_LD_PREFIX=/usr/aarch64-linux-gnu LD_LIBRARY_PATH=TOOLS/bin QEMU_CPU=max \
#     qemu-aarch64-static TOOLS/bin/llama-completion -m MODEL -c 2048 -n 4 -p Hi -no-cnv -v -lm mmap
#   (a variant: LD_LIBRARY_PATH=LANE/cpu-neon/bin:TOOLS/bin, and QEMU_CPU=cortex-a53 then runs)
# Jobs: $EDGEPILOT_LANE_JOBS (default 2). Python: $PYTHON (default python3), the one edgepilot is installed in.
# Python code finds the lane through benchmarks/aarch64_lane.py, which also decides whether it is ready.
set -euo pipefail

ARM_ARCH=armv8.2-a+dotprod+i8mm  # the tools' CPU; benchmarks/aarch64_lane.py has the same
LANE="${EDGEPILOT_AARCH64_LANE:-${XDG_CACHE_HOME:-$HOME/.cache}/edgepilot/aarch64-lane}"
JOBS="${EDGEPILOT_LANE_JOBS:-2}"
PY="${PYTHON:-python3}"
VARIANTS=(dotprod:armv8.2-a+dotprod neon:armv8-a)  # name:GGML_CPU_ARM_ARCH of a libggml-cpu alone
HERE="$(cd "$(dirname "$0")" && pwd)"
# Ready: the tools up to date, and cpu.stamp = these variants + the tools' build.stamp (a rebuilt llama.cpp
# rebuilds the CPU libraries). One definition, in Python: `aarch64_lane.py` prints what is missing, if anything.
lane_problem() { "$PY" "$HERE/../benchmarks/aarch64_lane.py"; }
json_field() { "$PY" -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

"$PY" -c 'import edgepilot' 2>/dev/null \
    || { echo "aarch64 lane: $PY cannot import edgepilot (activate its venv, or set PYTHON)" >&2; exit 1; }
if [[ "${1:-}" == "--print" ]]; then
    echo "$LANE"
    lane_problem >/dev/null
    exit
fi
if [[ $# -gt 0 ]]; then
    echo "usage: $0 [--print]" >&2
    exit 2
fi
if lane_problem >/dev/null; then
    echo "aarch64 lane ready: $LANE"
    exit 0
fi

# 1. toolchain and emulator
if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v aarch64-linux-gnu-g++ >/dev/null \
    || ! command -v qemu-aarch64-static >/dev/null; then
    SUDO=""
    [[ $(id -u) -eq 0 ]] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user-static >/dev/null
fi
command -v cmake >/dev/null || { echo "aarch64 lane: cmake is missing (apt-get install cmake)" >&2; exit 1; }

# 2. the tools (edgepilot's own smoke run checks llama-completion under qemu-aarch64-static)
TOOLS_JSON="$("$PY" -m edgepilot build --target aarch64 --arm-arch "$ARM_ARCH" --jobs "$JOBS" --json)"
SRC="$(json_field source <<<"$TOOLS_JSON")"
TOOLS_BIN="$(json_field bin_dir <<<"$TOOLS_JSON")"
TOOLS_STAMP="$(json_field stamp <<<"$TOOLS_JSON")"

# 3. the CPU library variants: the tools' cmake flags with another GGML_CPU_ARM_ARCH, only libggml-cpu built
mkdir -p "$LANE"
rm -f "$LANE/cpu.stamp"
for v in "${VARIANTS[@]}"; do
    dir="$LANE/cpu-${v%%:*}"
    mapfile -t defines < <("$PY" -m edgepilot build --target aarch64 --arm-arch "${v#*:}" --print-only --json \
        | "$PY" -c 'import json, sys; print("\n".join(f"-D{k}={v}" for k, v in json.load(sys.stdin)["flags"].items()))')
    cmake -S "$SRC" -B "$dir" "${defines[@]}" >"$dir.configure.log" 2>&1 \
        || { tail -20 "$dir.configure.log" >&2; exit 1; }
    cmake --build "$dir" -j "$JOBS" --target ggml-cpu >"$dir.build.log" 2>&1 \
        || { tail -20 "$dir.build.log" >&2; exit 1; }
done

# A smoke run under qemu proves the NEON-only library replaces the i8mm one (which would die with SIGILL).
QEMU_LD_PREFIX=/usr/aarch64-linux-gnu LD_LIBRARY_PATH="$LANE/cpu-neon/bin:$TOOLS_BIN" QEMU_CPU=cortex-a53 \
    qemu-aarch64-static "$TOOLS_BIN/llama-completion" --version >/dev/null 2>&1 \
    || { echo "aarch64 lane: llama-completion with the NEON-only CPU library does not run on cortex-a53" >&2; exit 1; }
{ echo "cpu=${VARIANTS[*]}"; cat "$TOOLS_STAMP"; } >"$LANE/cpu.stamp"
problem="$(lane_problem)" || { echo "aarch64 lane: $problem" >&2; exit 1; }
echo "aarch64 lane ready: $LANE (tools: $TOOLS_BIN)"
if [[ -d "$LANE/llama.cpp" ]]; then  # a lane set up when it compiled its own copy of llama.cpp
    echo "aarch64 lane: build/, build-dotprod/, build-neon/, llama.cpp/, sdist/ and lane.stamp in $LANE are unused now"
fi
