"""The memory budget: what the device will really let a run use before the OS kills it.

Not total RAM (llama.cpp's --fit on Linux/Android counts that as free): MemAvailable, capped by a cgroup
limit, minus a margin. Swap is not counted: zram compresses, and Q4 weights are high-entropy (they barely
compress), while lmkd kills on memory pressure long before swap is full. Android's margin is larger for that
reason.
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


def compute_budget(memory: MemoryFacts, android: AndroidFacts | None, override: int | None = None) -> Budget:
    if override is not None:
        return Budget(
            budget_bytes=override,
            available_bytes=override,
            margin_bytes=0,
            source="--budget",
            reasons=["budget given with --budget: no margin added"],
        )
    reasons: list[str] = []
    available = memory.available_bytes
    source = "MemAvailable"
    if available is None:
        raise UserError(
            "cannot tell how much memory is available (no usable figure in /proc/meminfo); "
            "give one with --budget SIZE"
        )
    if memory.available_estimated:
        source = "MemFree + page cache (no MemAvailable)"
    floor, share = ANDROID_MARGIN if android is not None else LINUX_MARGIN
    total = memory.total_bytes or available
    if memory.cgroup_limit_bytes is not None:
        room = memory.cgroup_limit_bytes - (memory.cgroup_usage_bytes or 0)
        if room < available:
            available, source = max(0, room), f"cgroup limit ({memory.cgroup_path or 'memory cgroup'})"
            # The cgroup's OOM killer strikes at its own limit: the margin scales with the limit, not RAM.
            total = memory.cgroup_limit_bytes
            floor = min(floor, int(total * CGROUP_FLOOR_SHARE))
            reasons.append("a memory cgroup limit is tighter than MemAvailable")
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
    return Budget(
        budget_bytes=max(0, available - margin),
        available_bytes=available,
        margin_bytes=margin,
        source=source,
        reasons=reasons,
    )
