"""Which of ggml's CPU build options this CPU can run: the portable set, from cpuinfo's flags.

ggml's GGML_NATIVE=ON compiles for the build machine with -march=native, which also turns on AVX-512 and AMX
where cpuinfo lists them (a VM that lists AMX without granting its tiles then dies with SIGILL at the first
prompt batch), and GGML_NATIVE=OFF alone turns on AVX2/FMA/F16C whatever the CPU has. So the options are
named one by one from the flags this CPU lists: what `edgepilot build` compiles with, and what the fix for a
SIGILL proposes (`CMAKE_ARGS` for llama-cpp-python, cmake's -D for llama.cpp).
"""

from __future__ import annotations

# cmake option -> /proc/cpuinfo flag: the portable x86-64 set (ggml's GGML_NATIVE=OFF defaults)
X86_PORTABLE = (
    ("GGML_SSE42", "sse4_2"),
    ("GGML_AVX", "avx"),
    ("GGML_AVX2", "avx2"),
    ("GGML_FMA", "fma"),
    ("GGML_F16C", "f16c"),
    ("GGML_BMI2", "bmi2"),
)
# GCC/clang -march extension -> arm64 cpuinfo Features token
ARM_EXTENSIONS = (("dotprod", "asimddp"), ("fp16", "asimdhp"), ("i8mm", "i8mm"), ("sve", "sve"))
# What a native x86 build adds beyond the portable set, as llama.cpp's system_info names it
X86_BEYOND_PORTABLE = ("AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AVX_VNNI", "AMX_INT8")
# llama.cpp's system_info name -> the cpuinfo flag (x86) or Features token (arm64) a CPU lists for it
SYSTEM_INFO_FLAGS = {
    "SSSE3": "ssse3",
    "AVX": "avx",
    "AVX2": "avx2",
    "FMA": "fma",
    "F16C": "f16c",
    "BMI2": "bmi2",
    "AVX_VNNI": "avx_vnni",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
    "DOTPROD": "asimddp",
    "MATMUL_INT8": "i8mm",
    "FP16_VA": "asimdhp",
    "SVE": "sve",
    "SVE2": "sve2",
    "SME": "sme",
}


def arm_arch_for(features: list[str]) -> str:
    """armv8.2-a plus the extensions cpuinfo lists; plain armv8-a when none of them is there."""
    have = set(features)
    extensions = [ext for ext, token in ARM_EXTENSIONS if token in have]
    return "armv8.2-a" + "".join(f"+{e}" for e in extensions) if extensions else "armv8-a"


def portable_defines(isa: str, features: list[str]) -> dict[str, str]:
    """The CPU backend's cmake options for this CPU ({} when its instruction set is unknown)."""
    if isa == "x86_64":
        have = set(features)
        return {"GGML_NATIVE": "OFF", **{opt: "ON" if flag in have else "OFF" for opt, flag in X86_PORTABLE}}
    if isa == "arm64":
        return {"GGML_NATIVE": "OFF", "GGML_CPU_ARM_ARCH": arm_arch_for(features)}
    if isa == "arm32":
        return {"GGML_NATIVE": "OFF"}
    return {}


def cmake_args(isa: str, features: list[str]) -> str:
    """`-DGGML_NATIVE=OFF -DGGML_AVX2=ON ...` for this CPU (GGML_NATIVE=OFF alone when it is unknown)."""
    defines = portable_defines(isa, features) or {"GGML_NATIVE": "OFF"}
    return " ".join(f"-D{k}={v}" for k, v in defines.items())


def beyond_portable(built_with: list[str], features: list[str]) -> list[str]:
    """What a build says it was compiled with (system_info names) that this CPU does not list, or that only
    a native build turns on (AVX-512, AMX: listed on a VM that may not grant them)."""
    have = set(features)
    out = []
    for name in built_with:
        flag = SYSTEM_INFO_FLAGS.get(name)
        if name in X86_BEYOND_PORTABLE or (flag is not None and flag not in have):
            out.append(name)
    return out
