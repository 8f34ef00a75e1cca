"""The history view over the bench store: the latest results on a device, each against its previous run."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot.bench.store import HISTORY, connect, db_path, history_exists
from edgepilot.kept import MAX_COUNT, Dropped, is_int, is_number
from edgepilot.tuned.identity import DeviceId


def has_compared_results(path: Path | None = None) -> bool:
    """Whether any stored result was measured on a GPU or in a speculation trial: results the doctor compares
    (a cheap question before a per-model one)."""
    path = path or db_path()
    if not history_exists(path):
        return False
    with connect(path, create=False) as con:
        query = "SELECT 1 FROM results WHERE device != 'none' OR speculation IS NOT NULL LIMIT 1"
        return con.execute(query).fetchone() is not None


MAX_TPS = 1e9  # tokens per second no device makes: a damaged row
SPECULATION = ("plain", "lookup", "draft")  # tune --speculation's rows
# What a test, a device and a kind of text are named (pp512+tg128, RPC[10.0.0.2:50052], chat): one word on
# one line. The doctor reads these rows as lines of a log: a value that carries a line of its own is damage.
NAME = re.compile(r"[\w.:+,\[\]/@-]{1,120}")
TEXT_KIND = re.compile(r"\w{1,32}")


def _named(value: object, pattern: re.Pattern[str]) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def usable_row(r: sqlite3.Row, dropped: Dropped) -> bool:
    """A result row whose values have their types and ranges (the history is a file anyone may have
    written: SQLite keeps a string in a REAL column and NaN as NULL); else said in `dropped`."""
    optional = lambda v: v is None or is_number(v, 0, MAX_TPS)  # noqa: E731
    checks = {
        "avg_ts": is_number(r["avg_ts"], 0, MAX_TPS),
        "stddev_ts": optional(r["stddev_ts"]),
        "roofline": optional(r["roofline"]),
        "n_threads": r["n_threads"] is None or is_int(r["n_threads"], 0, MAX_COUNT),
        "n_ubatch": r["n_ubatch"] is None or is_int(r["n_ubatch"], 0, MAX_COUNT),
        "n_gpu_layers": r["n_gpu_layers"] is None or is_int(r["n_gpu_layers"], 0, MAX_COUNT),
        "flash_attn": r["flash_attn"] is None or is_int(r["flash_attn"], 0, 1),
        "throttled": r["throttled"] is None or is_int(r["throttled"], 0, 1),
        "partial": r["partial"] is None or is_int(r["partial"], 0, 1),
        "test": _named(r["test"], NAME),
        "cores": r["cores"] is None or isinstance(r["cores"], str),
        "device": r["device"] is None or _named(r["device"], NAME),
        "model_name": r["model_name"] is None or isinstance(r["model_name"], str),
        "started": isinstance(r["started"], str),
        "kind": isinstance(r["kind"], str),
        "speculation": r["speculation"] is None or r["speculation"] in SPECULATION,
        "text_kind": r["text_kind"] is None or _named(r["text_kind"], TEXT_KIND),
        "acceptance_rate": r["acceptance_rate"] is None or is_number(r["acceptance_rate"], 0, 1),
    }
    bad = next((name for name, ok in checks.items() if not ok), None)
    if bad is not None:
        dropped.drop(f"result {r['id']} {bad}", r[bad])
    return bad is None


@dataclass
class HistoryEntry:
    run_id: int
    started: str
    kind: str
    model_name: str
    test: str
    n_threads: int
    cores: str | None
    n_ubatch: int
    flash_attn: bool
    avg_ts: float
    stddev_ts: float
    previous_ts: float | None  # the same test with the same settings, the run before
    change: float | None  # avg_ts / previous_ts - 1
    best_ts: float  # best ever for the same test and settings
    throttled: bool | None
    roofline: float | None
    device: str = "none"  # llama.cpp's -dev the result was measured on
    n_gpu_layers: int = 0
    partial: bool = False  # its run was stopped (Ctrl-C) before every test ran
    # tune --speculation: plain | lookup | draft, the kind of text, the share of drafts kept
    speculation: str | None = None
    text_kind: str | None = None
    acceptance_rate: float | None = None

    @property
    def label(self) -> str:
        """The test as the history shows it: `tg64 lookup/chat` for a speculation row."""
        return f"{self.test} {self.speculation}/{self.text_kind}" if self.speculation else self.test


@dataclass
class History:
    db_path: str
    device: DeviceId
    model: str | None
    entries: list[HistoryEntry] = field(default_factory=list)
    runs: int = 0
    other_devices: int = 0  # runs stored for other device fingerprints (not shown)


def history(
    device_fp: str,
    device_desc: str,
    model_key: str | None = None,
    model_label: str | None = None,
    limit: int = 40,
    path: Path | None = None,
) -> History:
    """The latest results on this device (optionally one model), each compared with its previous run."""
    path = path or db_path()
    result = History(str(path), DeviceId(device_fp, device_desc), model_label)
    if not history_exists(path):
        return result
    with connect(path, create=False) as con:
        where, args = "r.device_fp = ?", [device_fp]
        if model_key:
            where += " AND r.model_key = ?"
            args.append(model_key)
        rows = con.execute(
            "SELECT x.*, r.started, r.kind, r.model_name, r.model_key, r.partial"
            f" FROM results x JOIN runs r ON r.id = x.run_id WHERE {where} ORDER BY x.run_id, x.id",
            args,
        ).fetchall()
        result.runs = con.execute(f"SELECT COUNT(*) FROM runs r WHERE {where}", args).fetchone()[0]
        result.other_devices = con.execute(
            "SELECT COUNT(*) FROM runs WHERE device_fp != ?", (device_fp,)
        ).fetchone()[0]
    last_seen: dict[tuple, float] = {}
    best: dict[tuple, float] = {}
    entries: list[HistoryEntry] = []
    dropped = Dropped(path, HISTORY, "those results are not shown")
    rows = [r for r in rows if usable_row(r, dropped)]
    dropped.note()
    for r in rows:
        key = (
            r["model_key"],
            r["test"],
            r["n_threads"],
            r["cores"],
            r["n_ubatch"],
            r["flash_attn"],
            r["type_k"],
            r["type_v"],
            r["n_batch"],
            r["repack"],
            r["device"],
            r["n_gpu_layers"],
            r["speculation"],
            r["text_kind"],
        )
        prev = last_seen.get(key)
        best[key] = max(best.get(key, 0.0), r["avg_ts"])
        entries.append(
            HistoryEntry(
                run_id=r["run_id"],
                started=r["started"],
                kind=r["kind"],
                model_name=r["model_name"],
                test=r["test"],
                n_threads=r["n_threads"],
                cores=r["cores"],
                n_ubatch=r["n_ubatch"],
                flash_attn=bool(r["flash_attn"]),
                avg_ts=r["avg_ts"],
                stddev_ts=r["stddev_ts"] or 0.0,
                previous_ts=prev,
                change=round(r["avg_ts"] / prev - 1, 4) if prev else None,
                best_ts=best[key],
                throttled=None if r["throttled"] is None else bool(r["throttled"]),
                roofline=r["roofline"],
                device=r["device"] or "none",
                n_gpu_layers=r["n_gpu_layers"] or 0,
                partial=bool(r["partial"]),
                speculation=r["speculation"],
                text_kind=r["text_kind"],
                acceptance_rate=r["acceptance_rate"],
            )
        )
        last_seen[key] = r["avg_ts"]
    result.entries = entries[-limit:]
    return result
