"""`bench --sustained`: generation back to back in windows, the steady speed, and a fall when the CPU is taken
away half-way (a cgroup v1 CPU quota tightened while the real CLI runs, as a phone throttling would)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from ctrlckit import ctrl_c_once

CPU_CGROUP = Path("/sys/fs/cgroup/cpu")
DONE = re.compile(r"window (\d+)/(\d+)")


def test_a_short_sustained_bench_reports_windows_and_steady_speed_and_is_kept(cli_app, smollm_path, data_dir):
    res = CliRunner().invoke(
        cli_app, ["bench", str(smollm_path), "--sustained", "12s", "--window", "2", "-t", "1", "--json"]
    )
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    windows = report["windows"]
    assert len(windows) == 6 and report["kind"] == "sustained"
    assert all(w["tokens"] > 0 and w["tokens_per_s"] > 0 for w in windows)
    assert [w["start_s"] for w in windows] == sorted(w["start_s"] for w in windows)
    assert all(len(w["freq_mhz"]) == len(report["clusters"]) for w in windows)
    last = sorted(w["tokens_per_s"] for w in windows[-2:])
    assert report["steady_ts"] == pytest.approx(sum(last) / 2, abs=0.01)  # median of the last third

    with sqlite3.connect(report["db_path"]) as con:
        run = con.execute("SELECT kind, partial FROM runs WHERE id = ?", (report["run_id"],)).fetchone()
        row = con.execute(
            "SELECT test, avg_ts, windows, drop_pct FROM results WHERE run_id = ?", (report["run_id"],)
        ).fetchone()
    assert run == ("sustained", 0)
    assert row[0] == "sustained" and row[1] == report["steady_ts"] and row[3] == report["drop_pct"]
    assert [w["tokens"] for w in json.loads(row[2])] == [w["tokens"] for w in windows]

    history = CliRunner().invoke(cli_app, ["bench", "--history", "--json"])
    assert history.exit_code == 0, history.output
    assert [e["kind"] for e in json.loads(history.stdout)["entries"]] == ["sustained"]

    table = CliRunner().invoke(
        cli_app,
        ["bench", str(smollm_path), "--sustained", "4s", "--window", "2", "--no-save"],
        env={"COLUMNS": "50"},
    )
    assert table.exit_code == 0, table.output
    assert "steady" in table.output and max(len(line) for line in table.output.splitlines()) <= 50


def test_the_fall_is_where_the_speed_stayed_low_not_a_dip_it_came_back_from():
    from edgepilot.bench.sustained import SustainedWindow, summarize

    def report(speeds: list[float]) -> SimpleNamespace:
        windows = [
            SustainedWindow(start_s=4.0 * i, seconds=4.0, tokens=1, tokens_per_s=s)
            for i, s in enumerate(speeds)
        ]
        done = SimpleNamespace(windows=windows)
        summarize(done)
        return done

    dipped = report([130, 128, 131, 104, 106, 127, 24, 22, 23, 21])  # another program for 8 s, then the quota
    assert (
        dipped.fell_at_s == 24.0
        and dipped.steady_ts == 22
        and dipped.drop_pct == pytest.approx(83.1, abs=0.1)
    )
    assert report([130, 128, 131, 104, 106, 127, 129, 130, 128]).fell_at_s is None
    assert report([100, 100, 100, 100, 100, 85]).fell_at_s == 20.0  # the last window alone
    # the CI run of 2026-12-07: the VM slowed 12 % two windows before the quota cut the speed to a fifth
    swung = report([46.2, 51.2, 51.0, 44.7, 44.2, 9.3, 9.1, 9.2, 9.0, 9.2])
    assert swung.fell_at_s == 20.0 and swung.steady_ts == 9.2
    assert report([100, 100, 100, 88, 87, 86]).fell_at_s == 12.0  # a shallow fall: 10 % below is the mark


@pytest.mark.parametrize("bad", ["soon", "1s", "5 weeks"])
def test_a_bad_duration_is_one_line_and_exit_2(cli_app, smollm_path, bad):
    res = CliRunner().invoke(cli_app, ["bench", str(smollm_path), "--sustained", bad])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert re.search(r"cannot read --sustained|--sustained '1s' is too short", res.output), res.output


def _join_cgroup(group: Path) -> None:
    (group / "cgroup.procs").write_text(str(os.getpid()))


@pytest.mark.skipif(not (CPU_CGROUP / "cpu.cfs_quota_us").exists(), reason="needs cgroup v1's cpu controller")
def test_a_quota_tightened_half_way_shows_as_a_fall_in_the_second_half(smollm_path, data_dir):
    group = CPU_CGROUP / f"edgepilot-sustained-{os.getpid()}"
    group.mkdir()
    try:
        (group / "cpu.shares").write_text(
            "8192"
        )  # the busy machine's other work does not blur the first half
        (group / "cpu.cfs_quota_us").write_text("-1")
        env = {**os.environ, "EDGEPILOT_PROGRESS_SECONDS": "0.5", "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, "-m", "edgepilot", "bench", str(smollm_path)]
        cmd += ["--sustained", "50s", "--window", "5", "-t", "1", "--json"]
        child = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            preexec_fn=lambda: _join_cgroup(group),
        )
        tightened: list[float] = []

        def watch() -> None:
            for line in child.stderr:
                found = DONE.search(line.decode(errors="replace"))
                if found and not tightened and int(found.group(1)) > 5:  # the sixth of ten windows began
                    (group / "cpu.cfs_quota_us").write_text("20000")  # 20 % of one CPU per 100 ms
                    tightened.append(time.monotonic())

        reader = threading.Thread(target=watch, daemon=True)
        reader.start()
        out, _ = child.communicate(timeout=600)
        reader.join(timeout=10)
        assert child.returncode == 0
        assert tightened, "the progress never reached the second half"
        report = json.loads(out)
        speeds = [w["tokens_per_s"] for w in report["windows"]]
        assert len(speeds) == 10
        assert report["steady_ts"] < 0.6 * report["first_ts"], speeds
        assert report["drop_pct"] > 40, speeds
        # the second half, or the window before it: unbound, the speed here swings by 15 % (other work)
        assert report["fell_at_s"] is not None and report["fell_at_s"] >= 19.5, speeds
    finally:
        for pid in (group / "cgroup.procs").read_text().split():
            (CPU_CGROUP / "cgroup.procs").write_text(pid)
        group.rmdir()


def test_ctrl_c_keeps_the_windows_measured(smollm_path, data_dir):
    args = ["bench", str(smollm_path), "--sustained", "60s", "--window", "2", "-t", "1", "--json"]
    code, out = ctrl_c_once(args, DONE, 3, every="0.5")  # two windows done
    assert code == 130
    report = json.loads(out)
    assert report["partial"] and 2 <= len(report["windows"]) < 30 and report["steady_ts"] > 0
    with sqlite3.connect(report["db_path"]) as con:
        assert con.execute("SELECT partial FROM runs WHERE id = ?", (report["run_id"],)).fetchone() == (1,)
