"""A sustained bench in the bench history: a run of kind `sustained` with one result, its steady speed, the
windows kept as JSON beside it."""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

from edgepilot.bench.store import connect, db_path, insert_run
from edgepilot.bench.sustained import SustainedReport


def save_sustained(report: SustainedReport, path: Path | None = None) -> int:
    speeds = [w.tokens_per_s for w in report.windows]
    temps = [w.temp_c for w in report.windows if w.temp_c is not None]
    with connect(path) as con:
        run_id = insert_run(con, report, "sustained")
        con.execute(
            "INSERT INTO results (run_id, test, n_prompt, n_gen, n_threads, n_batch, n_ubatch, flash_attn,"
            " type_k, type_v, use_mmap, avg_ts, stddev_ts, samples_ts, temp_start_c, temp_max_c, watts,"
            " joules_per_token, windows, fell_at_s, drop_pct, test_time)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                run_id,
                "sustained",
                0,
                sum(w.tokens for w in report.windows),
                report.n_threads,
                2048,
                512,
                0,
                "f16",
                "f16",
                1,
                report.steady_ts,
                round(statistics.stdev(speeds), 3) if len(speeds) > 1 else 0.0,
                json.dumps(speeds),
                temps[0] if temps else None,
                max(temps) if temps else None,
                report.watts,
                round(1 / report.tokens_per_joule, 4) if report.tokens_per_joule else None,
                json.dumps([dataclasses.asdict(w) for w in report.windows]),
                report.fell_at_s,
                report.drop_pct,
                report.started,
            ),
        )
    report.run_id = run_id
    report.db_path = str(path or db_path())
    return run_id
