"""Every bench/tune result in one SQLite file under the user's data directory (the history view over it:
edgepilot.bench.history).

Location: edgepilot.datadir.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from edgepilot.bench.results import BenchReport, BenchRow
from edgepilot.datadir import DATA_ELSEWHERE, DATA_FIX, data_dir, writable_data_folder
from edgepilot.device.cpusets import cpulist
from edgepilot.errors import UserError
from edgepilot.file_errors import (
    cannot_read,
    escaped,
    is_denied,
    not_a_directory,
    note_once,
    read_only_file_fix,
)
from edgepilot.safe_write import check_target

DB_NAME = "bench.sqlite"
SCHEMA_VERSION = 6  # 2: results.repack; 3: results.device, results.n_gpu_layers; 4: runs.partial;
# 5: results.windows, fell_at_s, drop_pct (bench --sustained); 6: results.speculation, text_kind,
# acceptance_rate (tune --speculation)
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    started TEXT NOT NULL,
    kind TEXT NOT NULL,                 -- bench | tune | sustained
    device_fp TEXT NOT NULL,
    device TEXT,
    model_key TEXT NOT NULL,
    model_name TEXT,
    model_path TEXT,
    model_size INTEGER,
    model_type TEXT,
    bandwidth_gbs REAL,
    bytes_per_token INTEGER,
    seconds REAL,
    build TEXT,                         -- JSON: versions
    partial INTEGER DEFAULT 0           -- 1: stopped (Ctrl-C) before every test ran
);
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    test TEXT NOT NULL,
    n_prompt INTEGER, n_gen INTEGER, n_threads INTEGER, cores TEXT,
    n_batch INTEGER, n_ubatch INTEGER, flash_attn INTEGER, type_k TEXT, type_v TEXT, use_mmap INTEGER,
    repack INTEGER DEFAULT 1,
    device TEXT DEFAULT 'none', n_gpu_layers INTEGER DEFAULT 0,
    avg_ts REAL, stddev_ts REAL, samples_ts TEXT,
    temp_start_c REAL, temp_max_c REAL, watts REAL, joules_per_token REAL, throttled INTEGER, roofline REAL,
    test_time TEXT,
    windows TEXT, fell_at_s REAL, drop_pct REAL,  -- sustained: JSON windows, when and how far speed fell
    speculation TEXT, text_kind TEXT, acceptance_rate REAL  -- tune --speculation: plain | lookup | draft
);
CREATE INDEX IF NOT EXISTS results_run ON results(run_id);
CREATE INDEX IF NOT EXISTS runs_device_model ON runs(device_fp, model_key);
"""


# Columns later schemas added to `results` (name, type, default), the default being what older results
# were measured with: repacking on (before --repack), the CPU (before --device).
ADDED_COLUMNS = (
    ("repack", "INTEGER", "1"),
    ("device", "TEXT", "'none'"),
    ("n_gpu_layers", "INTEGER", "0"),
    ("windows", "TEXT", "NULL"),
    ("fell_at_s", "REAL", "NULL"),
    ("drop_pct", "REAL", "NULL"),
    ("speculation", "TEXT", "NULL"),
    ("text_kind", "TEXT", "NULL"),
    ("acceptance_rate", "REAL", "NULL"),
)
# ... and to `runs`: older runs ran to the end.
ADDED_RUN_COLUMNS = (("partial", "INTEGER", "0"),)


HISTORY = "the bench history"
NO_SAVE = "give --no-save"
# For a history file of another user: a copy is the user's own to add to.
HISTORY_ELSEWHERE = "copy it into a folder you own and set EDGEPILOT_DATA_DIR to that folder"
# SQLite's primary result codes for a database or folder it may not write (sqlite3.h)
SQLITE_PERM, SQLITE_READONLY, SQLITE_CANTOPEN = 3, 8, 14


def db_path() -> Path:
    return data_dir() / DB_NAME


def history_exists(path: Path) -> bool:
    """Whether the history file exists (False: none yet); a UserError when permissions keep it from us."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except NotADirectoryError:  # a file where the data folder should be: not "no results yet"
        raise not_a_directory(path.parent, DATA_ELSEWHERE, what="the data folder") from None
    except OSError as exc:
        if is_denied(exc):
            raise cannot_read(path, exc, DATA_FIX, what=HISTORY) from None
        return False
    if not os.access(path, os.R_OK):
        raise cannot_read(path, PermissionError(errno.EACCES, "Permission denied"), DATA_FIX, what=HISTORY)
    return True


def readable_history(path: Path | None = None) -> bool:
    """Whether there is a history to read; one the permissions keep from us is left out with a note (for
    what only takes a hint from it)."""
    try:
        return history_exists(path or db_path())
    except UserError as exc:
        note_once(f"{HISTORY} is left out: {exc}")
        return False


def check_writable(path: Path | None = None) -> None:
    """A UserError unless results can be added to the history (before bench or tune measures for minutes)."""
    path = path or db_path()
    writable_data_folder(path.parent, HISTORY, NO_SAVE)
    if history_exists(path) and not os.access(path, os.W_OK):
        fix = _write_fix(path)
        raise UserError(f"cannot write {HISTORY} {escaped(path)}: it is read-only for you; {fix}")


def _write_fix(path: Path, also: str = NO_SAVE) -> str:
    """What to do when the history may not be written: chmod a file of one's own, copy another's; `also`
    the way round it (bench and tune's --no-save)."""
    if os.path.exists(path) and not os.access(path, os.W_OK):
        fix = read_only_file_fix(path, HISTORY_ELSEWHERE)
    else:
        fix = DATA_FIX
    return f"{fix}, or {also}" if also else fix


def _refused_by_sqlite(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (SQLITE_PERM, SQLITE_READONLY, SQLITE_CANTOPEN)
    return "readonly" in str(exc) or "unable to open" in str(exc)


@contextlib.contextmanager
def connect(path: Path | None = None, create: bool = True) -> Iterator[sqlite3.Connection]:
    """The history to add results to (create: made when missing, its schema brought up to date), or to
    read (not create: opened read-only and never written, an older schema read as it is)."""
    path = path or db_path()
    if create:
        writable_data_folder(path.parent, HISTORY, NO_SAVE)
    if history_exists(path) and not create:
        _a_regular_file(path)
    check_target(path, what="results database")  # a FIFO or device there is not a database
    try:
        if create:
            con = sqlite3.connect(path, timeout=10)
        else:
            con = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=10)
    except (OSError, sqlite3.Error) as exc:
        raise UserError(f"cannot open {HISTORY} {escaped(path)}: {exc}; {DATA_ELSEWHERE}") from None
    try:
        con.row_factory = sqlite3.Row
        con.execute("PRAGMA foreign_keys = ON")
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise UserError(f"{path} was written by a newer edgepilot (schema {version}); upgrade edgepilot")
        if version != SCHEMA_VERSION:
            (_migrate if create else _as_current_schema)(con)
        with con:
            yield con
    except sqlite3.DatabaseError as exc:
        if _refused_by_sqlite(exc) and create:
            raise UserError(f"cannot write {HISTORY} {escaped(path)}: {exc}; {_write_fix(path)}") from None
        if _refused_by_sqlite(exc):  # e.g. an unfinished write's journal to roll back first
            raise cannot_read(path, str(exc), _write_fix(path, also=""), what=HISTORY) from None
        raise UserError(
            f"the results database {path} is unusable ({exc}); move it away to start afresh"
        ) from None
    finally:
        con.close()


def _a_regular_file(path: Path) -> None:
    """The history to read is a regular file (SQLite would block on a FIFO); one line otherwise."""
    from edgepilot.untrusted import file_kind

    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise UserError(
            f"{HISTORY} {escaped(path)} is {file_kind(mode)}, not a file; move it away to start afresh"
        )


def _migrate(con: sqlite3.Connection) -> None:
    con.executescript(SCHEMA)
    have = {row[1] for row in con.execute("PRAGMA table_info(results)")}
    for column, kind, default in ADDED_COLUMNS:
        if column not in have:
            con.execute(f"ALTER TABLE results ADD COLUMN {column} {kind} DEFAULT {default}")
    have = {row[1] for row in con.execute("PRAGMA table_info(runs)")}
    for column, kind, default in ADDED_RUN_COLUMNS:
        if column not in have:
            con.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind} DEFAULT {default}")
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _as_current_schema(con: sqlite3.Connection) -> None:
    """An older history seen as the current schema without a write to it (it may be read-only, or another
    user's): a table it lacks as an empty temporary one, the columns later schemas added to `results` as
    their defaults through a temporary view. Temporary objects are found before the file's own."""
    con.execute("PRAGMA temp_store = MEMORY")  # no temporary file: TMPDIR may not be writable either
    tables = {row[0] for row in con.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")}
    for statement in SCHEMA.split(";"):
        words = statement.split()
        if words[:5] == ["CREATE", "TABLE", "IF", "NOT", "EXISTS"] and words[5] not in tables:
            con.execute(statement.replace("CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE", 1))
    for table, columns in (("results", ADDED_COLUMNS), ("runs", ADDED_RUN_COLUMNS)):
        if table not in tables:
            continue
        have = {row[1] for row in con.execute(f"PRAGMA main.table_info({table})")}
        added = [f"{default} AS {column}" for column, _, default in columns if column not in have]
        if added:
            con.execute(f"CREATE TEMP VIEW {table} AS SELECT *, {', '.join(added)} FROM main.{table}")


def insert_run(
    con: sqlite3.Connection,
    report: Any,
    kind: str,
    bandwidth_gbs: float | None = None,
    bytes_per_token: int | None = None,
) -> int:
    """The `runs` row of a report (bench, tune or sustained: each has started, device, model, seconds, build,
    partial); its id."""
    cur = con.execute(
        "INSERT INTO runs (started, kind, device_fp, device, model_key, model_name, model_path,"
        " model_size, model_type, bandwidth_gbs, bytes_per_token, seconds, build, partial)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            report.started,
            kind,
            report.device.fingerprint,
            report.device.description,
            report.model.key,
            report.model.name,
            report.model.path,
            report.model.size,
            report.model.type,
            bandwidth_gbs,
            bytes_per_token,
            report.seconds,
            json.dumps(report.build),
            int(report.partial),
        ),
    )
    return int(cur.lastrowid)


def insert_results(con: sqlite3.Connection, run_id: int, rows: list[dict[str, Any]]) -> None:
    """`results` rows of a run, each a {column: value} of the same columns (named here, never from input)."""
    if not rows:
        return
    columns = ["run_id", *rows[0]]
    sql = f"INSERT INTO results ({', '.join(columns)}) VALUES ({','.join('?' * len(columns))})"
    con.executemany(sql, [(run_id, *row.values()) for row in rows])


def save_report(report: BenchReport, kind: str = "bench", path: Path | None = None) -> int:
    with connect(path) as con:
        run_id = insert_run(con, report, kind, report.bandwidth_gbs, report.bytes_per_token)
        insert_results(con, run_id, [_result_values(row) for row in report.rows])
    report.run_id = run_id
    report.db_path = str(path or db_path())
    return run_id


def _result_values(row: BenchRow) -> dict[str, Any]:
    return {
        "test": row.test,
        "n_prompt": row.n_prompt,
        "n_gen": row.n_gen,
        "n_threads": row.n_threads,
        "cores": cpulist(row.cores) if row.cores else None,
        "n_batch": row.n_batch,
        "n_ubatch": row.n_ubatch,
        "flash_attn": int(row.flash_attn),
        "type_k": row.type_k,
        "type_v": row.type_v,
        "use_mmap": int(row.use_mmap),
        "repack": int(row.repack),
        "device": row.device,
        "n_gpu_layers": row.n_gpu_layers,
        "avg_ts": row.avg_ts,
        "stddev_ts": row.stddev_ts,
        "samples_ts": json.dumps(row.samples_ts),
        "temp_start_c": row.temp_start_c,
        "temp_max_c": row.temp_max_c,
        "watts": row.watts,
        "joules_per_token": row.joules_per_token,
        "throttled": None if row.throttled is None else int(row.throttled),
        "roofline": row.roofline,
        "test_time": row.test_time,
        "speculation": row.speculation,
        "text_kind": row.text_kind,
        "acceptance_rate": row.acceptance_rate,
    }
