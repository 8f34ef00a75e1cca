"""What `cluster plan --link` predicted for a pool, kept where the doctor finds it again: a small JSON file
in the data directory, one entry per set of --rpc helpers (the latest plan for them wins).

The doctor compares a run's measured generation speed (llama.cpp's `eval time` line) with the entry for the
helpers that run used: the `rpc-link-slow` cause.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from edgepilot.datadir import DATA_FIX, data_dir, writable_data_folder
from edgepilot.errors import UserError
from edgepilot.file_errors import cannot_read, escaped, is_denied, note_once, refused_where
from edgepilot.safe_write import atomic_write
from edgepilot.untrusted import open_regular

FILE_NAME = "cluster-plans.json"
MAX_ENTRIES = 64
MAX_BYTES = 1 << 20


@dataclass
class PoolRecord:
    rpc: list[str]  # the helpers, in --rpc order
    model: str  # the model's file name
    link: str  # e.g. 10ms,50Mbit
    gen_tps: float  # predicted over that link
    prompt_tps: float
    speed_source: str  # where the single-device speed came from
    alternative: str | None = None  # the best plan on the main device alone, if one fits
    alternative_tps: float | None = None
    alternative_command: list[str] = field(default_factory=list)
    other_links: dict[str, float] = field(default_factory=dict)  # profile -> predicted generation t/s
    plan_command: list[str] = field(default_factory=list)  # the `cluster plan` to run again
    recorded: float = 0.0  # unix time


def record_path() -> Path:
    return data_dir() / FILE_NAME


def _key(rpc: list[str]) -> str:
    return ",".join(rpc)


def _load(path: Path) -> dict[str, dict]:
    """The records ({} when there are none or the file is damaged); OSError when permissions refuse it."""
    try:
        with open_regular(path) as f:
            data = json.loads(f.read(MAX_BYTES + 1)[:MAX_BYTES])
    except OSError as exc:
        if is_denied(exc):
            raise
        return {}
    except (ValueError, UserError):
        return {}
    return data if isinstance(data, dict) else {}


def save(record: PoolRecord, path: Path | None = None) -> None:
    """Keep the record (an unwritable data directory becomes a UserError, as for bench results; so does one
    we may not read: the other pools' records are not written over)."""
    path = path or record_path()
    record.recorded = record.recorded or time.time()
    try:
        entries = _load(path)
    except OSError as exc:
        raise cannot_read(path, exc, DATA_FIX, what="the cluster plan records") from None
    entries.pop(_key(record.rpc), None)
    entries[_key(record.rpc)] = asdict(record)
    kept = dict(list(entries.items())[-MAX_ENTRIES:])
    writable_data_folder(path.parent, "the cluster plan record")
    with atomic_write(path, what="cluster plan record", mode="w") as f:
        json.dump(kept, f, indent=1)


def find(rpc: list[str], path: Path | None = None) -> PoolRecord | None:
    """The latest plan recorded for exactly these helpers, if any."""
    path = path or record_path()
    try:
        raw = _load(path).get(_key(rpc))
    except OSError as exc:
        note_once(
            f"cannot read the cluster plan records {escaped(path)} ({refused_where(path, exc)}): the doctor "
            f"cannot compare a run with its plan; {DATA_FIX}"
        )
        return None
    if not isinstance(raw, dict):
        return None
    known = {f.name for f in fields(PoolRecord)}
    try:
        return PoolRecord(**{k: v for k, v in raw.items() if k in known})
    except TypeError:
        return None
