"""Ctrl-C in bench and tune keeps what was measured: a real SIGINT to a real `edgepilot bench` / `tune`
process once its progress says a test is done. Before, bench and tune ended with "error: interrupted" and the
finished tests were lost; now they are printed, saved in the history marked partial, and the exit status
still says Ctrl-C (130).

"process": SIGINT to edgepilot alone (`kill -INT`); "terminal": to its whole process group, as Ctrl-C in a
terminal sends it, so llama-bench (the tools engine) gets it too."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading

import pytest

DEADLINE = 300.0  # a loaded 2-core machine: the first test must finish within this
DONE = re.compile(" · (\\d+) of (\\d+) · ".encode())  # the progress line off a terminal (cli/progress.py)


def _engine(engine: str) -> list[str]:
    if engine == "tools":
        from nativekit import native_tool

        native_tool("llama-bench")
    return ["--engine", engine]


def _interrupt_after(argv: list[str], units: int, data_dir, how: str) -> tuple[int, str, str]:
    """Run argv; once its progress line counts `units` done, Ctrl-C. (exit status, stdout, stderr)"""
    env = {**os.environ, "EDGEPILOT_DATA_DIR": str(data_dir), "EDGEPILOT_PROGRESS_SECONDS": "0.1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "edgepilot", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    reached, err, out = threading.Event(), [], []

    def read_stderr() -> None:
        for line in proc.stderr:
            err.append(line)
            m = DONE.search(line)
            if m and int(m.group(1)) >= units:
                reached.set()

    readers = [
        threading.Thread(target=read_stderr),
        threading.Thread(target=lambda: out.append(proc.stdout.read())),
    ]
    for reader in readers:
        reader.start()
    try:
        assert reached.wait(DEADLINE), b"".join(err).decode(errors="replace")[-3000:]
        if how == "terminal":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
        proc.wait(DEADLINE)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for reader in readers:
            reader.join(10)
    return proc.returncode, b"".join(out).decode(), b"".join(err).decode(errors="replace")


def _stopped(code: int, stderr: str) -> None:
    assert code == 130, stderr[-3000:]
    assert "(stopped)" in stderr and "interrupted" not in stderr and "Traceback" not in stderr, stderr[-3000:]


def _stored_runs(data_dir) -> list[tuple[str, int, int]]:
    """(kind, partial, results) of each run in the history."""
    with sqlite3.connect(data_dir / "bench.sqlite") as con:
        return con.execute(
            "SELECT kind, partial, (SELECT COUNT(*) FROM results x WHERE x.run_id = r.id) FROM runs r"
        ).fetchall()


@pytest.mark.parametrize("how", ["process", "terminal"])
@pytest.mark.parametrize("engine", ["inprocess", "tools"])
def test_ctrl_c_in_bench_keeps_and_saves_the_finished_tests(smollm_path, data_dir, engine, how, cli_app):
    # tg16 first (a warm-up and 3 repetitions), then three long tests Ctrl-C lands in
    argv = ["bench", str(smollm_path), "-p", "0", "-n", "16,512", "-r", "3", "-t", "1,2", "--json"]
    code, stdout, stderr = _interrupt_after([*argv, *_engine(engine)], 4, data_dir, how)
    _stopped(code, stderr)
    report = json.loads(stdout)
    assert report["partial"] is True
    assert 1 <= len(report["rows"]) < 4 and report["rows"][0]["test"] == "tg16"
    assert all(len(r["samples_ts"]) == 3 and r["avg_ts"] > 0 for r in report["rows"])
    assert any("stopped by Ctrl-C" in w and "of 4 tests" in w for w in report["warnings"])
    assert _stored_runs(data_dir) == [("bench", 1, len(report["rows"]))]

    from click.testing import CliRunner  # the history of data_dir: the autouse fixture points there

    shown = CliRunner().invoke(cli_app, ["bench", "--history", "--json"])
    assert all(e["partial"] for e in json.loads(shown.stdout)["entries"])
    assert "bench (partial)" in CliRunner().invoke(cli_app, ["bench", "--history"]).stdout


@pytest.mark.parametrize("engine", ["inprocess", "tools"])
def test_ctrl_c_in_tune_keeps_the_settings_measured_and_saves_no_profile(smollm_path, data_dir, engine):
    argv = ["tune", str(smollm_path), "-p", "64", "-n", "16", "-r", "2", "--device", "none", "--json"]
    code, stdout, stderr = _interrupt_after([*argv, *_engine(engine)], 2, data_dir, "terminal")
    _stopped(code, stderr)
    report = json.loads(stdout)
    assert report["partial"] is True and report["profile_path"] is None and report["profile"] is None
    assert report["trials"] and all(t["ts"] > 0 for t in report["trials"])
    assert any("stopped by Ctrl-C" in n and "no profile saved" in n for n in report["notes"])
    (run,) = _stored_runs(data_dir)
    assert run[:2] == ("tune", 1) and run[2] == len(report["trials"])
    assert not (data_dir / "profiles").exists() or not any((data_dir / "profiles").iterdir())
