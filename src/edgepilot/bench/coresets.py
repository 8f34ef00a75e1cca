"""CPU sets worth trying, from the device's cluster layout (fastest cluster first).

llama.cpp splits each layer's work evenly and waits for every thread at each barrier, so one thread on a
slow core stalls the fast ones. The sets to try are therefore the fastest cluster, then it plus the next
fastest, and so on: each "prefix" adds the next slower cluster.
"""

from __future__ import annotations

from edgepilot.device.cpu import Cluster, CpuFacts
from edgepilot.device.cpusets import cpulist, parse_cpulist
from edgepilot.errors import UserError
from edgepilot.words import count

NAMES_HELP = "all, big, fastK (the K fastest clusters), or a cpulist like 4-7 or 0-3,6"


def usable_clusters(clusters: list[Cluster], allowed: list[int] | None) -> list[list[int]]:
    """Each known cluster's CPUs that this process may use, fastest first (offline/unknown ones dropped)."""
    keep = set(allowed) if allowed is not None else None
    result: list[list[int]] = []
    for cl in clusters:
        if cl.kind == "unknown":
            continue
        cpus = sorted(c for c in cl.cpus if keep is None or c in keep)
        if cpus:
            result.append(cpus)
    if keep is not None:
        # CPUs the probe could not place (no cpufreq, no cpuinfo) still count, as a last slowest group.
        placed = {c for cl in result for c in cl}
        rest = sorted(keep - placed)
        if rest:
            result.append(rest)
    return result


def prefix_sets(clusters: list[list[int]]) -> list[tuple[int, ...]]:
    """[[7], [3, 4], [5, 6], [0, 1, 2]] -> [(7,), (3, 4, 7), (3, 4, 5, 6, 7), (0, ..., 7)]."""
    sets: list[tuple[int, ...]] = []
    acc: set[int] = set()
    for cl in clusters:
        acc |= set(cl)
        sets.append(tuple(sorted(acc)))
    return sets


def device_sets(cpu: CpuFacts, allowed: list[int] | None) -> list[tuple[int, ...]]:
    sets = prefix_sets(usable_clusters(cpu.clusters, allowed))
    if not sets and allowed:
        sets = [tuple(allowed)]
    return sets


def parse_core_sets(specs: list[str], cpu: CpuFacts, allowed: list[int]) -> list[tuple[int, ...]]:
    """`--cores` values: each one a set (names or cpulists); `/` separates several sets in one value."""
    sets: list[tuple[int, ...]] = []
    prefixes = device_sets(cpu, allowed)
    for spec in specs:
        for item in spec.split("/"):
            item = item.strip().lower()
            if not item:
                raise UserError(f"--cores: empty CPU set in {spec!r}; use {NAMES_HELP}")
            cpus = _named(item, cpu, allowed, prefixes)
            if cpus is None:
                try:
                    cpus = parse_cpulist(item)
                except ValueError:
                    raise UserError(f"--cores: {item!r} is not a CPU set; use {NAMES_HELP}") from None
            outside = [c for c in cpus if c not in allowed]
            if outside:
                raise UserError(
                    f"--cores {item}: CPU {cpulist(outside)} is not available to this process "
                    f"(it may use {cpulist(allowed)})"
                )
            if tuple(cpus) not in sets:
                sets.append(tuple(cpus))
    return sets


def _named(item: str, cpu: CpuFacts, allowed: list[int], prefixes: list[tuple[int, ...]]) -> list[int] | None:
    if item == "all":
        return list(allowed)
    if item == "big":
        big = [c for c in cpu.big_cores if c in allowed]
        return big or list(allowed)
    if item.startswith("fast") and item[4:].isascii() and item[4:].isdigit():
        k = int(item[4:])
        if not 1 <= k <= len(prefixes):
            raise UserError(f"--cores {item}: this device has {count(len(prefixes), 'usable cluster')}")
        return list(prefixes[k - 1])
    return None


def set_for_threads(sets: list[tuple[int, ...]], n_threads: int) -> tuple[int, ...]:
    """The smallest prefix set with at least n_threads CPUs (the largest one if none is big enough)."""
    for s in sets:
        if len(s) >= n_threads:
            return s
    return sets[-1]
