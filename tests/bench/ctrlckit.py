"""Ctrl-C to a real `edgepilot` process once its progress on stderr reaches a count: how the sustained
tests of bench and tune stop a run mid-way."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys


def ctrl_c_once(args: list[str], progress: re.Pattern[str], count: int, every: str) -> tuple[int, bytes]:
    """Run `edgepilot ARGS` (progress lines every `every` seconds); SIGINT once a stderr line's `progress`
    match counts `count` (its first group). (exit status, stdout)"""
    env = {**os.environ, "EDGEPILOT_PROGRESS_SECONDS": every, "PYTHONUNBUFFERED": "1"}
    # SIGINT at its default, as a command typed in a terminal has it (a background job of a non-interactive
    # shell, as a CI runner may start the tests, ignores it, and the ignore is inherited across exec)
    child = subprocess.Popen(
        [sys.executable, "-m", "edgepilot", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert child.stderr is not None
    for line in child.stderr:
        found = progress.search(line.decode(errors="replace"))
        if found and int(found.group(1)) >= count:
            child.send_signal(signal.SIGINT)
            break
    out, _ = child.communicate(timeout=300)
    return child.returncode, out
