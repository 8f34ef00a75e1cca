"""Start-up is part of the interface on a phone: each command imports only what it uses. `--help` loads no
command's machinery; `probe` and `fit` load neither llama.cpp, numpy, gguf, the server stack, nor (with
--json) rich. Checked on the real entry point with `python -X importtime`, which names every module a process
imports (benchmarks/startup.py measures the time)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import edgepilot

HEAVY = {"llama_cpp", "numpy", "gguf", "starlette", "uvicorn", "h11", "anyio", "jinja2", "diskcache"}
SRC = str(Path(edgepilot.__file__).resolve().parent.parent)


def imported(*args: str) -> set[str]:
    """Every module `python -m edgepilot ARGS` imports (the command must succeed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (SRC, os.environ.get("PYTHONPATH"))))}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "edgepilot", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert lines, "python -X importtime printed nothing"
    return {line.rsplit("|", 1)[1].strip() for line in lines[1:]}  # the first line is the header


def tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_help_imports_click_and_the_command_table_only():
    modules = imported("--help")
    assert "click" in modules
    assert not tops(modules) & (HEAVY | {"rich", "psutil"})
    ours = {m for m in modules if m.startswith("edgepilot.")}
    light = ("edgepilot.errors", "edgepilot.defaults")  # one exception type, a few shared constants
    assert ours and all(m.startswith("edgepilot.cli") or m in light for m in ours), sorted(ours)


@pytest.mark.parametrize("command", [["fit", "--help"], ["serve", "--help"], ["run", "--help"]])
def test_a_command_help_loads_no_machinery(command):
    modules = imported(*command)
    assert not tops(modules) & (HEAVY | {"rich"})
    assert not {m for m in modules if m.startswith(("edgepilot.plan", "edgepilot.serve", "edgepilot.run"))}


def test_probe_json_reads_the_device_without_heavy_imports(devices):
    modules = imported("probe", "--json", "--root", str(devices / "sd8gen2-xiaomi13pro"))
    assert "edgepilot.device.probe" in modules
    assert not tops(modules) & (HEAVY | {"rich"})


def test_probe_table_imports_rich_but_nothing_heavy(devices):
    modules = imported("probe", "--root", str(devices / "sd8gen2-xiaomi13pro"))
    assert "rich.table" in modules
    assert not tops(modules) & HEAVY


def test_fit_json_plans_without_llama_cpp_numpy_or_gguf(smollm_path):
    modules = imported("fit", str(smollm_path), "--json")
    assert "edgepilot.tuned.decide" in modules and "edgepilot.gguf.gguf_header" in modules
    assert not tops(modules) & (HEAVY | {"rich"})
