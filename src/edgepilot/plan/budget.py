"""The memory budget: the most the run's whole process may hold before the OS kills it.

Not total RAM (llama.cpp's --fit on Linux/Android counts that as free): MemAvailable, capped by a cgroup
limit, minus a margin. Swap is not counted: zram compresses, and Q4 weights are high-entropy (they barely
compress), while lmkd kills on memory pressure long before swap is full. Android's margin is larger for that
reason.

The plan's peak is the whole run process, interpreter and libraries included. When this process is that run
(or the run replaces it, as `fit` plans for the `run` to come), what it holds already is given back, or it
would be counted twice: against MemAvailable its anonymous pages (its file pages are in MemAvailable's page
cache already); inside a cgroup everything the group was charged for it. A cgroup's inactive file pages are
free in the same sense as MemAvailable's page cache: the kernel reclaims them before its OOM killer strikes.
"""

from __future__ import annotations

from edgepilot.device.android import AndroidFacts
from edgepilot.device.memory import MemoryFacts
from edgepilot.errors import UserError
from edgepilot.plan.types import Budget
from edgepilot.sizes import parse_size

__all__ = ["compute_budget", "parse_size"]

MIB = 1 << 20
GIB = 1 << 30
LINUX_MARGIN = (256 * MIB, 0.05)  # (at least, share of total RAM)
ANDROID_MARGIN = (768 * MIB, 0.15)
CGROUP_FLOOR_SHARE = 0.10  # inside a small cgroup the fixed floor shrinks to this share of its limit
PRESSURE_PSI = 10.0  # memory PSI some avg10 (%) above which the system is already reclaiming hard
TENTH = MIB / 10  # the account's figures are MiB with one decimal


def compute_budget(
    memory: MemoryFacts,
    android: AndroidFacts | None,
    override: int | None = None,
    own_process: bool = False,
) -> Budget:
    """own_process: the plan's peak holds this process (it is the run, or the run replaces it), so its
    memory is the run's, not taken from it."""
    if override is not None:
        return _given(override)
    reasons: list[str] = []
    mem_available = memory.available_bytes
    source = "MemAvailable"
    if mem_available is None:
        raise UserError(
            "cannot tell how much memory is available (no usable figure in /proc/meminfo); "
            "give one with --budget SIZE"
        )
    if memory.available_estimated:
        source = "MemFree + page cache (no MemAvailable)"
    own_anon = (memory.own_anon_bytes or 0) if own_process else 0
    available = mem_available + own_anon
    floor, share = ANDROID_MARGIN if android is not None else LINUX_MARGIN
    total = memory.total_bytes or available
    limit, usage = memory.cgroup_limit_bytes, memory.cgroup_usage_bytes or 0
    own = own_anon
    cache = others = 0
    if limit is not None:
        cache = min(usage, memory.cgroup_inactive_file_bytes or 0)
        own_charged = min((memory.own_rss_bytes or 0) if own_process else 0, usage - cache)
        room = limit - (usage - cache - own_charged)
        if room < available:
            available, source = max(0, room), f"cgroup limit ({memory.cgroup_path or 'memory cgroup'})"
            own, others = own_charged, usage - cache - own_charged
            # The cgroup's OOM killer strikes at its own limit: the margin scales with the limit, not RAM.
            total = limit
            floor = min(floor, int(total * CGROUP_FLOOR_SHARE))
            where = f" {memory.cgroup_path}" if memory.cgroup_path else ""
            reasons.append(f"the memory cgroup{where} has a limit tighter than MemAvailable")
        else:
            limit = None
    margin = max(floor, int(total * share))
    if android is not None:
        reasons.append(
            f"Android: {margin // MIB} MiB kept free — lmkd kills on memory pressure before RAM is full"
        )
    if memory.psi_some_avg10 is not None and memory.psi_some_avg10 >= PRESSURE_PSI:
        extra = int(total * 0.05)
        margin += extra
        reasons.append(
            f"memory pressure is already high (PSI some avg10 {memory.psi_some_avg10:.1f}%): "
            f"{extra // MIB} MiB more kept free"
        )
    if memory.zram:
        reasons.append("zram swap is not counted: quantized weights barely compress")
    elif memory.swap_total_bytes:
        reasons.append("swap is not counted: a model paged out to swap crawls")
    budget = Budget(
        budget_bytes=max(0, available - margin),
        available_bytes=available,
        margin_bytes=margin,
        source=source,
        reasons=reasons,
        mem_available_bytes=mem_available,
        own_bytes=own,
        limit_bytes=limit,
        usage_bytes=usage if limit is not None else None,
        page_cache_bytes=cache if limit is not None else 0,
        others_bytes=others,
    )
    budget.account_terms = account_terms(budget, "MemFree + cache" if memory.available_estimated else "")
    budget.account = " ".join(budget.account_terms)
    return budget


def _given(override: int) -> Budget:
    terms = [f"budget {fig(_tenths(override))} MiB", "given with --budget:", "nothing kept free"]
    return Budget(
        budget_bytes=override,
        available_bytes=override,
        margin_bytes=0,
        source="--budget",
        reasons=["budget given with --budget: no margin added"],
        account=" ".join(terms),
        account_terms=terms,
    )


def _tenths(n: int) -> int:
    return round(n / TENTH)


def fig(tenths: int) -> str:
    return f"{tenths / 10:.1f}"


def account_terms(b: Budget, available_label: str = "") -> list[str]:
    """The budget as a sum that adds up on screen, in pieces to wrap between: each figure is rounded to
    0.1 MiB and one of them (others, or this process) is what the rounded rest leaves, so the sum holds."""
    budget, margin = _tenths(b.budget_bytes), _tenths(b.margin_bytes)
    head = f"budget {fig(budget)} MiB"
    if b.limit_bytes is None:  # MemAvailable (+ this process) - margin
        avail = _tenths(b.mem_available_bytes or 0)
        terms = [head, f"= {available_label or 'MemAvailable'} {fig(avail)}"]
        own = budget + margin - avail
        if b.own_bytes and own > 0:
            terms.append(f"+ this process {fig(own)}")
        elif budget == 0:
            return [head, f"({available_label or 'MemAvailable'} {fig(avail)}", f"< kept free {fig(margin)})"]
        else:
            terms[1] = f"= {available_label or 'MemAvailable'} {fig(budget + margin)}"
        return [*terms, f"− kept free {fig(margin)}"]
    limit = _tenths(b.limit_bytes)
    others = limit - margin - budget
    if others < 0:  # rounding, with nothing else in the group: the residue goes to the margin
        others, margin = 0, limit - budget
    if budget == 0:  # the others and the margin take it all: no equation holds at 0
        others = _tenths(b.others_bytes)
        terms = [head, f"(cgroup limit {fig(limit)}", f"− others {fig(others)}"]
        terms.append(f"< kept free {fig(margin)})")
    else:
        terms = [head, f"= cgroup limit {fig(limit)}", f"− others {fig(others)}"]
        terms.append(f"− kept free {fig(margin)}")
    usage, own = _tenths(b.usage_bytes or 0), _tenths(b.own_bytes)
    cache = usage - own - others
    if cache < 0:  # rounding: the residue goes to this process
        own, cache = max(0, own + cache), 0
    split = [f"(usage {fig(usage)}"]
    if b.own_bytes:
        split.append(f"= this process {fig(own)}")
    split.append(f"{'+' if b.own_bytes else '='} page cache {fig(cache)}")
    split.append(f"+ others {fig(others)})")
    return terms + split
