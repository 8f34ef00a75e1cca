"""`edgepilot probe` on this machine with stand-in llama.cpp programs on PATH (tests/device/gpukit.py): the
driver check runs once in a child, its crash is probe's verdict (exit 0, no traceback), later probes reuse it,
`--no-gpu-check` runs none, and the table reads at 50 columns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpukit import calls, fake_tools

import edgepilot

SRC = str(Path(edgepilot.__file__).resolve().parent.parent)


def probe(tmp_path: Path, *args: str, columns: int = 100) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": SRC,
        "EDGEPILOT_DATA_DIR": str(tmp_path / "data"),
        "EDGEPILOT_TOOLS_DIR": str(tmp_path / "no-built-tools"),  # the stand-ins, not a built llama.cpp
        "COLUMNS": str(columns),
    }
    return subprocess.run(
        [sys.executable, "-m", "edgepilot", "probe", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


@pytest.fixture
def crashing(tmp_path):
    fake_tools(tmp_path / "bin", "segv")
    return tmp_path


def the_gpu(done: subprocess.CompletedProcess[str]) -> dict:
    assert done.returncode == 0, done.stderr[-2000:]
    (gpu,) = [g for g in json.loads(done.stdout)["gpus"] if g["llama_cpp_name"] == "Vulkan0"]
    return gpu


def test_a_crashing_driver_is_probes_verdict_and_is_checked_once(crashing):
    first = probe(crashing, "--json")
    gpu = the_gpu(first)
    assert "probe: checking Vulkan0 (Mali-G77 MC9)" in first.stderr and "Traceback" not in first.stderr
    assert (gpu["backend"], gpu["verdict"], gpu["vulkan_usable"]) == ("vulkan", "crashed", False)
    check = gpu["check"]
    assert (check["ok"], check["outcome"], check["signal"], check["cached"]) == (
        False,
        "crashed",
        "SIGSEGV",
        False,
    )
    assert check["seconds"] >= 0 and "the Vulkan driver crashed during the check: SIGSEGV" in gpu["reasons"]
    again = the_gpu(probe(crashing, "--json"))
    assert again["check"]["cached"] is True and again["verdict"] == "crashed"
    assert calls(crashing / "bin") == 1


def test_no_gpu_check_runs_none_but_shows_a_remembered_one(crashing):
    gpu = the_gpu(probe(crashing, "--json", "--no-gpu-check"))
    assert (gpu["check"]["outcome"], gpu["check"]["ok"]) == ("not-run", None)
    assert gpu["verdict"] == "unknown" and calls(crashing / "bin") == 0
    probe(crashing, "--json")
    remembered = the_gpu(probe(crashing, "--json", "--no-gpu-check"))
    assert remembered["check"]["outcome"] == "crashed" and calls(crashing / "bin") == 1


def test_the_gpu_table_reads_at_50_columns(crashing):
    done = probe(crashing, columns=50)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    # but a path longer than the screen: printed whole on its own line (a split one could not be copied)
    wide = [line for line in lines if len(line) > 50]
    assert all(len(line.split()) == 1 for line in wide), wide
    text = done.stdout
    assert "GPUs" in text and "crashed" in text and "SIGSEGV" in text
    assert "Vulkan0: uma yes · fp16 yes · subgroup 16" in text


def test_a_passing_check_is_usable(tmp_path):
    fake_tools(tmp_path / "bin", "ok")
    gpu = the_gpu(probe(tmp_path, "--json"))
    assert (gpu["verdict"], gpu["check"]["ok"], gpu["check"]["outcome"]) == ("usable", True, "ok")
    assert gpu["check"]["facts"]["device"]["uma"] is True


def test_check_gpu_runs_a_remembered_check_again(crashing):
    probe(crashing, "--json")
    again = the_gpu(probe(crashing, "--json", "--check-gpu"))
    assert again["check"]["cached"] is False and again["check"]["checked_at"]
    assert calls(crashing / "bin") == 2
    done = probe(crashing, "--json", "--check-gpu", "--no-gpu-check")
    assert done.returncode == 2 and "give one of them" in done.stderr


def test_a_slow_check_is_shown_as_slow_and_checked_again_only_when_asked(tmp_path, monkeypatch):
    fake_tools(tmp_path / "bin", "spin")
    monkeypatch.setenv("EDGEPILOT_GPU_CHECK_DEADLINE", "0.6")
    gpu = the_gpu(probe(tmp_path, "--json"))
    assert (gpu["check"]["outcome"], gpu["check"]["ok"], gpu["verdict"]) == ("slow", None, "unknown")
    assert gpu["vulkan_usable"] is not False and calls(tmp_path / "bin") == 2
    shown = the_gpu(probe(tmp_path, "--json"))
    assert shown["check"]["cached"] is True and calls(tmp_path / "bin") == 2
    the_gpu(probe(tmp_path, "--json", "--check-gpu"))
    assert calls(tmp_path / "bin") == 4
