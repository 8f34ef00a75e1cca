"""A sustained bench in the bench history: a run of kind `sustained` with one result, its steady speed, the
windows kept as JSON beside it."""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

from edgepilot.bench.store import connect, db_path, insert_results, insert_run
from edgepilot.bench.sustained import SustainedReport


def save_sustained(report: SustainedReport, path: Path | None = None) -> int:
    speeds = [w.tokens_per_s for w in report.windows]
    temps = [w.temp_c for w in report.windows if w.temp_c is not None]
    with connect(path) as con:
        run_id = insert_run(con, report, "sustained")
        row = {
            "test": "sustained",
            "n_prompt": 0,
            "n_gen": sum(w.tokens for w in report.windows),
            "n_threads": report.n_threads,
            "n_batch": 2048,
            "n_ubatch": 512,
            "flash_attn": 0,
            "type_k": "f16",
            "type_v": "f16",
            "use_mmap": 1,
            "avg_ts": report.steady_ts,
            "stddev_ts": round(statistics.stdev(speeds), 3) if len(speeds) > 1 else 0.0,
            "samples_ts": json.dumps(speeds),
            "temp_start_c": temps[0] if temps else None,
            "temp_max_c": max(temps) if temps else None,
            "watts": report.watts,
            "joules_per_token": round(1 / report.tokens_per_joule, 4) if report.tokens_per_joule else None,
            "windows": json.dumps([dataclasses.asdict(w) for w in report.windows]),
            "fell_at_s": report.fell_at_s,
            "drop_pct": report.drop_pct,
            "test_time": report.started,
        }
        insert_results(con, run_id, [row])
    report.run_id = run_id
    report.db_path = str(path or db_path())
    return run_id
