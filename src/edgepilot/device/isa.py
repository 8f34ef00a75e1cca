"""Which llama.cpp (ggml-cpu) fast paths a CPU's ISA features enable.

Repacking rules: REPACK_RULES below, transcribed from ggml/src/ggml-cpu/repack.cpp
`ggml_repack_get_optimal_repack_type` of the llama.cpp that llama-cpp-python 0.3.36 vendors. Only weights
used by a matrix multiplication qualify (not token_embd, which is read with get_rows), and only when the row
count (ne[1]) is a multiple of the layout's row multiple. A repacked tensor is a second copy in a CPU_REPACK
buffer (references.md: with mmap, resident weights can double).
The ARM kernels are AArch64-only: a 32-bit (armv7/armv8l) userland gets plain NEON and no repacking.
SVE matters only with 256-bit vectors and i8mm (ggml_cpu_get_sve_cnt() == 32 bytes: Q4_0 8x8, as on AVX2);
phone cores implement 128-bit SVE and take the NEON i8mm/dotprod layouts. NEON alone repacks nothing.
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


# ggml type -> [(what the CPU needs, interleave layout, ne[1] multiple)], first match wins (repack.cpp order).
# Capabilities: avx2, avx512 (x86); sve256 (256-bit SVE with i8mm), i8mm, dotprod (AArch64 with NEON).
REPACK_RULES: dict[str, list[tuple[str, str, int]]] = {
    "Q4_0": [("avx2", "8x8", 8), ("sve256", "8x8", 8), ("i8mm", "4x8", 4), ("dotprod", "4x4", 4)],
    "Q4_K": [("avx2", "8x8", 8), ("i8mm", "8x8", 8), ("dotprod", "8x4", 8)],
    "Q2_K": [("avx512", "8x8", 8)],
    "Q5_K": [("i8mm", "8x8", 8), ("dotprod", "8x4", 8)],
    "Q6_K": [("i8mm", "8x8", 8), ("dotprod", "8x4", 8)],
    "IQ4_NL": [("avx2", "8x8", 8), ("dotprod", "4x4", 4)],
    "MXFP4": [("avx2", "8x8", 8), ("dotprod", "4x4", 4)],
    "Q8_0": [("i8mm", "4x8", 4), ("dotprod", "4x4", 4)],
    "Q1_0": [("i8mm", "4x8", 4), ("dotprod", "4x4", 4)],
}


def repack_plan(capabilities: set[str]) -> dict[str, tuple[str, int]]:
    """ggml type -> (layout, row multiple) for a CPU with these capabilities (avx2, avx512, i8mm, dotprod)."""
    plan: dict[str, tuple[str, int]] = {}
    for ggml_type, rules in REPACK_RULES.items():
        for need, layout, multiple in rules:
            if need in capabilities:
                plan[ggml_type] = (layout, multiple)
                break
    return plan


@dataclass
class IsaSummary:
    family: str  # "arm64", "arm32", "x86_64", "x86", "unknown"
    simd: list[str] = field(default_factory=list)  # the features that matter for llama.cpp, normalized names
    repack: dict[str, str] = field(default_factory=dict)  # ggml type -> interleave layout
    repack_rows: dict[str, int] = field(default_factory=dict)  # ggml type -> ne[1] multiple it needs
    fast_paths: list[str] = field(default_factory=list)  # one line each, what is enabled and why
    missing: list[str] = field(default_factory=list)  # notable fast paths this CPU/userland lacks


def summarize(family: str, features: list[str], sve_vector_bits: int | None = None) -> IsaSummary:
    """sve_vector_bits: the SVE vector length new processes get (/proc/sys/abi/sve_default_vector_length)."""
    if family == "arm64":
        return _arm64(set(features), sve_vector_bits)
    if family == "arm32":
        return _arm32(set(features))
    if family in ("x86_64", "x86"):
        return _x86(family, set(features))
    return IsaSummary(family=family)


def _arm64(f: set[str], sve_vector_bits: int | None = None) -> IsaSummary:
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
    sve256 = "sve" in f and i8mm and sve_vector_bits == 256
    caps = {c for c, on in (("sve256", sve256), ("i8mm", neon and i8mm), ("dotprod", neon and dot)) if on}
    _set_repack(s, caps)
    if "i8mm" in caps:
        s.fast_paths.append("i8mm: SMMLA int8 matmul; Q4_0/Q8_0 repacked 4x8, Q4_K/Q5_K/Q6_K 8x8")
    if "dotprod" in caps:
        s.fast_paths.append("dotprod: SDOT kernels; repacking of Q4_0, Q8_0, IQ4_NL, MXFP4 and K-quants")
    if sve256:
        s.fast_paths.append("256-bit SVE with i8mm: Q4_0 repacked 8x8")
    elif "sve" in f:
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
    caps = {c for c, on in (("avx2", avx2), ("avx512", "avx512f" in f)) if on}
    _set_repack(s, caps)
    if avx2:
        s.fast_paths.append("AVX2: Q4_0, Q4_K, IQ4_NL and MXFP4 repacked 8x8 (CPU_REPACK)")
    if "avx512f" in f:
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


def _set_repack(s: IsaSummary, capabilities: set[str]) -> None:
    for ggml_type, (layout, multiple) in repack_plan(capabilities).items():
        s.repack[ggml_type] = layout
        s.repack_rows[ggml_type] = multiple
