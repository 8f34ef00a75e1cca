"""The tools engine's llama-server killed mid-answer (what Android's low-memory killer does): `run` stops with
one error line, and the doctor names the kill from the child's exit status, not "unknown"."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil

from nativekit import native_tool


def test_a_sigkilled_llama_server_is_diagnosed_as_killed(smollm_path):
    native_tool("llama-server")
    cmd = [sys.executable, "-m", "edgepilot", "run", str(smollm_path), "--engine", "tools", "--raw"]
    cmd += ["-p", "Once upon a time", "-n", "100000", "--ctx", "8192", "--temp", "0.8"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        proc.stdout.read(16)  # generating: the answer streams
        servers = [c for c in psutil.Process(proc.pid).children() if "llama-server" in c.name()]
        assert servers, "no llama-server child"
        os.kill(servers[0].pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            time.sleep(0.5)
    assert proc.returncode == 2, err[-1500:]
    assert "exited with status 137 (SIGKILL)" in err, err[-1500:]
    assert "doctor: killed-by-system" in err, err[-1500:]
    assert "Traceback" not in err
