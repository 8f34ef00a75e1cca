"""The progress line of a real `edgepilot tune` on a 50-column terminal (a pseudo-terminal): it keeps its
count and elapsed time, the description is what gets cut (before: rich dropped the bar, the count and the
time)."""

from __future__ import annotations

import os
import pty
import re
import select
import sys
import time

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
FIGURES = re.compile(r"\d+/(\d+|\?) +\d:\d\d:\d\d$")  # the count, then the elapsed time, at the line's end


def run_on_a_terminal(argv: list[str], columns: int, timeout: float = 180) -> str:
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its terminal (stdout and stderr)
        os.execvpe(argv[0], argv, {**os.environ, "COLUMNS": str(columns), "TERM": "xterm"})
    out, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        out += data
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out.decode(errors="replace")[-2000:]
    return out.decode(errors="replace")


def test_the_progress_line_keeps_its_count_and_time_at_50_columns(smollm_path):
    """tune's descriptions are long (`tune: tg · 2 threads on 0-1 · ub 512 · fa 0`)."""
    argv = [sys.executable, "-m", "edgepilot", "tune", str(smollm_path), "-p", "16", "-n", "4", "-r", "1"]
    text = run_on_a_terminal([*argv, "--no-save"], columns=50)
    frames = [ANSI.sub("", f).rstrip() for f in re.split(r"[\r\n]", text)]
    lines = [f for f in frames if f.lstrip().startswith("tune:")]
    assert lines, text[-2000:]
    for line in lines:
        assert len(line) <= 50 and FIGURES.search(line), lines
