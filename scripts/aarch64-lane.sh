#!/usr/bin/env bash
# The aarch64 lane: llama.cpp from the engine's own source, cross-built for an i8mm phone CPU, run with qemu-user.
#
#   scripts/aarch64-lane.sh            # set the lane up (idempotent: a second run only says where it is)
#   scripts/aarch64-lane.sh --print    # print the lane directory and exit 0 if it is ready, 1 if not
#
# What it does (Debian/Ubuntu, as root or with sudo for apt):
#   1. apt-installs gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu, qemu-user-static if a command is missing;
#   2. fetches the llama-cpp-python 0.3.36 sdist (pip reuses its cache) and unpacks its vendored llama.cpp: the
#      same commit the engine runs, so buffer sizes measured on the lane are the ones the engine logs;
#   3. cross-compiles the shared libraries, llama-completion and llama-bench (GGML_NATIVE=OFF,
#      GGML_CPU_ARM_ARCH=armv8.2-a+dotprod+i8mm, no OpenMP, no OpenSSL/curl), ~6 min with -j2;
#   4. builds libggml-cpu alone twice more, for a dotprod CPU without i8mm (armv8.2-a+dotprod) and a NEON-only
#      one (armv8-a), ~2 min each: in this llama.cpp the repack layouts follow the compile flags, so each
#      feature set needs its own CPU library. It replaces the default one through LD_LIBRARY_PATH.
#
# Where: $EDGEPILOT_AARCH64_LANE, else ${XDG_CACHE_HOME:-~/.cache}/edgepilot/aarch64-lane (outside the repo).
# Binaries land in LANE/build/bin, the variants in LANE/build-dotprod/bin and LANE/build-neon/bin. Run one
# (QEMU_CPU=max has dotprod and i8mm; cortex-a53 has neither and the i8mm build dies there with SIGILL):
#   QEMU_LD_PREFIX=/usr/aarch64-linux-gnu LD_LIBRARY_PATH=LANE/build/bin QEMU_CPU=max \
#     qemu-aarch64-static LANE/build/bin/llama-completion -m MODEL -c 2048 -n 4 -p Hi -no-cnv -v -lm mmap
#   (a variant: LD_LIBRARY_PATH=LANE/build-neon/bin:LANE/build/bin, and QEMU_CPU=cortex-a53 then runs)
# Jobs: $EDGEPILOT_LANE_JOBS (default 2). Python code finds the lane through benchmarks/aarch64_lane.py.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
ARM_ARCH=armv8.2-a+dotprod+i8mm
LANE="${EDGEPILOT_AARCH64_LANE:-${XDG_CACHE_HOME:-$HOME/.cache}/edgepilot/aarch64-lane}"
JOBS="${EDGEPILOT_LANE_JOBS:-2}"
TARGETS=(llama-completion llama-bench)
VARIANTS=(dotprod:armv8.2-a+dotprod neon:armv8-a)  # name:GGML_CPU_ARM_ARCH of a libggml-cpu alone
# The stamp names everything the build depends on: change one and the lane is rebuilt.
STAMP_TEXT="llama-cpp-python=$LLAMA_CPP_PYTHON_VERSION arch=$ARM_ARCH targets=${TARGETS[*]} cpu=${VARIANTS[*]}"
STAMP="$LANE/lane.stamp"

lane_ready() {
    [[ -f "$STAMP" && "$(cat "$STAMP")" == "$STAMP_TEXT" ]] || return 1
    for t in "${TARGETS[@]}"; do [[ -x "$LANE/build/bin/$t" ]] || return 1; done
    for v in "${VARIANTS[@]}"; do [[ -f "$LANE/build-${v%%:*}/bin/libggml-cpu.so" ]] || return 1; done
    command -v qemu-aarch64-static >/dev/null && [[ -d /usr/aarch64-linux-gnu/lib ]]
}

if [[ "${1:-}" == "--print" ]]; then
    echo "$LANE"
    lane_ready
    exit
fi
if [[ $# -gt 0 ]]; then
    echo "usage: $0 [--print]" >&2
    exit 2
fi
if lane_ready; then
    echo "aarch64 lane ready: $LANE/build/bin"
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

# 2. the engine's vendored llama.cpp
mkdir -p "$LANE"
SRC="$LANE/llama.cpp"
if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
    SDIST_DIR="$LANE/sdist"
    SDIST="$SDIST_DIR/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
    if [[ ! -f "$SDIST" ]]; then
        PY="${PYTHON:-python3}"
        "$PY" -m pip download --quiet --no-deps --no-binary :all: \
            "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$SDIST_DIR"
    fi
    UNPACK="$LANE/unpack.tmp"
    rm -rf "$UNPACK"
    mkdir -p "$UNPACK"
    tar -xzf "$SDIST" -C "$UNPACK" "llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
    rm -rf "$SRC"
    mv "$UNPACK/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp" "$SRC"
    rm -f "$SRC/.git"  # a submodule pointer into the sdist's .git, which is not unpacked
    rm -rf "$UNPACK"
fi

# 3. cross build (only the targets the lane runs; their libraries come along), 4. the CPU library variants
configure() {  # build dir, GGML_CPU_ARM_ARCH
    cmake -S "$SRC" -B "$1" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
        -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ \
        -DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH="$2" -DGGML_OPENMP=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
        >"$1.configure.log" 2>&1
}
build() {  # build dir, targets...
    local dir="$1"
    shift
    cmake --build "$dir" -j "$JOBS" --target "$@" >"$dir.build.log" || { tail -20 "$dir.build.log" >&2; exit 1; }
}
configure "$LANE/build" "$ARM_ARCH"
build "$LANE/build" "${TARGETS[@]}"
for v in "${VARIANTS[@]}"; do
    configure "$LANE/build-${v%%:*}" "${v#*:}"
    build "$LANE/build-${v%%:*}" ggml-cpu
done

# A smoke run under qemu proves the toolchain, the sysroot and the emulator fit together.
QEMU_LD_PREFIX=/usr/aarch64-linux-gnu LD_LIBRARY_PATH="$LANE/build/bin" QEMU_CPU=max \
    qemu-aarch64-static "$LANE/build/bin/llama-completion" --version >/dev/null 2>&1 \
    || { echo "aarch64 lane: the cross-built llama-completion does not run under qemu-aarch64-static" >&2; exit 1; }
QEMU_LD_PREFIX=/usr/aarch64-linux-gnu LD_LIBRARY_PATH="$LANE/build-neon/bin:$LANE/build/bin" QEMU_CPU=cortex-a53 \
    qemu-aarch64-static "$LANE/build/bin/llama-completion" --version >/dev/null 2>&1 \
    || { echo "aarch64 lane: llama-completion with the NEON-only CPU library does not run on cortex-a53" >&2; exit 1; }
echo "$STAMP_TEXT" >"$STAMP"
echo "aarch64 lane ready: $LANE/build/bin"
