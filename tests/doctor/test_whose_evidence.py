"""Evidence from the right device, about the right process: a saved log from a phone never gets this
machine's memory as evidence, and lmkd killing other apps reads as memory pressure, not as this run's kill."""

from __future__ import annotations

import json

from click.testing import CliRunner
from doctorkit import DEVICES, LOGS, diagnose_log

from edgepilot.device.probe import probe
from edgepilot.doctor.diagnose import diagnose
from edgepilot.doctor.rules_memory import PRESSURE_TITLE
from edgepilot.doctor.types import STRONG, TITLES

runner = CliRunner()
PHONE_LOG = str(LOGS / "killed-executorch-lmkd.txt")  # a Pixel 8's logcat (pytorch/executorch#5582)


def _doctor(cli_app, *args: str) -> dict:
    res = runner.invoke(cli_app, ["doctor", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _this_machines_figures() -> list[str]:
    m = probe("/").memory
    return [f"{m.total_bytes / 2**20:.0f} MiB", f"{m.total_bytes / 2**30:.1f} GiB"]


def test_a_phones_log_gets_none_of_this_machines_memory(cli_app, smollm_path):
    """Before: "device: 23493 MiB available of 24105 MiB", this machine's RAM, as evidence for a phone's kill;
    with --model, a plan (and a fix) against this machine's budget."""
    for extra in ([], ["--model", str(smollm_path)]):
        data = _doctor(cli_app, "--log", PHONE_LOG, *extra)
        said = json.dumps(data["causes"])
        for figure in _this_machines_figures():
            assert figure not in said, (figure, data["causes"][0]["evidence"])
        evidence = data["causes"][0]["evidence"]
        assert any(
            e.startswith("device memory: not read; a saved log may come from another") for e in evidence
        )
        assert any(c.startswith("device: not probed: a saved log") for c in data["checked"])
        assert data["plan"] is None


def test_root_names_the_device_the_log_came_from(cli_app):
    here = _doctor(cli_app, "--log", PHONE_LOG, "--root", "/")  # the user says it is this machine
    assert any(e.startswith("this machine now: ") for e in here["causes"][0]["evidence"])
    tree = _doctor(cli_app, "--log", PHONE_LOG, "--root", str(DEVICES / "pixel6a-tensor-g1"))
    total = probe(DEVICES / "pixel6a-tensor-g1").memory.total_bytes
    assert any(
        e.startswith("the device's snapshot: ") and e.endswith(f"of {total / 2**20:.0f} MiB")
        for e in tree["causes"][0]["evidence"]
    )


def test_lmkd_killing_other_apps_is_pressure_not_this_runs_kill():
    d = diagnose_log("killed-executorch-lmkd.txt")
    top = d.causes[0]
    assert top.id == "killed-by-system" and top.title == PRESSURE_TITLE
    assert top.score < STRONG  # a message that named this run's kill would be strong
    assert top.evidence[0] == (
        "lmkd killed 4 other apps (429 MiB rss) because low watermark is breached and swap is low: the "
        "device was short of memory; no line shows this run killed"
    )
    kills = [e for e in top.evidence if "Kill '" in e]
    assert len(kills) == 3 and all(e.startswith("another app, not this run: lowmemorykiller") for e in kills)
    assert (
        "'com.google.android.carrier' (16153), uid 10113, oom_score_adj 905 to free 61004kB rss" in kills[1]
    )


def test_a_kill_of_this_run_with_other_apps_around_it_stays_a_kill():
    # rknn-llm#249: the shell's `Killed`, lmkd killing other apps around it: this run was killed too
    top = diagnose_log("killed-rknn-lmkd.txt").causes[0]
    assert top.title == TITLES["killed-by-system"] and top.score >= 90
    assert top.evidence[0] == "Killed"
    assert all(e.startswith("another app, not this run: ") for e in top.evidence if "Kill '" in e)
    # the OOM killer naming the run's process: said once, as this run's
    oom = diagnose_log("killed-oom-dmesg.txt").causes[0]
    named = [e for e in oom.evidence if "Killed process 336943" in e]
    assert named == [e for e in named if e.startswith("this run's process: Out of memory: Killed process")]
    assert len(named) == 1


def test_whose_process_follows_the_command_that_ran():
    lmkd = "I lowmemorykiller: Kill '{}' (4242), uid 10200, oom_score_adj 0 to free 912000kB rss, 0kB swap"
    termux = diagnose([lmkd.format("com.termux")], root=None).causes[0]
    assert termux.title == TITLES["killed-by-system"]
    assert any(
        e.startswith("this run's process: lowmemorykiller: Kill 'com.termux'") for e in termux.evidence
    )
    oom = "Out of memory: Killed process 4242 (my-runner) total-vm:9000kB, anon-rss:800000kB, oom_score_adj:0"
    mine = diagnose([oom], command=["./my-runner", "-m", "x.gguf"], root=None).causes[0]
    assert any(e.startswith("this run's process: Out of memory") for e in mine.evidence)
    other = diagnose([oom], command=["llama-cli", "-m", "x.gguf"], root=None).causes[0]
    assert any(e.startswith("another process, not this run: Out of memory") for e in other.evidence)
    unknown = diagnose([oom], root=None).causes[0]
    assert any(
        e.startswith("a process this log does not tie to the run: Out of memory") for e in unknown.evidence
    )
