"""The CPU check on ARM: llama.cpp's programs built with a -march above the core (the lane's i8mm library on a
Cortex-A53, what an armv8.2-a+i8mm Termux build meets on an older phone) are a verdict, not a crash of
edgepilot; the NEON-only library on the same core runs. The programs run under qemu-user with the CPU it acts
out (QEMU_CPU), through a two-line wrapper as Termux's own programs would be found on PATH.
"""

from __future__ import annotations

import signal
import subprocess

import aarch64_lane
from edgepilot.engine.cpu_check import check_engine


def _programs(lane: aarch64_lane.Lane, tmp_path, monkeypatch, qemu_cpu: str, cpu: str):
    for key, value in lane.env(qemu_cpu, cpu).items():
        if key in ("QEMU_LD_PREFIX", "LD_LIBRARY_PATH", "QEMU_CPU"):
            monkeypatch.setenv(key, value)
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(tmp_path / "data"))
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in ("llama-completion", "llama-server"):
        wrapper = folder / name
        wrapper.write_text(f'#!/bin/sh\nexec {aarch64_lane.QEMU} {lane.tool(name)} "$@"\n')
        wrapper.chmod(0o755)
    return folder


def test_an_arm_build_above_the_core_is_a_verdict(lane, tmp_path, monkeypatch):
    folder = _programs(lane, tmp_path, monkeypatch, "cortex-a53", "i8mm")
    checked = check_engine("tools", folder / "llama-server")
    assert checked.full.crashed and checked.full.signal == "SIGILL", checked.full
    assert checked.plain is not None and checked.broken == (not checked.plain.ok)
    again = check_engine("tools", folder / "llama-server")  # remembered: no second run under qemu
    assert again.full.cached and again.full.outcome == "crashed"


def test_the_cores_own_build_passes_on_the_same_core(lane, tmp_path, monkeypatch):
    folder = _programs(lane, tmp_path, monkeypatch, "cortex-a53", "neon")
    raw = [str(folder / "llama-completion"), "--version"]
    assert subprocess.run(raw, capture_output=True, timeout=120).returncode != -signal.SIGILL
    checked = check_engine("tools", folder / "llama-server")
    assert checked.full.ok and checked.plain is None, checked.full
    assert "NEON" in checked.full.built_with and "MATMUL_INT8" not in checked.full.built_with
