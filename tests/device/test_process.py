"""device.process: the one reader of a process's /proc status (VmRSS, VmHWM) and CPU affinity."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from edgepilot.device.process import allowed_cpus, peak_rss_bytes, rss_bytes, status_bytes

MIB = 1 << 20
SRC = Path(__file__).resolve().parents[2] / "src" / "edgepilot"


def test_this_process_memory():
    rss, hwm = rss_bytes()
    assert rss is not None and hwm is not None
    assert 10 * MIB < rss <= hwm <= peak_rss_bytes()
    status = status_bytes()
    assert {"VmRSS", "VmHWM", "VmSize", "RssAnon"} <= set(status)
    assert all(v % 1024 == 0 for v in status.values())


def test_peak_follows_a_real_allocation():
    now = rss_bytes()[0] or 0
    block = b"x" * (96 * MIB)  # every page written
    assert peak_rss_bytes() >= now + 90 * MIB
    del block


def test_another_process_and_one_that_is_gone():
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; b = bytearray(48 << 20); sys.stdin.read()"],
        stdin=subprocess.PIPE,
    )
    try:
        for _ in range(200):  # until the child has allocated
            rss, hwm = rss_bytes(child.pid)
            if rss and rss > 40 * MIB:
                break
            time.sleep(0.02)
        assert rss is not None and 40 * MIB < rss <= hwm < 200 * MIB
    finally:
        child.communicate(b"")
    assert rss_bytes(child.pid) == (None, None)
    assert status_bytes(child.pid) == {}


def test_allowed_cpus_follow_the_affinity():
    assert allowed_cpus() == sorted(os.sched_getaffinity(0))
    cpu = allowed_cpus()[-1]
    child = subprocess.Popen(["sleep", "30"])
    try:
        os.sched_setaffinity(child.pid, {cpu})
        assert allowed_cpus(child.pid) == [cpu]
    finally:
        child.kill()
        child.wait()


def test_no_other_reader_of_proc_status_or_affinity():
    """Issue 12: one /proc reader family in device/; engine, serve, doctor, plan and bench call it."""
    pattern = re.compile(r"/proc/\{?[\w.()]*\}?/status|sched_getaffinity\(0\)")
    offenders = [
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if path.name != "process.py" and pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
