"""A model's speed on this device without measuring it again: the bench history first (`edgepilot bench`
keeps every result), else the roofline (memory bandwidth / weight bytes per token), which bounds generation
from above and says nothing of prompt processing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgepilot.bench.store import connect, db_path, readable_history
from edgepilot.errors import UserError
from edgepilot.kept import is_int, is_number
from edgepilot.plan.roofline import bytes_per_token
from edgepilot.tuned.bandwidth_cache import machine_bandwidth
from edgepilot.tuned.identity import device_id, model_id


@dataclass
class KnownSpeed:
    gen_tps: float
    prompt_tps: float
    source: str  # bench-history | roofline
    detail: str  # what it rests on, in words


def _from_history(path: Path, root: Path, db: Path) -> KnownSpeed | None:
    if not readable_history(db):
        return None
    fp, key = device_id(root).fingerprint, model_id(path).key
    with connect(db, create=False) as con:
        rows = con.execute(
            "SELECT x.n_prompt, x.n_gen, x.avg_ts, r.started FROM results x JOIN runs r ON r.id = x.run_id"
            " WHERE r.device_fp = ? AND r.model_key = ? AND x.avg_ts > 0",
            (fp, key),
        ).fetchall()
    rows = [r for r in rows if _usable(r)]  # a damaged row (a string, NULL) is no speed
    gen = max((r["avg_ts"] for r in rows if r["n_gen"] and not r["n_prompt"]), default=None)
    prompt = max((r["avg_ts"] for r in rows if r["n_prompt"] and not r["n_gen"]), default=None)
    if not gen:
        return None
    n, last = len(rows), max(r["started"] for r in rows)
    detail = (
        f"the best of {n} `edgepilot bench` result{'s' if n > 1 else ''} for this model here (last {last})"
    )
    if not prompt:
        detail += "; no prompt result: prompt taken as generation"
    return KnownSpeed(gen, prompt or gen, "bench-history", detail)


def _stored_bandwidth(root: Path, db: Path) -> float | None:
    if not readable_history(db):
        return None
    with connect(db, create=False) as con:
        row = con.execute(
            "SELECT MAX(bandwidth_gbs) FROM runs WHERE device_fp = ?", (device_id(root).fingerprint,)
        ).fetchone()
    gbs = row[0] if row else None
    return gbs * 1e9 if is_number(gbs, 0.1, 1e4) else None  # GB/s: as bandwidth_cache.py's range


def _usable(r: Any) -> bool:
    return (
        is_number(r["avg_ts"], 1e-6, 1e9)
        and (r["n_prompt"] is None or is_int(r["n_prompt"], 0, 1 << 24))
        and (r["n_gen"] is None or is_int(r["n_gen"], 0, 1 << 24))
        and isinstance(r["started"], str)
    )


def _bandwidth(root: Path, db: Path) -> tuple[float, str]:
    """(bytes/s, where it comes from): this memory's kept read bandwidth (measured once when none is kept),
    else one a past bench stored for the device at `root`."""
    kept = machine_bandwidth() if root == Path("/") else None
    if kept is not None:
        return kept.bytes_per_s, f"this memory's read bandwidth: {kept.how()}"
    stored = _stored_bandwidth(root, db)
    if stored is not None:
        return stored, "the bandwidth a past `edgepilot bench` measured there"
    kept = machine_bandwidth() if root != Path("/") else None
    if kept is None:
        raise UserError("no memory bandwidth known for this device; give --speed GEN,PROMPT")
    return kept.bytes_per_s, f"this machine's read bandwidth, for want of that device's: {kept.how()}"


def known_speed(model: Path, root: Path = Path("/"), db: Path | None = None) -> KnownSpeed:
    """The model's generation and prompt t/s on this device (root: the device whose history counts)."""
    db = db or db_path()
    found = _from_history(model, root, db)
    if found is not None:
        return found
    per_token = bytes_per_token(model)
    if not per_token:
        raise UserError(
            f"{model}: cannot read its weight sizes; give --speed GEN,PROMPT (edgepilot bench MODEL)"
        )
    bw, where = _bandwidth(root, db)
    gen = bw / per_token
    detail = (
        f"roofline: {bw / 1e9:.1f} GB/s ({where}) / {per_token / 2**20:.0f} MiB per token, an upper bound; "
        "no prompt figure: prompt taken as generation (`edgepilot bench MODEL` measures both)"
    )
    return KnownSpeed(gen, gen, "roofline", detail)
