"""The memory read bandwidth measured on this device, remembered so it is measured once.

bench, tune and run measure it the first time they need it (a few hundred ms) and keep it here; `probe` only
shows a kept figure (its start-up stays light: no numpy), `probe --bandwidth` measures again.

`memory-bandwidth.json` in edgepilot's data directory (datadir.py), written atomically (safe_write.py). An
entry's key is the device fingerprint (tuned.identity: CPU layout, clocks, memory size) and the CPUs this
process may use: a figure measured under `taskset` says nothing of the whole device. A measurement again keeps
the higher figure: the limit is the best the memory has read, and one taken while other work shared it (or,
on a VM, while its cores sat on one memory controller: 32 against 49 GB/s here) reads low.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from typing import TYPE_CHECKING, Any

from edgepilot.digest import sha256_hex
from edgepilot.errors import UserError
from edgepilot.file_errors import note_once
from edgepilot.kept import MAX_BYTES, MAX_COUNT, Dropped, KeyedCache, is_int, is_number

if TYPE_CHECKING:
    from edgepilot.device.bandwidth import Bandwidth
    from edgepilot.device.cpu import CpuFacts

CACHE_NAME = "memory-bandwidth.json"
CACHE_FILE = 64 << 10
MAX_ENTRIES = 16
FORMAT = 1
NOT_KEPT = ("cached", "latest_bytes_per_s")  # what one command learnt, not the device
CACHE = KeyedCache(
    name=CACHE_NAME, section="devices", most=MAX_ENTRIES, form=FORMAT, limit=CACHE_FILE,
    what="the memory bandwidth cache", then="bandwidth is measured again",
    refused="bandwidth is measured again and not kept",
)  # fmt: skip


def cache_key(cpu: CpuFacts | None = None) -> str:
    from edgepilot.device.cpusets import cpulist
    from edgepilot.device.process import allowed_cpus
    from edgepilot.tuned.identity import device_id

    raw = json.dumps([device_id(cpu=cpu).fingerprint, cpulist(allowed_cpus())])
    return sha256_hex(raw)[:24]


# A memory read bandwidth outside these is no measurement of a phone's or a board's memory (a 1e-3 B/s figure
# printed "2023410382333 % of limit"): below 100 MB/s, above 10 TB/s.
MIN_BYTES_PER_S, MAX_BYTES_PER_S = 1e8, 1e13
MAX_THREADS = 1 << 16


def _checked(entry: dict[str, Any]) -> tuple[str, Any] | None:
    """The first value of a kept figure out of its type or range (name, value), or None."""
    by_threads = entry.get("by_threads", {})
    checks = [
        ("bytes_per_s", is_number(entry.get("bytes_per_s"), MIN_BYTES_PER_S, MAX_BYTES_PER_S)),
        ("threads", is_int(entry.get("threads"), 1, MAX_THREADS)),
        ("buffer_bytes", is_int(entry.get("buffer_bytes"), 1, MAX_BYTES)),
        ("seconds", is_number(entry.get("seconds"), 0, 1e6)),
        ("passes", is_int(entry.get("passes", 0), 0, MAX_COUNT)),
        ("llc_bytes", entry.get("llc_bytes") is None or is_int(entry.get("llc_bytes"), 1, MAX_BYTES)),
        ("method", isinstance(entry.get("method", ""), str)),
        ("measured_at", isinstance(entry.get("measured_at", ""), str)),
        (
            "by_threads",
            isinstance(by_threads, dict)
            and len(by_threads) <= 1024
            and all(
                isinstance(t, str) and t.isascii() and t.isdigit() and 0 < len(t) <= 6
                and is_number(v, MIN_BYTES_PER_S, MAX_BYTES_PER_S)
                for t, v in by_threads.items()
            ),
        ),
    ]  # fmt: skip
    return next(((name, entry.get(name)) for name, ok in checks if not ok), None)


def _from_entry(entry: dict[str, Any], dropped: Dropped | None = None) -> Bandwidth | None:
    """A kept figure, every value checked (kept.py); None (said once in `dropped`) when one is out of its
    type or range: measured again."""
    from edgepilot.device.bandwidth import Bandwidth

    bad = _checked(entry)
    if bad is not None:
        if dropped is not None:
            dropped.drop(*bad)
        return None
    known = {f.name for f in fields(Bandwidth)}
    bw = Bandwidth(**{k: v for k, v in entry.items() if k in known and k not in NOT_KEPT})
    bw.bytes_per_s, bw.seconds = float(bw.bytes_per_s), float(bw.seconds)
    bw.by_threads = {int(t): float(v) for t, v in dict(bw.by_threads).items()}
    bw.cached = True
    return bw


def load(key: str) -> Bandwidth | None:
    entry = (CACHE.entries() or {}).get(key)
    if entry is None:
        return None
    dropped = Dropped(CACHE.path(), "the memory bandwidth cache", "measured again")
    bw = _from_entry(entry, dropped)
    dropped.note()
    return bw


def store(key: str, bw: Bandwidth) -> str | None:
    """Keep a figure (the oldest dropped beyond MAX_ENTRIES). The reason when it could not be kept."""
    entry = {k: v for k, v in asdict(bw).items() if k not in NOT_KEPT}
    entry["by_threads"] = {str(t): v for t, v in bw.by_threads.items()}
    bad = _checked(entry)
    if bad is not None:  # what the reader would refuse is not kept
        return f"{bad[0]} {bad[1]!r} is out of range"
    return CACHE.store(key, entry)


def machine_bandwidth(
    measure: bool = True, again: bool = False, cpu: CpuFacts | None = None
) -> Bandwidth | None:
    """This machine's memory read bandwidth: the kept figure, else (measure) measured now and kept; again:
    measure even when one is kept, and keep the higher of the two (the lower one, when it is the new one,
    in `latest_bytes_per_s`). None when there is none and measuring was not asked for or not possible
    (said once on stderr)."""
    key = cache_key(cpu)
    kept = load(key)
    if (kept is not None and not again) or (kept is None and not (measure or again)):
        return kept
    from edgepilot.device.bandwidth import measure_in_child

    try:
        bw = measure_in_child()  # never in this process: its buffer is no part of a run's peak
    except UserError as exc:
        if again:
            raise
        note_once(str(exc))
        return None
    if kept is not None and kept.bytes_per_s >= bw.bytes_per_s:
        kept.latest_bytes_per_s = round(bw.bytes_per_s)
        return kept
    why = store(key, bw)
    if why:
        note_once(f"memory bandwidth measured but not kept ({why}): measured again next time")
    return bw


NOT_MEASURED = (
    "not measured yet: `edgepilot probe --bandwidth` measures it (a few hundred ms); bench, tune and run "
    "measure it the first time they need it"
)


def bandwidth_facts(measure: bool = False, cpu: CpuFacts | None = None) -> dict[str, Any]:
    """probe's `memory_bandwidth`: the kept figure and how it was measured (measure: measure it again now);
    `bytes_per_s` null and `why` when there is none."""
    bw = machine_bandwidth(measure=False, again=measure, cpu=cpu)
    if bw is None:
        return {"bytes_per_s": None, "why": NOT_MEASURED}
    return {
        **asdict(bw),
        "bytes_per_s": round(bw.bytes_per_s),
        "gb_per_s": round(bw.gb_per_s, 2),
        "how": bw.how(),
    }
