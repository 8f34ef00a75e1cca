"""Programs edgepilot runs for their output are input too: read with a byte cap and a deadline, in a session
of their own so that nothing they start can hold us. The programs here are small shell scripts, since the
program itself is the hostile input: a `--version` that never stops printing (probe died with MemoryError),
one whose child keeps the pipe open after it exits (probe waited as long as the child lived)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edgepilot.device.commands import run_output
from edgepilot.engine import native_tools


def _program(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is no longer running
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def leftovers():
    """Processes a test's script left behind (pid files): ended by their id afterwards, if still alive."""
    files: list[Path] = []
    yield files
    for f in files:
        if f.exists() and f.read_text().strip().isdigit():
            pid = int(f.read_text())
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_version_that_never_stops_printing_costs_a_cap_not_the_memory(tmp_path):
    tool = _program(tmp_path, "llama-server", "exec yes 'version: 1 (abc) and on and on'\n")
    started = time.monotonic()
    assert native_tools.tool_version(tool) is None  # no version: its output passed the cap
    assert time.monotonic() - started < native_tools.VERSION_SECONDS


def test_a_child_holding_the_pipe_does_not_hold_us(tmp_path, leftovers):
    pid_file = tmp_path / "child.pid"
    leftovers.append(pid_file)
    body = f"echo 'version: 7001 (abc1234)'\nsleep 300 &\necho $! > {pid_file}\n"
    tool = _program(tmp_path, "llama-server", body)
    started = time.monotonic()
    version = native_tools.tool_version(tool)
    assert version is not None and version.number == "7001"
    assert time.monotonic() - started < 15  # not the child's 300 s
    assert not _alive(int(pid_file.read_text()))  # ended with the program's group


def test_a_child_that_left_the_group_holds_us_no_longer_than_the_reader_waits(tmp_path, leftovers):
    pid_file = tmp_path / "child.pid"
    leftovers.append(pid_file)
    program = _program(tmp_path, "tool", f"echo done\nsetsid sleep 300 &\necho $! > {pid_file}\n")
    started = time.monotonic()
    done = run_output([str(program)], timeout=5, limit=1 << 16)
    assert done.stdout.startswith("done") and done.returncode == 0
    assert time.monotonic() - started < 15


def test_a_program_that_hangs_is_killed_at_the_deadline(tmp_path):
    program = _program(tmp_path, "tool", "echo partial\nexec sleep 300\n")
    started = time.monotonic()
    done = run_output([str(program)], timeout=1, limit=1 << 16)
    assert done.returncode is None and "timed out" in (done.reason or "")
    assert time.monotonic() - started < 15


def test_probe_answers_with_a_llama_server_whose_child_holds_the_pipe(tmp_path, leftovers):
    pid_file = tmp_path / "child.pid"
    leftovers.append(pid_file)
    bin_dir = tmp_path / "bin"
    _program(bin_dir, "llama-server", f"echo 'version: 7001 (abc1234)'\nsleep 300 &\necho $! > {pid_file}\n")
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "EDGEPILOT_ENGINE": "tools",
        "EDGEPILOT_TOOLS_DIR": str(tmp_path / "none"),
        "EDGEPILOT_DATA_DIR": str(tmp_path / "data"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "edgepilot", "probe", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "7001" in done.stdout


def test_a_llama_perplexity_that_floods_its_output_is_stopped_at_the_cap(tmp_path, monkeypatch):
    from edgepilot.engine.base import EngineError
    from edgepilot.store import compare_tool

    monkeypatch.setattr(compare_tool, "OUTPUT_BYTES", 1 << 20)
    tool = _program(tmp_path, "llama-perplexity", "exec yes '[1]12.5,[2]13.0,'\n")
    started = time.monotonic()
    with pytest.raises(EngineError, match="output larger than 1 MiB"):
        compare_tool._perplexity(tool, ["-m", "x.gguf"], "x.gguf")
    assert time.monotonic() - started < 30


def test_a_llama_perplexity_that_hangs_is_stopped_at_its_deadline(tmp_path, monkeypatch, leftovers):
    from edgepilot.engine.base import EngineError
    from edgepilot.store import compare_tool

    pid_file = tmp_path / "child.pid"
    leftovers.append(pid_file)
    monkeypatch.setattr(compare_tool, "TIMEOUT_S", 2)
    tool = _program(tmp_path, "llama-perplexity", f"sleep 300 &\necho $! > {pid_file}\nwait\n")
    with pytest.raises(EngineError, match="timed out after 2s"):
        compare_tool._perplexity(tool, ["-m", "x.gguf"], "x.gguf")
    assert not _alive(int(pid_file.read_text()))  # what it started ended with it


def test_a_llama_quantize_that_floods_its_output_is_one_error_and_no_file(tmp_path, monkeypatch):
    from edgepilot.errors import UserError
    from edgepilot.store import quantize_tool

    monkeypatch.setattr(quantize_tool, "LOG_BYTES", 1 << 20)
    tool = _program(tmp_path, "llama-quantize", "exec yes 'llama_model_quantize_impl: tensor'\n")
    source = tmp_path / "in.gguf"
    source.write_bytes(b"GGUF" + bytes(64))
    target = tmp_path / "out.gguf"
    job = quantize_tool.QuantizeJob(tool, source, target, "Q4_0", 1)
    with pytest.raises(UserError, match="output larger than 1 MiB"):
        quantize_tool.run_tool_quantizer(job)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.gguf", "llama-quantize"]  # no part left


def test_compares_measuring_child_is_read_with_a_cap(monkeypatch):
    from edgepilot.errors import UserError
    from edgepilot.store import compare

    monkeypatch.setattr(compare, "CHILD_OUTPUT", 1 << 20)
    flood = "import sys\nwhile True: sys.stdout.write('{' * 65536)"
    with pytest.raises(UserError, match="output larger than 1 MiB: measuring flood"):
        compare._child(["-c", flood], "flood", stdin="{}")
