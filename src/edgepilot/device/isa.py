"""Which llama.cpp (ggml-cpu) fast paths a CPU's ISA features enable.

Repacking rules follow ggml/src/ggml-cpu/repack.cpp `ggml_repack_get_optimal_repack_type`:
  Q4_0   : AVX2 (or SVE+i8mm with 256-bit SVE) -> 8x8;  NEON+i8mm -> 4x8;  NEON+dotprod -> 4x4
  Q4_K   : AVX2 -> 8x8;  NEON+i8mm -> 8x8;  NEON+dotprod -> 8x4
  IQ4_NL : AVX2 -> 8x8;  NEON+dotprod -> 4x4
  Q2_K   : AVX512 -> 8x8
A repacked tensor is a second copy in a CPU_REPACK buffer (references.md: with mmap, resident weights can
double).
The ARM kernels are AArch64-only: a 32-bit (armv7/armv8l) userland gets plain NEON and no repacking.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# arm64 Features tokens -> what they are (Linux arch/arm64/kernel/cpuinfo.c hwcap_str)
ARM_FEATURE_NAMES = {
    "asimd": "NEON (Advanced SIMD)",
    "fphp": "FP16 scalar",
    "asimdhp": "FP16 vector arithmetic",
    "asimddp": "dot product (dotprod, SDOT/UDOT)",
    "i8mm": "int8 matrix multiply (SMMLA)",
    "bf16": "BF16 dot/matrix multiply",
    "sve": "SVE",
    "sve2": "SVE2",
    "svei8mm": "SVE int8 matrix multiply",
    "sme": "SME (scalable matrix extension)",
    "asimdfhm": "FP16 fused multiply-add long",
}

X86_KEY_FLAGS = (
    "sse3",
    "ssse3",
    "fma",
    "f16c",
    "avx",
    "avx2",
    "avx_vnni",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_int8",
)


@dataclass
class IsaSummary:
    family: str  # "arm64", "arm32", "x86_64", "x86", "unknown"
    simd: list[str] = field(default_factory=list)  # the features that matter for llama.cpp, normalized names
    repack: dict[str, str] = field(default_factory=dict)  # ggml type -> interleave layout
    fast_paths: list[str] = field(default_factory=list)  # one line each, what is enabled and why
    missing: list[str] = field(default_factory=list)  # notable fast paths this CPU/userland lacks


def summarize(family: str, features: list[str]) -> IsaSummary:
    if family == "arm64":
        return _arm64(set(features))
    if family == "arm32":
        return _arm32(set(features))
    if family in ("x86_64", "x86"):
        return _x86(family, set(features))
    return IsaSummary(family=family)


def _arm64(f: set[str]) -> IsaSummary:
    s = IsaSummary(family="arm64")
    neon = "asimd" in f
    dot = "asimddp" in f
    i8mm = "i8mm" in f
    s.simd = [
        name
        for tok, name in (
            ("asimd", "neon"),
            ("asimdhp", "fp16"),
            ("asimddp", "dotprod"),
            ("i8mm", "i8mm"),
            ("bf16", "bf16"),
            ("sve", "sve"),
            ("sve2", "sve2"),
            ("sme", "sme"),
        )
        if tok in f
    ]
    if neon:
        s.fast_paths.append("NEON vector kernels for all quant types")
    if "asimdhp" in f:
        s.fast_paths.append("FP16 vector arithmetic (asimdhp): F16 KV cache and F16 ops stay native")
    if neon and i8mm:
        s.repack.update({"Q4_0": "4x8", "Q4_K": "8x8"})
        s.fast_paths.append("i8mm: Q4_0 repacked 4x8 and Q4_K repacked 8x8 (SMMLA int8 matmul)")
    if neon and dot:
        s.repack.setdefault("Q4_0", "4x4")
        s.repack.setdefault("Q4_K", "8x4")
        s.repack["IQ4_NL"] = "4x4"
        s.fast_paths.append("dotprod: SDOT kernels for Q4_0/Q8_0/K-quants; Q4_0 and IQ4_NL repacking")
    if "sve" in f:
        s.fast_paths.append(
            "SVE kernels (Q4_0 8x8 repack only with 256-bit SVE vectors; phone cores are 128-bit)"
        )
    if "sme" in f:
        s.fast_paths.append("SME: KleidiAI kernels when llama.cpp is built with GGML_CPU_KLEIDIAI")
    if not dot:
        s.missing.append(
            "no dotprod (asimddp): no Q4_0/IQ4_NL repacking; int8 dot products fall back to NEON"
        )
    if not i8mm:
        s.missing.append("no i8mm: no 4x8/8x8 int8 matrix-multiply repacking")
    return s


def _arm32(f: set[str]) -> IsaSummary:
    s = IsaSummary(family="arm32")
    if "neon" in f:
        s.simd.append("neon")
        s.fast_paths.append("32-bit NEON kernels only")
    if "vfpv4" in f:
        s.simd.append("vfpv4")
    s.missing.append(
        "32-bit userland: ggml's dotprod/i8mm kernels and CPU_REPACK are AArch64-only, "
        "whatever the CPU supports"
    )
    return s


def _x86(family: str, f: set[str]) -> IsaSummary:
    s = IsaSummary(family=family)
    s.simd = [flag for flag in X86_KEY_FLAGS if flag in f]
    avx2 = "avx2" in f
    if avx2 and "fma" in f:
        s.fast_paths.append("AVX2+FMA kernels (the x86 baseline llama.cpp's packaged CPU builds assume)")
    if avx2:
        s.repack.update({"Q4_0": "8x8", "Q4_K": "8x8", "IQ4_NL": "8x8"})
        s.fast_paths.append("AVX2: Q4_0, Q4_K and IQ4_NL repacked 8x8 (CPU_REPACK)")
    if "avx512f" in f:
        s.repack["Q2_K"] = "8x8"
        s.fast_paths.append("AVX-512: wider kernels; Q2_K repacked 8x8")
    if "avx512_vnni" in f or "avx_vnni" in f:
        s.fast_paths.append("VNNI: int8 dot products (VPDPBUSD)")
    if "avx512_bf16" in f:
        s.fast_paths.append("AVX512-BF16: native BF16 dot products")
    if "amx_int8" in f:
        s.fast_paths.append("AMX: tile matmul when built with GGML_AMX")
    if not avx2:
        s.missing.append("no AVX2: no repacking; prebuilt x86 wheels that assume AVX2 die with SIGILL")
    return s
