"""Where CPU library checks (cpu_check.py) are remembered: `cpu-checks.json` in the data folder.

A check loads a model in a child process, so it runs once per llama.cpp library (or program) and CPU: the key
hashes the file's real path, size and mtime, the CPU's flags, LD_PRELOAD (a library loaded into every
process changes what runs) and QEMU_CPU (the CPU qemu-user acts out). The file is input like any other:
read bounded (a regular file, at most CACHE_FILE bytes, JSON depth-limited), each entry's fields checked for
type; the writer keeps it under the reader's cap. Only verdicts are kept (`ok`, `crashed`, `failed`): a
timeout is not one.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from edgepilot.digest import sha256_hex
from edgepilot.kept import KeyedCache

CACHE_NAME = "cpu-checks.json"
CACHE_FILE = 128 << 10
MAX_ENTRIES = 32
FORMAT = 1
KEPT_OUTCOMES = ("ok", "crashed", "failed")
MAX_TEXT = 400
MAX_LINES = 12
CACHE = KeyedCache(
    name=CACHE_NAME, section="checks", most=MAX_ENTRIES, form=FORMAT, limit=CACHE_FILE,
    what="the CPU check cache", then="the library is checked again",
    refused="the library is checked again and the result not kept",
)  # fmt: skip


def _stat(path: Path) -> str:
    try:
        real = path.resolve()
        st = os.stat(real)
    except (OSError, RuntimeError):
        return f"{path}:absent"
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


def check_key(engine: str, files: list[Path], cpu_flags: list[str]) -> str:
    """What decides whether a check still holds: the engine, its files, this CPU's flags, LD_PRELOAD."""
    identity = {
        "engine": engine,
        "files": [_stat(f) for f in files],
        "cpu": sorted(cpu_flags),
        "preload": os.environ.get("LD_PRELOAD", "")[:1000],
        "qemu_cpu": os.environ.get("QEMU_CPU", "")[:100],  # qemu-user: the CPU it acts out
    }
    return sha256_hex(json.dumps(identity, sort_keys=True))[:24]


def _text(value: Any, limit: int = MAX_TEXT) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def valid_check(entry: Any) -> dict[str, Any] | None:
    """One remembered check with every field of the right type, else None (a damaged entry is not used)."""
    if not isinstance(entry, dict) or entry.get("outcome") not in KEPT_OUTCOMES:
        return None
    seconds = entry.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds):
        return None
    if seconds < 0:
        return None
    code = entry.get("exit_code")
    if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
        return None
    detail, mode = _text(entry.get("detail")), _text(entry.get("mode"), 40)
    if detail is None or mode not in ("full", "plain"):
        return None
    lines = entry.get("evidence", [])
    built = entry.get("built_with", [])
    if not isinstance(lines, list) or not isinstance(built, list):
        return None
    return {
        "outcome": entry["outcome"],
        "mode": mode,
        "seconds": float(seconds),
        "detail": detail,
        "signal": _text(entry.get("signal"), 20),
        "exit_code": code,
        "evidence": [t for t in (_text(x) for x in lines[:MAX_LINES]) if t is not None],
        "built_with": [t for t in (_text(x, 20) for x in built[:64]) if t is not None],
        "target": _text(entry.get("target"), 1000) or "",
        "checked_at": _text(entry.get("checked_at"), 40),
    }


def load(key: str, quiet: bool = False) -> dict[str, dict[str, Any]] | None:
    """The remembered modes of one key: {"full": check, "plain": check?}; None when there is none usable.
    quiet: say nothing of a file the permissions keep from us (fit and probe only look)."""
    entry = (CACHE.entries(quiet) or {}).get(key)
    if not isinstance(entry, dict):
        return None
    full = valid_check(entry.get("full"))
    if full is None:
        return None
    plain = valid_check(entry.get("plain")) if entry.get("plain") is not None else None
    return {"full": full, **({"plain": plain} if plain else {})}


def store(key: str, modes: dict[str, dict[str, Any]]) -> str | None:
    """Remember one library's checks (oldest dropped first, and again until the file is under its cap).
    The reason when it could not be saved."""
    from edgepilot.engine.checked_run import checked_at_now  # its child-run machinery: only when storing

    return CACHE.store(key, {**modes, "stored_at": checked_at_now()})
