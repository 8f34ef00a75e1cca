"""`doctor -- CMD`: the child's output is streamed and kept; how it ended and what it cost are recorded."""

from __future__ import annotations

import io
import sys

import pytest

from edgepilot.doctor.supervise import supervise
from edgepilot.errors import UserError

PY = sys.executable


def test_output_is_streamed_and_kept():
    out, err = io.BytesIO(), io.BytesIO()
    ran = supervise(["sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3"], stdout=out, stderr=err)
    assert out.getvalue() == b"to-stdout\n" and err.getvalue() == b"to-stderr\n"
    assert ran.lines == ["to-stdout", "to-stderr"]
    r = ran.record
    assert (r.returncode, r.exit_code, r.signal) == (3, 3, None)
    assert r.wall_seconds >= 0 and r.output_lines == 2


@pytest.mark.parametrize("sig,name", [(9, "SIGKILL"), (4, "SIGILL"), (11, "SIGSEGV")])
def test_a_signal_is_recorded_as_the_shell_would_show_it(sig, name):
    ran = supervise(["sh", "-c", f"kill -{sig} $$"])
    r = ran.record
    assert (r.returncode, r.exit_code, r.signal, r.signal_name) == (-sig, 128 + sig, sig, name)


def test_peak_rss_is_the_childs_own():
    ran = supervise([PY, "-c", "import time; b = bytearray(96 << 20); time.sleep(0.3)"])
    assert ran.record.peak_rss_bytes is not None
    assert 96 << 20 <= ran.record.peak_rss_bytes < 400 << 20


def test_device_state_before_and_after():
    r = supervise(["true"]).record
    assert r.before.available_bytes and r.after.available_bytes


def test_a_missing_command_is_a_user_error():
    with pytest.raises(UserError, match="command not found: no-such-command-xyz"):
        supervise(["no-such-command-xyz"])
    with pytest.raises(UserError, match="give a command"):
        supervise([])


def test_a_sigkilled_child_is_diagnosed_as_killed():
    from edgepilot.doctor.diagnose import diagnose

    ran = supervise(["sh", "-c", "echo loading; kill -9 $$"])
    d = diagnose(ran.lines, command=ran.record.command, run=ran.record, root=None)
    # no memory pressure anywhere: killed from outside, not by the system for memory (test_memory_evidence)
    assert d.causes[0].id == "unknown" and "SIGKILL from outside" in d.causes[0].title
    assert d.exit_code == 137 and d.signal == 9 and d.run is ran.record


def test_a_silent_child_gets_progress_lines(monkeypatch):
    import edgepilot.doctor.supervise as sup

    monkeypatch.setattr(sup, "QUIET_SECONDS", 0.5)
    seen = []
    code = "import time; b = bytearray(64 << 20); time.sleep(2)"
    ran = supervise([PY, "-c", code], progress=seen.append)
    assert ran.record.exit_code == 0 and len(seen) >= 2  # one per 0.5 s of silence (more on a busy machine)
    assert [p.elapsed_seconds for p in seen] == sorted(p.elapsed_seconds for p in seen)
    last = seen[-1]
    assert last.elapsed_seconds >= 1 and last.page_ins_per_second is not None
    assert max(p.rss_bytes or 0 for p in seen) >= 64 << 20
    assert last.line().startswith("doctor: ") and "RSS" in last.line() and "page-ins/s" in last.line()


def test_a_chatty_child_gets_none(monkeypatch):
    import edgepilot.doctor.supervise as sup

    monkeypatch.setattr(sup, "QUIET_SECONDS", 0.5)
    seen = []
    supervise(["sh", "-c", "for i in 1 2 3 4 5 6 7 8; do echo $i; sleep 0.2; done"], progress=seen.append)
    assert seen == []


def test_a_success_reads_as_a_success():
    from edgepilot.doctor.diagnose import diagnose

    ran = supervise(["sh", "-c", "echo all good"])
    d = diagnose(ran.lines, command=ran.record.command, run=ran.record, root=None)
    assert d.causes[0].id == "succeeded" and d.causes[0].fix == "nothing to fix"
    assert "exit status 0" in d.causes[0].evidence[0]
