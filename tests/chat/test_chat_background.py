"""A real `edgepilot chat` that Android moves to the cached class between two answers (the test writes its
oom_score_adj, as ActivityManager would) says so while it waits, once, with what keeps Termux alive."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

TERMUX = {"TERMUX_VERSION": "0.118.1", "PREFIX": "/data/data/com.termux/files/usr"}
NOTE = "now has oom_score_adj 900"
DEADLINE = 300.0


def _wait_for(lines: list[str], text: str, count: int = 1) -> None:
    end = time.monotonic() + DEADLINE
    while sum(text in line for line in lines) < count:
        assert time.monotonic() < end, "".join(lines)[-3000:]
        time.sleep(0.1)


@pytest.mark.skipif(os.geteuid() != 0, reason="raising another process's oom_score_adj needs root")
def test_a_chat_moved_to_the_cached_class_says_so_once(smollm_path):
    argv = [sys.executable, "-m", "edgepilot", "chat", str(smollm_path), "--temp", "0", "-n", "8"]
    proc = subprocess.Popen(
        [*argv, "--ctx", "1024"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **TERMUX},
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        proc.stdin.write("hi\n")
        proc.stdin.flush()
        _wait_for(lines, "[prompt ")  # answered: the chat waits for the next line
        Path(f"/proc/{proc.pid}/oom_score_adj").write_text("900")
        _wait_for(lines, NOTE)  # said while it waits, not only when it ends
        proc.stdin.write("and again\n")
        proc.stdin.close()
        assert proc.wait(DEADLINE) == 0, "".join(lines)[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(10)
    err = "".join(lines)
    assert err.count(NOTE) == 1 and err.count("[prompt ") == 2, err[-3000:]
    assert "termux-wake-lock" in err and "phantom-process" in err
