"""The search for settings that fit: over what decides memory on a phone, cheapest trade first.

What the user left open is searched: the load mode (mmap or a read copy), llama.cpp's weight repacking, the KV
cache type, flash attention and the physical batch. Each choice has a cost in speed or convenience; candidates
are tried in order of total cost, and the first that holds the context the run wants wins. When none does, the
one holding the most context wins (ties: the cheaper); when none holds even MIN_USEFUL_CTX, the plan is the
smallest useful one, and it does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import product
from typing import TYPE_CHECKING

from edgepilot.plan.requested import RequestedSettings
from edgepilot.plan.settings import UNQUANTIZED_KV, EngineSettings

if TYPE_CHECKING:
    from edgepilot.plan.planner import Planner

MIN_USEFUL_CTX = 512
QUANTIZED_KV = "q8_0"  # the KV type to fall back to: half of f16, hardly any quality loss


@dataclass(frozen=True)
class Trade:
    """One setting away from llama.cpp's default, and what it costs."""

    flag: str  # the edgepilot / llama.cpp flag that makes it
    cost: float  # relative: orders the candidates
    why: str


NO_MMAP = Trade("--no-mmap", 1.0, "the weights are read into memory: slower load, no page cache shared")
NO_REPACK = Trade("--no-repack", 2.0, "no repacked weights: slower prompt processing on this CPU")
KV_Q8 = Trade(f"--kv {QUANTIZED_KV}", 1.5, "q8_0 KV cache (with flash attention): a little precision lost")
FLASH = Trade("--flash-attn", 0.5, "flash attention: less compute memory, speed depends on the CPU")
UBATCH = {
    ub: Trade(f"--ubatch {ub}", cost, f"ubatch {ub}: slower prompt processing, smaller compute buffer")
    for ub, cost in ((256, 0.5), (128, 1.0))
}


@dataclass
class Candidate:
    settings: EngineSettings
    trades: tuple[Trade, ...]

    @property
    def cost(self) -> float:
        return sum(t.cost for t in self.trades)


@dataclass
class SearchResult:
    settings: EngineSettings
    max_ctx: int  # the largest context that fits with these settings (0: none)
    fits: bool
    trades: tuple[Trade, ...]  # what was given up to fit, cheapest first
    peak_untraded: int | None = None  # the predicted peak of the same context with no trade (when traded)


def candidates(base: EngineSettings, req: RequestedSettings, repacks: bool) -> list[Candidate]:
    """Every combination of the open settings, cheapest first. repacks: whether this CPU repacks any of this
    model's weights (otherwise --no-mmap and --no-repack change nothing and are not tried)."""
    loads: list[tuple[bool, bool, tuple[Trade, ...]]] = [(base.use_mmap, base.repack, ())]
    if repacks:
        if req.use_mmap is None:
            loads.append((False, base.repack, (NO_MMAP,)))
        if req.repack is None:
            loads.append((base.use_mmap, False, (NO_REPACK,)))
        if req.use_mmap is None and req.repack is None:
            loads.append((False, False, (NO_MMAP, NO_REPACK)))
    kvs: list[tuple[str, str, tuple[Trade, ...]]] = [(base.type_k, base.type_v, ())]
    if req.type_k is None and req.type_v is None and req.flash_attn is not False:
        kvs.append((QUANTIZED_KV, QUANTIZED_KV, (KV_Q8,)))
    flashes: list[tuple[bool, tuple[Trade, ...]]] = [(base.flash_attn, ())]
    if req.flash_attn is None and not base.flash_attn:
        flashes.append((True, (FLASH,)))
    ubatches: list[tuple[int, tuple[Trade, ...]]] = [(base.n_ubatch, ())]
    if req.n_ubatch is None:
        ubatches += [(ub, (UBATCH[ub],)) for ub in (256, 128) if ub < base.n_ubatch]

    out = []
    for (mmap, repack, t1), (tk, tv, t2), (fa, t3), (ub, t4) in product(loads, kvs, flashes, ubatches):
        needs_fa = tv not in UNQUANTIZED_KV
        if needs_fa and not fa and t2:  # a quantized V cache comes with flash attention, not as its own trade
            fa, t3 = True, ()
        elif needs_fa and not fa:
            continue
        s = replace(base, use_mmap=mmap, repack=repack, type_k=tk, type_v=tv, flash_attn=fa, n_ubatch=ub)
        out.append(Candidate(s, (*t1, *t2, *t3, *t4)))
    out.sort(key=lambda c: c.cost)  # stable: equal costs keep the order above
    return out


def search(planner: Planner, base: EngineSettings, req: RequestedSettings, budget: int) -> SearchResult:
    """base: the settings with the user's choices and defaults for the rest, base.n_ctx the context wanted."""
    repacks = planner.predict(replace(base, repack=True)).weights.repack_bytes > 0
    options = candidates(base, req, repacks)
    want = base.n_ctx
    for c in options:  # cheapest first: the first that holds the wanted context
        if planner.peak(c.settings) <= budget:
            untraded = planner.peak(base) if c.trades else None
            return SearchResult(c.settings, planner.max_ctx(c.settings, budget), True, c.trades, untraded)
    if req.n_ctx is None:  # nothing holds the wanted context: the most context, if it is useful
        best, best_ctx = None, 0
        for c in options:
            ctx = min(planner.max_ctx(c.settings, budget), want)
            if ctx > best_ctx:
                best, best_ctx = c, ctx
        if best is not None and best_ctx >= MIN_USEFUL_CTX:
            chosen = replace(best.settings, n_ctx=best_ctx)
            return SearchResult(
                chosen, best_ctx, True, best.trades, planner.peak(replace(base, n_ctx=best_ctx))
            )
    # nothing fits: the smallest useful plan (least memory) says how far off it is
    ctx = want if req.n_ctx is not None else min(want, MIN_USEFUL_CTX)
    smallest = min(options, key=lambda c: (planner.peak(replace(c.settings, n_ctx=ctx)), c.cost))
    chosen = replace(smallest.settings, n_ctx=ctx)
    return SearchResult(chosen, planner.max_ctx(chosen, budget), False, smallest.trades, None)
