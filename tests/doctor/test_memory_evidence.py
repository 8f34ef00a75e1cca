"""A SIGKILL is a memory kill only with memory evidence; matched causes rank above `unknown`; no input is a
usage error."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner
from doctorkit import LOGS, diagnose_log

from edgepilot.doctor.diagnose import diagnose, order
from edgepilot.doctor.supervise import supervise
from edgepilot.doctor.types import LIKELY, cause

MiB = 1 << 20
MEMORY_IDS = {"killed-by-system", "out-of-memory-alloc", "context-too-large"}
runner = CliRunner()


@pytest.fixture(scope="module")
def killed():
    """A real `kill -9` of a shell: no memory involved at all (its peak is known, far below what is free)."""
    ran = supervise(["sh", "-c", "echo working; kill -9 $$"])
    assert ran.record.signal == 9 and ran.record.peak_rss_bytes and ran.record.before.available_bytes
    return ran


def test_a_deliberate_kill_is_not_a_memory_kill(killed):
    d = diagnose(killed.lines, command=killed.record.command, run=killed.record, root=None)
    top = d.causes[0]
    assert top.id == "unknown" and "SIGKILL from outside" in top.title
    assert not MEMORY_IDS & {c.id for c in d.causes}
    assert "exit status 137 = killed by SIGKILL (9)" in top.evidence
    assert any("far below" in e for e in top.evidence)
    assert any("no OOM-killer or lmkd record" in e for e in top.evidence)
    assert "will not help" in top.fix


def test_doctor_cli_on_a_deliberate_kill(cli_app):
    res = runner.invoke(cli_app, ["doctor", "--json", "--", "sh", "-c", "kill -9 $$"])
    assert res.exit_code == 137, res.output
    ids = [c["id"] for c in json.loads(res.stdout)["causes"]]
    assert ids[0] == "unknown" and "killed-by-system" not in ids


@pytest.mark.parametrize(
    ("change", "sign"),
    [
        ({"after": {"psi_some_avg10": 35.0}}, "PSI"),
        ({"peak_rss_bytes": 900 * MiB, "before": {"available_bytes": 1000 * MiB}}, "peak RSS"),
        ({"memory_limit_bytes": 300 * MiB, "peak_rss_bytes": 290 * MiB}, "memory limit"),
        ({"cgroup": {"oom_kill": 1, "limit_bytes": 300 * MiB}}, "oom_kill=1"),
    ],
)
def test_any_memory_sign_makes_it_a_memory_kill(killed, change, sign):
    record = killed.record
    for key, value in change.items():
        if isinstance(value, dict) and key in ("before", "after"):
            value = replace(getattr(record, key), **value)
        record = replace(record, **{key: value})
    d = diagnose(killed.lines, command=record.command, run=record, root=None)
    assert d.causes[0].id == "killed-by-system", [(c.id, c.evidence) for c in d.causes]
    assert any(sign in e for e in d.causes[0].evidence), d.causes[0].evidence


def test_a_killer_record_in_the_output_makes_it_a_memory_kill(killed):
    lines = [*killed.lines, "Out of memory: Killed process 4242 (llama-cli) total-vm:9000000kB"]
    d = diagnose(lines, command=killed.record.command, run=killed.record, root=None)
    assert d.causes[0].id == "killed-by-system"


def test_without_a_run_record_nothing_is_ruled_out():
    # a bare exit status 137 from a phone's log: lmkd is the usual sender, and nothing says otherwise
    d = diagnose([], exit_code=137, root=None)
    assert d.causes[0].id == "killed-by-system"


def test_a_slow_run_from_sdcard_ranks_slow_storage_first():
    """Exit 0, a log from a phone: the live root's own mounts must not hide the /sdcard path."""
    lines = [
        "llama_model_loader: loaded meta data with 34 key-value pairs and 236 tensors from "
        "/sdcard/Download/gemma-3-270m-q4_k_m.gguf (version GGUF V3 (latest))",
        "llama_perf_context_print:        load time =   41230.55 ms",
        "llama_perf_context_print: prompt eval time =   90233.10 ms /    51 tokens ( 1769.28 ms per token,"
        "     0.57 tokens per second)",
    ]
    d = diagnose(lines, exit_code=0)  # root: this machine
    ids = [c.id for c in d.causes]
    assert ids[0] == "slow-storage-fuse", [(c.id, c.score) for c in d.causes]
    assert any("/sdcard/Download" in e for e in d.causes[0].evidence)


def test_matched_causes_rank_above_unknown_and_hints_below():
    hint = cause("thermal-throttling", 35, ["CPU 6-7 capped"], "cool it")
    matched = cause("slow-storage-fuse", LIKELY, ["model on /sdcard"], "copy it")
    outside = cause("unknown", LIKELY - 1, ["killed by SIGKILL"], "find the sender", title="outside")
    generic = cause("unknown", 0, ["checked"], "rerun")
    assert order([hint, matched], lambda: generic) == [matched, hint]
    assert order([hint], lambda: generic) == [generic, hint]
    assert order([hint, outside, matched], lambda: generic) == [matched, outside, hint]


def test_known_logs_still_rank_as_before():
    assert diagnose_log("killed-oom-dmesg.txt").causes[0].id == "killed-by-system"
    assert diagnose_log("fuse-shared-storage-7016.txt").causes[0].id == "slow-storage-fuse"


def test_no_input_is_a_usage_error(cli_app):
    res = runner.invoke(cli_app, ["doctor"])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "nothing to diagnose" in lines[0]
    assert runner.invoke(cli_app, ["doctor", "--json"]).exit_code == 2
    ok = runner.invoke(cli_app, ["doctor", "--log", str(LOGS / "killed-oom-dmesg.txt"), "--json"])
    assert ok.exit_code == 0
