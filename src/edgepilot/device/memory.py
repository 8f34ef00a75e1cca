"""Memory facts: total, available, swap (and whether it is zram), memory pressure (PSI), cgroup limit,
overcommit mode.

llama.cpp on Linux/Android counts total RAM as free; the budget layer needs MemAvailable, the cgroup limit and
what zram really gives back, so those are read here.
"""

from __future__ import annotations

import contextlib
import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot.device import fs
from edgepilot.sizes import MAX_SIZE, read_count

MAX_CGROUP_DEPTH = 32  # systemd slices nest 4-6 deep; Android's per-app groups 3
_OVERCOMMIT = {0: "heuristic", 1: "always", 2: "never (strict accounting)"}


@dataclass
class Swap:
    path: str
    kind: str
    size_bytes: int
    used_bytes: int
    priority: int | None
    zram: bool


@dataclass
class MemoryFacts:
    total_bytes: int | None
    available_bytes: int | None
    swap_total_bytes: int | None
    swap_free_bytes: int | None
    zram: bool | None
    zram_bytes: int | None
    swaps: list[Swap]
    psi_some_avg10: float | None
    psi_full_avg10: float | None
    cgroup_limit_bytes: int | None
    cgroup_usage_bytes: int | None
    cgroup_path: str | None
    overcommit: str | None
    swappiness: int | None
    available_estimated: bool = False
    reasons: list[str] = field(default_factory=list)
    # This process (proc/self/status; None in a device tree): when it is the run being planned, or will be
    # replaced by it, its memory is not taken from the run (plan/budget.py).
    own_rss_bytes: int | None = None  # VmRSS
    own_anon_bytes: int | None = None  # RssAnon + RssShmem: the part MemAvailable does not count as free
    # The limiting cgroup's inactive file pages (memory.stat): page cache the kernel reclaims first.
    cgroup_inactive_file_bytes: int | None = None


def _bytes(text: str, scale: int = 1) -> int | None:
    """A byte count from a kernel file, or None: negative, huge (past MAX_SIZE, where float arithmetic
    downstream overflows) and non-ASCII digits (int() reads Arabic-Indic ones) are no kernel's figures."""
    if not (text.isascii() and text.isdigit() and len(text) <= 20):
        return None
    try:
        return read_count(int(text) * scale, what="a memory figure", maximum=MAX_SIZE)
    except ValueError:
        return None


def parse_meminfo(text: str) -> dict[str, int]:
    """`MemTotal:  24684084 kB` -> {"MemTotal": 25276502016} (bytes). A value that is not a byte count
    within MAX_SIZE is left out, as if the line were missing."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        if not sep:
            continue
        parts = rest.split()
        if not parts:
            continue
        unit = parts[1].lower() if len(parts) > 1 else ""
        number = _bytes(parts[0], 1024 if unit == "kb" else 1)
        if number is not None:
            values[key.strip()] = number
    return values


def parse_swaps(text: str) -> list[Swap]:
    swaps: list[Swap] = []
    for line in text.splitlines()[1:]:  # header: Filename Type Size Used Priority
        parts = line.split()
        if len(parts) < 4:
            continue
        size, used = _bytes(parts[2], 1024), _bytes(parts[3], 1024)
        if size is None or used is None:
            continue
        prio = None
        if len(parts) > 4:
            with contextlib.suppress(ValueError):
                prio = int(parts[4])
        path = parts[0].replace("\\040", " ")
        zram = "/zram" in path or path.startswith("zram")
        swaps.append(Swap(path, parts[1], size, used, prio, zram))
    return swaps


def parse_psi(text: str) -> dict[str, float]:
    """`some avg10=0.12 avg60=...` / `full avg10=...` -> {"some": 0.12, "full": ...} (avg10 only)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        for item in parts[1:]:
            if item.startswith("avg10="):
                with contextlib.suppress(ValueError):
                    share = float(item.split("=", 1)[1])
                    if 0.0 <= share <= 100.0:  # a percentage; NaN and inf fail this too
                        out[parts[0]] = share
    return out


def read_memory(root: Path) -> MemoryFacts:
    reasons: list[str] = []
    text, why = fs.read_text(root, "proc/meminfo")
    info = parse_meminfo(text or "")
    if text is None:
        reasons.append(f"memory size unknown ({why})")
    total = info.get("MemTotal")
    available = info.get("MemAvailable")
    estimated = False
    if available is None and total is not None:
        # Kernels before 3.14 have no MemAvailable: free + reclaimable page cache is the usual estimate.
        parts = [info.get(k, 0) for k in ("MemFree", "Active(file)", "Inactive(file)", "SReclaimable")]
        available, estimated = sum(parts), True
        reasons.append(
            "MemAvailable missing (kernel < 3.14): estimated from MemFree + file cache + SReclaimable"
        )

    swaps_text, why = fs.read_text(root, "proc/swaps")
    swaps = parse_swaps(swaps_text) if swaps_text is not None else []
    if swaps_text is None:
        reasons.append(f"swap devices unknown ({why})")
    zram_bytes = sum(s.size_bytes for s in swaps if s.zram)
    zram: bool | None = any(s.zram for s in swaps) if swaps_text is not None else None

    psi_text, why = fs.read_text(root, "proc/pressure/memory")
    psi = parse_psi(psi_text) if psi_text is not None else {}
    if psi_text is None:
        reasons.append(f"memory pressure (PSI) unavailable ({why})")

    limit, usage, cg_path, cg_reason, inactive_file = _cgroup(root)
    if cg_reason:
        reasons.append(cg_reason)
    own_rss, own_anon = _own_memory(root)

    over, why = fs.read_int(root, "proc/sys/vm/overcommit_memory")
    if over is None:
        reasons.append(f"overcommit mode unknown ({why})")
    swappiness, _ = fs.read_int(root, "proc/sys/vm/swappiness")
    return MemoryFacts(
        total_bytes=total,
        available_bytes=available,
        swap_total_bytes=info.get("SwapTotal"),
        swap_free_bytes=info.get("SwapFree"),
        zram=zram,
        zram_bytes=zram_bytes if zram else None,
        swaps=swaps,
        psi_some_avg10=psi.get("some"),
        psi_full_avg10=psi.get("full"),
        cgroup_limit_bytes=limit,
        cgroup_usage_bytes=usage,
        cgroup_path=cg_path,
        overcommit=_OVERCOMMIT.get(over, str(over)) if over is not None else None,
        swappiness=swappiness,
        available_estimated=estimated,
        reasons=reasons,
        own_rss_bytes=own_rss,
        own_anon_bytes=own_anon,
        cgroup_inactive_file_bytes=inactive_file,
    )


def _own_memory(root: Path) -> tuple[int | None, int | None]:
    """(VmRSS, RssAnon + RssShmem) of this process; (None, None) where proc/self/status is absent.
    Kernels before 4.5 have no RssAnon: then all of VmRSS counts as anonymous."""
    text, _ = fs.read_text(root, "proc/self/status")
    status = parse_meminfo(text or "")
    rss = status.get("VmRSS")
    if rss is None:
        return None, None
    if "RssAnon" not in status:
        return rss, rss
    return rss, min(rss, status["RssAnon"] + status.get("RssShmem", 0))


def _inactive_file(root: Path, stat_file: str, key: str) -> int | None:
    """The cgroup's inactive file pages from its memory.stat (v1 `total_inactive_file` counts its
    children too, as its usage does; v2's `inactive_file` always does)."""
    text, _ = fs.read_text(root, stat_file)
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return _bytes(value.strip())
    return None


def _own_cgroup_paths(root: Path) -> tuple[str | None, str | None]:
    """(v2 path, v1 memory-controller path) of this process from /proc/self/cgroup."""
    text, _ = fs.read_text(root, "proc/self/cgroup")
    v2 = v1 = None
    for line in (text or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = parts[2].strip()
        elif "memory" in parts[1].split(","):
            v1 = parts[2].strip()
    return v2, v1


_V2 = ("memory.max", "memory.current", "inactive_file")
_V1 = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")


def _cgroup(root: Path) -> tuple[int | None, int | None, str | None, str | None, int | None]:
    """(limit, usage, cgroup path, reason, inactive file pages). The tightest limit between this process's
    cgroup and the root."""
    v2_path, v1_path = _own_cgroup_paths(root)
    candidates: list[tuple[str, tuple[str, str, str], str]] = []  # (directory, file names, label)
    for path in _ancestors(v2_path):
        candidates.append(("sys/fs/cgroup" + path, _V2, path))
    for path in _ancestors(v1_path):
        candidates.append(("sys/fs/cgroup/memory" + path, _V1, path))
    if not candidates:
        candidates = [("sys/fs/cgroup", _V2, "/"), ("sys/fs/cgroup/memory", _V1, "/")]
    best: tuple[int, int | None, str, str, tuple[str, str, str]] | None = None
    seen_any = False
    for base, names, label in candidates:
        limit_file, usage_file = f"{base}/{names[0]}", f"{base}/{names[1]}"
        text, _ = fs.read_text(root, limit_file)
        if text is None:
            continue
        seen_any = True
        # "max" (v2), v1's "no limit" (PAGE_COUNTER_MAX * page size, about 2**63, past MAX_SIZE) and anything
        # else that is not a byte count: no limit here
        limit = _bytes(text.strip())
        if limit is None:
            continue
        if best is None or limit < best[0]:
            usage_text, _ = fs.read_text(root, usage_file, fs.VALUE_FILE)
            best = (limit, _bytes(usage_text.strip()) if usage_text else None, label, base, names)
    if best is not None:
        limit, usage, label, base, names = best
        return limit, usage, label, None, _inactive_file(root, f"{base}/memory.stat", names[2])
    if not seen_any:
        why = "no memory cgroup limit visible (none in the cgroups proc/self/cgroup names)"
        return None, None, None, why, None
    return None, None, None, None, None


def _ancestors(path: str | None) -> list[str]:
    """ "/a/b" -> ["/a/b", "/a", ""] (cgroup directories from the process's own up to the mounted root).

    The path comes from a file: `..` is resolved as the kernel would at `/` (it cannot climb out of the
    cgroup mount), and a path deeper than any real hierarchy is cut to its first MAX_CGROUP_DEPTH levels.
    """
    if path is None:
        return []
    parts = [p for p in posixpath.normpath("/" + path).split("/") if p][:MAX_CGROUP_DEPTH]
    out = ["/" + "/".join(parts[:n]) for n in range(len(parts), 0, -1)]
    out.append("")
    return out
