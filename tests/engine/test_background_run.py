"""A real `edgepilot run` that Android moves to the cached class while it generates says so once, with what
keeps it alive: the test does what lmkd's ActivityManager does, writing the process's oom_score_adj (as root
any process's can be written), here to 900 (ProcessList.CACHED_APP_MIN_ADJ)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import edgepilot

SRC = str(Path(edgepilot.__file__).resolve().parent.parent)
# Termux's own environment (what device/android.py reads to know it runs there)
TERMUX = {"TERMUX_VERSION": "0.118.1", "PREFIX": "/data/data/com.termux/files/usr"}
NOTE = "now has oom_score_adj 900"


def _env(extra: dict[str, str]) -> dict[str, str]:
    path = os.pathsep.join(filter(None, (SRC, os.environ.get("PYTHONPATH"))))
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "200", **extra}


def _run_moved_to_cached(model: Path, *args: str, env: dict[str, str]) -> tuple[int, str, str]:
    """Start a greedy counting run (it never ends early); once tokens stream (with --json: at once), write
    900 to its oom_score_adj; (exit status, stdout, stderr)."""
    argv = [sys.executable, "-m", "edgepilot", "run", str(model), "--raw", "--temp", "0", "-n", "256"]
    argv += ["-p", "1, 2, 3, 4, 5, 6,", "--ctx", "512", *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    err: list[bytes] = []
    reader = threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True)
    reader.start()
    first = proc.stdout.read(1) if "--json" not in args else b""
    Path(f"/proc/{proc.pid}/oom_score_adj").write_text("900")
    rest = proc.stdout.read()
    proc.wait(600)
    reader.join(10)
    return proc.returncode, (first + rest).decode(), b"".join(err).decode()


@pytest.mark.skipif(os.geteuid() != 0, reason="writing another process's oom_score_adj upward needs root")
def test_a_run_moved_to_the_cached_class_says_so_once_with_the_fix(smollm_path):
    code, out, err = _run_moved_to_cached(smollm_path, env=_env(TERMUX))
    assert code == 0, err[-3000:]
    assert out.startswith(" 7, 8, 9"), out[:200]  # it was generating when it was moved
    assert err.count(NOTE) == 1, err[-3000:]
    note = err[err.index("background: this process") :]
    assert "cached app, killed first" in note
    assert "termux-wake-lock" in note and "phantom-process" in note  # the doctor's words for Termux
    assert "bandwidth" in out and " tok @ " in out  # the summary (on stdout) came after


@pytest.mark.skipif(os.geteuid() != 0, reason="writing another process's oom_score_adj upward needs root")
def test_a_json_run_keeps_the_note(smollm_path):
    code, out, err = _run_moved_to_cached(smollm_path, "--json", env=_env({}))
    assert code == 0, err[-3000:]
    notes = json.loads(out)["background"]
    assert len(notes) == 1 and NOTE in notes[0], notes
    assert "OOM killer picks it first" in notes[0]  # not Android: the kernel's killer, not lmkd
