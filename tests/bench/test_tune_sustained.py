"""`tune --sustained`: the burst search's best settings compared over sustained windows, the one holding the
best speed kept. Throttling is a cgroup v1 CPU quota of one CPU, set by the test the moment tune's progress
says its sustained windows begin: two threads then share one CPU's time, as a hot phone's cores are held to
a lower clock, while the burst before ran on both cores."""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from ctrlckit import ctrl_c_once
from rich.console import Console

from edgepilot.bench.sustained import SustainedWindow
from edgepilot.bench.tune_sustained import SustainedCandidate, SustainedTune, choose

CPU_CGROUP = Path("/sys/fs/cgroup/cpu")
WINDOW = re.compile(r"sustained · .* window (\d+)/(\d+)")


def _move(pid: int, group: Path) -> None:
    (group / "cgroup.procs").write_text(str(pid))


@pytest.mark.skipif(not (CPU_CGROUP / "cpu.cfs_quota_us").exists(), reason="needs cgroup v1's cpu controller")
def test_a_quota_that_punishes_threads_makes_sustained_keep_fewer_than_the_burst(gemma_path, data_dir):
    from edgepilot.bench.tune import TuneRequest, run_tune
    from edgepilot.cli.bench_render import render_tune
    from edgepilot.jsonable import dumps

    group = CPU_CGROUP / f"edgepilot-tune-sustained-{os.getpid()}"
    group.mkdir()
    tightened: list[str] = []

    def progress(description: str, _done: int, _total: int) -> None:
        if description.startswith("sustained") and not tightened:
            (group / "cpu.cfs_quota_us").write_text(str(int((group / "cpu.cfs_period_us").read_text())))
            tightened.append(description)

    try:
        # the busy machine's other work does not decide the burst: 2 threads beat 1 on both cores
        (group / "cpu.shares").write_text("262144")
        (group / "cpu.cfs_quota_us").write_text("-1")
        _move(os.getpid(), group)
        request = TuneRequest(n_prompt=64, n_gen=64, repack=False, sustained_s=12.0, window_s=2.0)
        report = run_tune(gemma_path, request, progress=progress, engine="inprocess")
    finally:
        _move(os.getpid(), CPU_CGROUP)
        group.rmdir()

    assert tightened, "the progress never said the sustained windows began"
    data = json.loads(dumps(report))
    tg = [(t["phase"], t["n_threads"], t["ts"]) for t in data["trials"] if t["test"] == "tg"]
    sustained = data["sustained"]
    pick, *others = sustained["candidates"]
    assert pick["burst_pick"] and pick["n_threads"] == 2, tg  # the burst winner is compared first
    assert [c["n_threads"] for c in others] == [1]  # the one with fewer threads, even if the scan left it
    assert all(len(c["windows"]) == 3 and c["steady_ts"] > 0 for c in sustained["candidates"])
    (kept,) = [c for c in sustained["candidates"] if c["chosen"]]
    assert kept["n_threads"] < pick["n_threads"], sustained
    assert kept["steady_ts"] > pick["steady_ts"] and sustained["why"], sustained
    assert data["chosen_by"] == "sustained" and data["gen"]["n_threads"] == kept["n_threads"]
    profile = data["profile"]
    assert profile["chosen_by"] == "sustained" and profile["n_threads"] == kept["n_threads"]
    assert profile["sustained_tps"] == kept["steady_ts"]
    assert Path(data["profile_path"]).name.endswith(".sustained.json")

    console = Console(width=50, record=True, force_terminal=False)
    render_tune(report, console)
    text = console.export_text()
    table = text[text.index("burst vs sustained") : text.index("\ngeneration ")]
    assert max(len(line) for line in table.splitlines()) <= 50, table
    for c in sustained["candidates"]:  # burst and steady speeds of both, side by side on one row
        assert re.search(
            rf"^\W*{c['n_threads']} .*{c['burst_ts']:.2f} .*{c['steady_ts']:.2f}", table, re.M
        ), table
    assert "sustained pick: 1 thread on" in table and "b: the burst pick" in table
    assert "(chosen by sustained speed: serve prefers it)" in text


def test_the_cli_takes_a_duration_and_window_and_saves_a_sustained_profile(cli_app, smollm_path, data_dir):
    args = ["tune", str(smollm_path), "-p", "32", "-n", "8", "-r", "2", "--no-repack", "--device", "none"]
    res = CliRunner().invoke(cli_app, [*args, "--sustained", "4s", "--window", "1", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    candidates = data["sustained"]["candidates"]
    assert data["sustained"]["window_s"] == 1.0 and candidates[0]["burst_pick"]
    assert len([c for c in candidates if c["chosen"]]) == 1 and all(c["windows"] for c in candidates)
    assert data["chosen_by"] == "sustained"
    saved = [p.name for p in (data_dir / "profiles").iterdir()]
    assert len(saved) == 1 and saved[0].endswith(".sustained.json")

    shown = CliRunner().invoke(cli_app, ["tune", str(smollm_path), "--show", "--json"])
    assert json.loads(shown.stdout)["profile"]["chosen_by"] == "sustained"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sustained", "soon"], "cannot read --sustained"),
        (["--sustained", "1s"], "too short"),
        (["--sustained", "10s", "--window", "20"], "--window must be between"),
        (["--window", "2"], "--window goes with --sustained"),
        (["--sustained", "10s", "--engine", "tools"], "needs the in-process engine"),
    ],
)
def test_bad_sustained_input_is_one_line_and_exit_2(cli_app, smollm_path, args, message):
    res = CliRunner().invoke(cli_app, ["tune", str(smollm_path), *args])
    assert res.exit_code == 2 and message in res.stderr and res.stderr.count("\n") == 1, res.output


def test_ctrl_c_in_the_sustained_windows_keeps_them_and_saves_no_profile(smollm_path, data_dir):
    args = ["tune", str(smollm_path), "-p", "32", "-n", "8", "-r", "2"]
    args += ["--no-repack", "--device", "none", "--sustained", "60s", "--window", "1", "--json"]
    code, out = ctrl_c_once(args, WINDOW, 4, every="0.2")  # three windows done
    assert code == 130
    report = json.loads(out)
    sustained = report["sustained"]
    assert report["partial"] and sustained["partial"] and report["profile"] is None
    windows = [w for c in sustained["candidates"] for w in c["windows"]]
    assert len(windows) >= 3 and all(w["tokens_per_s"] > 0 for w in windows)
    assert not any(c["chosen"] for c in sustained["candidates"])
    assert any("sustained window" in n and "no profile saved" in n for n in report["notes"])
    assert not (data_dir / "profiles").exists() or not any((data_dir / "profiles").iterdir())
    with sqlite3.connect(data_dir / "bench.sqlite") as con:
        assert con.execute("SELECT kind, partial FROM runs").fetchall() == [("tune", 1)]


def _held(n_threads: int, burst: float, speeds: list[float], pick: bool = False) -> SustainedCandidate:
    windows = [
        SustainedWindow(start_s=2.0 * i, seconds=2.0, tokens=int(s * 2), tokens_per_s=s)
        for i, s in enumerate(speeds)
    ]
    return SustainedCandidate(n_threads, "0-7", False, burst, burst_pick=pick, windows=windows)


def test_within_the_tie_fewer_threads_are_kept_and_the_line_says_so():
    same = SustainedTune(60.0, 2.0, 3, [], [_held(8, 20.0, [19, 15, 10], True), _held(4, 15.0, [10, 10, 10])])
    choose(same)
    assert [c.chosen for c in same.candidates] == [False, True]
    assert "within 3% of the burst pick, 8 threads, 10.0" in same.why and "fewer threads" in same.why
    held = SustainedTune(60.0, 2.0, 3, [], [_held(8, 20.0, [20, 20, 20], True), _held(4, 15.0, [19, 19, 19])])
    choose(held)
    assert held.kept is held.candidates[0] and held.why is None  # the burst pick held: nothing to explain
