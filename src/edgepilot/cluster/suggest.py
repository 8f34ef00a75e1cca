"""When a cluster plan does not fit: the smallest change that would make it fit.

Each kind is searched on its own, the others kept: a larger budget for one named device (by how much), the
largest context that fits, a quantized KV cache, a smaller quantization of the model (estimated from bits
per weight: each quantized weight scaled to that type's size). They are ranked by how much each gives up,
the smallest first.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from edgepilot.cluster.layout import Costs, fits
from edgepilot.gguf.arch import ArchParams
from edgepilot.gguf.gguf_records import GGUFHeader
from edgepilot.plan.planner import CTX_STEP, DeviceFacts
from edgepilot.sizes import MIB, show_size

# llama.cpp's quantize table (examples/quantize): bits per weight of each type, largest first
SMALLER_QUANTS = (("Q4_K_M", 4.89), ("Q3_K_M", 3.91), ("Q2_K", 3.35))
# general.file_type (llama_ftype) -> bits per weight of that type: a smaller one is only offered below it
FILE_TYPE_BPW = {0: 32, 1: 16, 32: 16, 7: 8.5, 18: 6.56, 9: 6.0, 17: 5.69, 16: 5.54, 8: 5.5, 3: 5.0}
FILE_TYPE_BPW |= {15: 4.89, 14: 4.58, 2: 4.5, 13: 4.27, 12: 3.91, 11: 3.5, 10: 3.35}
KV_TYPES = (("q8_0", 0.25), ("q4_0", 0.5))  # what each costs in quality, on the ranking's scale
MIN_CTX = 256


def _budget_change(costs: Costs, budgets: list[int], main_budget: int, names: list[str]) -> list[tuple]:
    out = []
    every = [("the main device", main_budget), *zip(names, budgets, strict=True)]
    ceiling = 2 * (costs.main.header.file_size + sum(costs.kv.values())) + 256 * MIB
    for i, (name, budget) in enumerate(every):

        def fits_with(extra: int, i: int = i) -> bool:
            b = [main_budget, *budgets]
            b[i] += extra
            return fits(costs, b[1:], b[0])

        if not fits_with(ceiling):
            continue
        lo, hi = 0, ceiling  # fits_with(hi) holds, fits_with(lo) does not
        while hi - lo > MIB:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if fits_with(mid) else (mid, hi)
        extra = (hi + MIB - 1) // MIB * MIB
        out.append(
            (
                extra / max(budget, 1),
                f"{show_size(extra)} more for {name} ({show_size(budget)} -> {show_size(budget + extra)})",
            )
        )
    return out


def _ctx_change(facts, device, budgets, main_budget, n_ctx: int, kv: str) -> list[tuple]:
    _, header, arch = facts

    def fits_at(ctx: int) -> bool:
        return fits(Costs(header, arch, device, ctx, kv), budgets, main_budget)

    steps = (n_ctx - 1) // CTX_STEP
    if steps < 1 or not fits_at(MIN_CTX):
        return []
    lo, hi = 1, steps  # fits_at(lo * CTX_STEP) holds
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits_at(mid * CTX_STEP) else (lo, mid - 1)
    ctx = lo * CTX_STEP
    return [((n_ctx - ctx) / n_ctx, f"a smaller context: --ctx {ctx} fits (the largest that does)")]


def _kv_change(facts, device, budgets, main_budget, n_ctx: int, kv: str) -> list[tuple]:
    if kv not in ("f16", "f32", "bf16"):
        return []
    _, header, arch = facts
    for kind, cost in KV_TYPES:
        if fits(Costs(header, arch, device, n_ctx, kind), budgets, main_budget):
            return [(cost, f"a {kind} KV cache: --kv {kind} fits (with flash attention)")]
    return []


def scaled_header(header: GGUFHeader, bpw: float) -> GGUFHeader:
    """The model quantized to about `bpw` bits per weight: every quantized 2-D+ weight above it shrunk."""
    tensors, offset = [], 0
    for t in sorted(header.tensors, key=lambda t: t.offset):
        size = t.n_bytes or 0
        if (
            len(t.shape) >= 2
            and t.type_name not in ("F32",)
            and t.n_elements
            and size * 8 > bpw * t.n_elements
        ):
            size = int(t.n_elements * bpw / 8)
        tensors.append(replace(t, offset=offset, n_bytes=size))
        offset += (size + header.alignment - 1) // header.alignment * header.alignment
    data_start = header.data_offset or 0
    return replace(header, tensors=tensors, file_size=data_start + offset)


def _quant_change(facts, device, budgets, main_budget, n_ctx: int, kv: str) -> list[tuple]:
    _, header, arch = facts
    weights = [t for t in header.tensors if len(t.shape) >= 2 and t.n_elements]
    elements = sum(t.n_elements for t in weights)
    current = 8 * sum(t.n_bytes or 0 for t in weights) / max(elements, 1)
    ftype = header.metadata.get("general.file_type")
    ceiling = FILE_TYPE_BPW.get(ftype, current) if isinstance(ftype, int) else current
    for name, bpw in SMALLER_QUANTS:
        if bpw >= ceiling - 0.05:
            continue
        if fits(Costs(scaled_header(header, bpw), arch, device, n_ctx, kv), budgets, main_budget):
            return [
                (
                    0.5 + (current - bpw) / current,
                    f"a {name} of this model would fit (estimated from "
                    f"{bpw:g} bits per weight; this file has {current:.2f})",
                )
            ]
    return []


def smallest_changes(
    facts: tuple[Path, GGUFHeader, ArchParams],
    device: DeviceFacts,
    budgets: list[int],
    main_budget: int,
    names: list[str],
    n_ctx: int,
    kv: str,
) -> list[str]:
    _, header, arch = facts
    found = _budget_change(Costs(header, arch, device, n_ctx, kv), budgets, main_budget, names)
    for kind in (_ctx_change, _kv_change, _quant_change):
        found += kind(facts, device, budgets, main_budget, n_ctx, kv)
    return [text for _, text in sorted(found, key=lambda f: f[0])]
