"""Which cmake flags build llama.cpp's tools for a device, from its probe (each choice with its reason).

- Always: Release, shared libraries found next to the binaries (RPATH $ORIGIN), the RPC backend (helpers and
  the main device must run the same commit and protocol), no curl/OpenSSL (nothing to download at run time),
  no tests/examples, the server on, no web-UI download at build time.
- x86-64: GGML_NATIVE=OFF with the portable set (SSE4.2, AVX, AVX2, FMA, F16C, BMI2 where the CPU has them):
  the set the engine wheel here is built with. -march=native would also turn on AVX-512/AMX where cpuinfo
  lists them, and a VM whose kernel does not grant AMX tiles dies with SIGILL at the first matrix multiply.
- AArch64: GGML_NATIVE=OFF with GGML_CPU_ARM_ARCH=armv8.2-a plus the features cpuinfo lists (dotprod, fp16,
  i8mm, sve), as ggml's own CPU variants do: -mcpu=native is unreliable on phone compilers and in containers.
  A 32-bit userland (armv7/armv8l) keeps the compiler's default NEON target.
- Android (Termux): GGML_OPENMP=OFF (no libomp at run time there; ggml's own threadpool is used).
- `--target aarch64` cross-builds with aarch64-linux-gnu-gcc/g++ for a phone (no OpenMP), default
  armv8.2-a+dotprod+i8mm: also the aarch64 lane's build (scripts/aarch64-lane.sh runs it; tests/arm use it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgepilot.device.android import AndroidFacts
from edgepilot.device.build_isa import X86_PORTABLE, arm_arch_for, portable_defines
from edgepilot.device.cpu import CpuFacts
from edgepilot.errors import UserError

CROSS_ARM_ARCH = "armv8.2-a+dotprod+i8mm"
CROSS_CC = "aarch64-linux-gnu-gcc"
CROSS_CXX = "aarch64-linux-gnu-g++"

COMMON = {
    "CMAKE_BUILD_TYPE": "Release",
    "BUILD_SHARED_LIBS": "ON",
    "CMAKE_BUILD_RPATH_USE_ORIGIN": "ON",
    "GGML_RPC": "ON",
    "LLAMA_CURL": "OFF",
    "LLAMA_OPENSSL": "OFF",
    "LLAMA_BUILD_TESTS": "OFF",
    "LLAMA_BUILD_EXAMPLES": "OFF",
    "LLAMA_BUILD_TOOLS": "ON",
    "LLAMA_BUILD_SERVER": "ON",
    "LLAMA_BUILD_APP": "OFF",
    "LLAMA_USE_PREBUILT_UI": "OFF",
}


@dataclass
class BuildFlags:
    target: str  # native / aarch64
    defines: dict[str, str]  # cmake -D NAME=VALUE, in order
    reasons: list[str] = field(default_factory=list)
    cross: bool = False

    @property
    def arm_arch(self) -> str | None:
        return self.defines.get("GGML_CPU_ARM_ARCH")

    @property
    def openmp(self) -> bool:
        return self.defines.get("GGML_OPENMP", "ON") == "ON"

    def march(self) -> str | None:
        """The -march the CPU backend is compiled with (None: the compiler's default for the target)."""
        if self.arm_arch:
            return self.arm_arch
        if self.defines.get("GGML_AVX2") == "ON":
            return "x86-64 + " + ",".join(
                opt.removeprefix("GGML_").lower() for opt, _ in X86_PORTABLE if self.defines.get(opt) == "ON"
            )
        return None


def choose_flags(
    target: str, cpu: CpuFacts | None, android: AndroidFacts | None, arm_arch: str | None = None
) -> BuildFlags:
    """The flags for `target` on the probed device (cpu None: unknown, the portable choices)."""
    defines = dict(COMMON)
    reasons = [
        "RPC on: helpers and the main device must run the same llama.cpp",
        "no curl/OpenSSL, no web UI",
    ]
    if target == "aarch64":
        arch = arm_arch or CROSS_ARM_ARCH
        _check_arm_arch(arch)
        defines.update(
            CMAKE_SYSTEM_NAME="Linux",
            CMAKE_SYSTEM_PROCESSOR="aarch64",
            CMAKE_C_COMPILER=CROSS_CC,
            CMAKE_CXX_COMPILER=CROSS_CXX,
            GGML_NATIVE="OFF",
            GGML_CPU_ARM_ARCH=arch,
            GGML_OPENMP="OFF",
        )
        reasons.append(
            f"cross-build for an AArch64 phone: -march={arch}, no OpenMP (Android has none at run time)"
        )
        return BuildFlags(target, defines, reasons, cross=True)
    if target != "native":
        raise UserError(f"unknown build target {target!r}: choose native or aarch64")
    isa = cpu.isa if cpu else "unknown"
    features = cpu.features if cpu else []
    if isa == "x86_64":
        defines.update(portable_defines(isa, features))
        reasons.append(
            "x86-64: GGML_NATIVE=OFF, portable AVX2/FMA/F16C set (-march=native turns on AVX-512/AMX, "
            "SIGILL where the kernel does not grant them)"
        )
    elif isa == "arm64":
        arch = arm_arch or arm_arch_for(features)
        _check_arm_arch(arch)
        defines.update(GGML_NATIVE="OFF", GGML_CPU_ARM_ARCH=arch)
        reasons.append(f"AArch64: -march={arch} from cpuinfo Features (not -mcpu=native)")
    elif isa == "arm32":
        defines["GGML_NATIVE"] = "OFF"
        reasons.append(
            "32-bit ARM userland: the compiler's default NEON target, no AArch64 kernels or repacking"
        )
    else:
        reasons.append("CPU features unknown: ggml's native detection (GGML_NATIVE default)")
    if android is not None:
        defines["GGML_OPENMP"] = "OFF"
        reasons.append("Android: GGML_OPENMP=OFF (no libomp at run time; ggml's threadpool instead)")
    return BuildFlags(target, defines, reasons)


def _check_arm_arch(arch: str) -> None:
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789.-+")
    if not arch.startswith("armv") or not set(arch) <= allowed or len(arch) > 80:
        raise UserError(f"bad ARM architecture {arch!r}: expected something like armv8.2-a+dotprod+i8mm")
