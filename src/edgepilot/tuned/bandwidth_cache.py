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

import hashlib
import json
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgepilot.datadir import DATA_FIX, data_dir, writable_data_folder
from edgepilot.errors import UserError
from edgepilot.file_errors import escaped, is_denied, note_once, refused_where
from edgepilot.untrusted import loads_json, read_capped

if TYPE_CHECKING:
    from edgepilot.device.bandwidth import Bandwidth
    from edgepilot.device.cpu import CpuFacts

CACHE_NAME = "memory-bandwidth.json"
CACHE_FILE = 64 << 10
MAX_ENTRIES = 16
FORMAT = 1
NOT_KEPT = ("cached", "latest_bytes_per_s")  # what one command learnt, not the device


def cache_path() -> Path:
    return data_dir() / CACHE_NAME


def cache_key(cpu: CpuFacts | None = None) -> str:
    from edgepilot.device.cpusets import cpulist
    from edgepilot.device.process import allowed_cpus
    from edgepilot.tuned.identity import device_id

    raw = json.dumps([device_id(cpu=cpu).fingerprint, cpulist(allowed_cpus())])
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def _read() -> dict[str, dict[str, Any]] | None:
    """Kept figures by key ({} when none or damaged); None when permissions keep the file from us (noted)."""
    path = cache_path()
    try:
        data = loads_json(read_capped(path, CACHE_FILE))
    except OSError as exc:
        if is_denied(exc):
            note_once(
                f"cannot read the memory bandwidth cache {escaped(path)} ({refused_where(path, exc)}): "
                f"bandwidth is measured again and not kept; {DATA_FIX}"
            )
            return None
        return {}
    except (ValueError, UserError):
        return {}
    devices = data.get("devices") if isinstance(data, dict) and data.get("format") == FORMAT else None
    if not isinstance(devices, dict):
        return {}
    return {k: v for k, v in devices.items() if isinstance(k, str) and isinstance(v, dict)}


def _from_entry(entry: dict[str, Any]) -> Bandwidth | None:
    from edgepilot.device.bandwidth import Bandwidth

    known = {f.name for f in fields(Bandwidth)}
    try:
        bw = Bandwidth(**{k: v for k, v in entry.items() if k in known and k not in NOT_KEPT})
        bw.bytes_per_s, bw.seconds = float(bw.bytes_per_s), float(bw.seconds)
        bw.threads, bw.buffer_bytes, bw.passes = int(bw.threads), int(bw.buffer_bytes), int(bw.passes)
        bw.llc_bytes = int(bw.llc_bytes) if bw.llc_bytes else None
        bw.by_threads = {int(t): float(v) for t, v in dict(bw.by_threads).items()}
        bw.method, bw.measured_at = str(bw.method), str(bw.measured_at)
    except (TypeError, ValueError, OverflowError):
        return None  # a damaged or foreign entry: measured again
    bw.cached = True
    return bw if bw.bytes_per_s > 0 and bw.threads > 0 and bw.buffer_bytes > 0 else None


def load(key: str) -> Bandwidth | None:
    entry = (_read() or {}).get(key)
    return _from_entry(entry) if entry is not None else None


def store(key: str, bw: Bandwidth) -> str | None:
    """Keep a figure (the oldest dropped beyond MAX_ENTRIES). The reason when it could not be kept."""
    from edgepilot.safe_write import write_text

    kept = _read()
    if kept is None:
        return f"cannot read {escaped(cache_path())}, so it is not written over"
    kept.pop(key, None)
    kept[key] = {k: v for k, v in asdict(bw).items() if k not in NOT_KEPT}
    kept = dict(list(kept.items())[-MAX_ENTRIES:])
    text = json.dumps({"format": FORMAT, "devices": kept}, indent=1, sort_keys=True) + "\n"
    try:
        writable_data_folder(cache_path().parent, "the memory bandwidth cache")
        write_text(cache_path(), text, what="memory bandwidth cache")
    except UserError as exc:
        return str(exc)
    return None


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
