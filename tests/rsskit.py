"""Peak RSS of a command in a child process, measured where it is not polluted by pytest.

Linux carries ru_maxrss across exec from the address space being replaced, and subprocess's vfork shares
pytest's (hundreds of MiB once models were loaded): so a small Python process runs the command and reports
the wait4 figure of the child it forked itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

_WRAPPER = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""


def run_measured(argv: list[str], stdin=None, env=None, stdout=subprocess.DEVNULL) -> tuple[int, str, float]:
    """(exit code, stderr, peak RSS in MiB) of argv."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "rss"
        done = subprocess.run(
            [sys.executable, "-c", _WRAPPER, str(report), *argv],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=env,
            timeout=600,
        )
        rss = int(report.read_text()) / 1024
    return done.returncode, done.stderr.decode("utf-8", errors="replace"), rss


def edgepilot_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **extra}
