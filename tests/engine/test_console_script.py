"""The installed `edgepilot` console script, run as a user would."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys


def _edgepilot() -> list[str]:
    exe = shutil.which("edgepilot")
    return [exe] if exe else [sys.executable, "-m", "edgepilot"]


def test_console_script_run_json(smollm_path):
    proc = subprocess.run(
        [*_edgepilot(), "run", str(smollm_path), "-n", "4", "--ctx", "256", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["n_gen"] > 0
    assert proc.stderr == ""  # llama.cpp's log is captured, not spilled


def test_console_script_bad_flag():
    proc = subprocess.run(
        [*_edgepilot(), "run", "--no-such-flag"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "No such option" in proc.stderr and "Traceback" not in proc.stderr
