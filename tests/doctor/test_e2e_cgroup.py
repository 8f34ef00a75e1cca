"""End to end: a real model under a real memory limit is killed by the kernel, and the doctor says why.

SmolLM2 at --ctx 32768 needs several hundred MiB (its f16 KV cache alone is 720 MiB); under a 300 MiB
cgroup v1 limit the kernel's OOM killer sends SIGKILL. `edgepilot doctor --memory-limit 300MiB -- edgepilot
run ...` must answer killed-by-system, quote the plan's numbers, and give the same command with a context
that fits.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edgepilot.doctor.cgroup import cgroup_problem

MiB = 1 << 20
EDGEPILOT = str(Path(sys.executable).with_name("edgepilot"))
problem = cgroup_problem()
pytestmark = pytest.mark.skipif(problem is not None, reason=problem or "")


def _long_prompt(path: Path, words: int = 30000) -> None:
    rng = random.Random(1)
    vocab = [
        "phone",
        "battery",
        "memory",
        "model",
        "token",
        "layer",
        "cache",
        "window",
        "thread",
        "core",
        "kernel",
        "page",
        "buffer",
        "weight",
    ]
    path.write_text(" ".join(rng.choice(vocab) for _ in range(words)))


def test_cgroup_kill_is_killed_by_system_with_a_context_that_fits(tmp_path, smollm_path):
    from edgepilot.plan import fit

    prompt = tmp_path / "prompt.txt"
    _long_prompt(prompt)
    run = [
        EDGEPILOT,
        "run",
        str(smollm_path),
        "--ctx",
        "32768",
        "--prompt-file",
        str(prompt),
        "-n",
        "4",
        "--raw",
        "--force",
        "--threads",
        "2",
    ]
    res = subprocess.run(
        [EDGEPILOT, "doctor", "--json", "--memory-limit", "300MiB", "--", *run],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert res.returncode == 137, res.stderr[-2000:]
    data = json.loads(res.stdout)
    assert data["signal"] == 9 and data["run"]["cgroup"]["oom_kill"] >= 1
    assert data["run"]["memory_limit_bytes"] == 300 * MiB

    top = data["causes"][0]
    assert top["id"] == "killed-by-system", [c["id"] for c in data["causes"]]
    plan = fit.fit_model(smollm_path, fit.RequestedSettings(n_ctx=32768, n_threads=2), budget_bytes=300 * MiB)
    assert not plan.fits and 0 < plan.max_ctx < 32768
    assert any(e.startswith("memory plan: ctx 32768") for e in top["evidence"]), top["evidence"]
    assert any("under a 300 MiB memory limit" in e for e in top["evidence"])
    assert f"--ctx {plan.max_ctx}" in top["fix"] and str(smollm_path) in top["fix"]
    assert data["plan"]["max_ctx"] == plan.max_ctx
    assert "context-too-large" in [c["id"] for c in data["causes"]]


def test_sigterm_to_the_doctor_ends_the_child_and_removes_its_memory_group():
    import signal
    import time

    from edgepilot.doctor.cgroup import CGROUP_V1_MEMORY

    doctor = subprocess.Popen(
        [EDGEPILOT, "doctor", "--memory-limit", "200MiB", "--", "sleep", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    group = f"edgepilot-doctor-{doctor.pid}-"
    deadline = time.monotonic() + 30
    while not any(p.name.startswith(group) for p in CGROUP_V1_MEMORY.iterdir()):
        assert time.monotonic() < deadline and doctor.poll() is None, "the doctor made no memory group"
        time.sleep(0.05)
    time.sleep(0.3)  # the child is in it
    doctor.send_signal(signal.SIGTERM)
    out, err = doctor.communicate(timeout=30)
    assert doctor.returncode == 128 + signal.SIGTERM, err
    assert "killed by SIGTERM" in out and "Traceback" not in err
    assert not [p for p in CGROUP_V1_MEMORY.iterdir() if p.name.startswith(group)]


def _account_adds_up(account: str) -> float:
    """The budget's figures as printed: budget = cgroup limit - others - kept free, usage = its parts."""
    budget, limit, others, kept, usage, *parts = (float(x) for x in re.findall(r"\d+\.\d", account))
    assert account.startswith(f"budget {budget:.1f} MiB = cgroup limit {limit:.1f} − others ")
    assert round(limit - others - kept, 1) == budget, account
    assert round(sum(parts), 1) == usage and parts[-1] == others, account
    return budget


def test_a_refusal_under_150mib_adds_up_and_its_checked_fix_completes(smollm_path):
    """issue 31: the budget read 29.0 MiB (150 - 15 is not 29), and the fix was what the run had used."""
    from edgepilot.doctor.cgroup import drop_page_cache
    from edgepilot.doctor.command import parse_command
    from edgepilot.doctor.plan_check import printed_account, refused_budget
    from edgepilot.plan import fit
    from edgepilot.plan.memory_model import program_arithmetic

    run = [EDGEPILOT, "run", str(smollm_path), "-n", "16"]
    env = {**os.environ, "COLUMNS": "50"}
    drop_page_cache()  # the model's pages are charged to whoever reads them first: the run
    res = subprocess.run(
        [EDGEPILOT, "doctor", "--json", "--memory-limit", "150MiB", "--", *run],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert res.returncode == 2, res.stderr[-2000:]
    shown = res.stderr.splitlines()  # the run's own output, at 50 columns
    account = printed_account(shown)
    assert account is not None, res.stderr[-3000:]
    budget = _account_adds_up(account)
    assert 150.0 - 15.0 - 10.0 < budget <= 150.0 - 15.0  # the limit less the margin, not less this process
    start = max(i for i, line in enumerate(shown) if line.startswith("budget "))
    block = [shown[start], *(ln for ln in shown[start + 1 : start + 4] if re.match(r" {2}[−+<(=]", ln))]
    assert " ".join(ln.strip() for ln in block) == account and all(len(ln) <= 50 for ln in block)
    refused = refused_budget(shown)
    assert refused is not None and abs(refused / MiB - budget) < 0.06

    data = json.loads(res.stdout)
    top = data["causes"][0]
    assert top["id"] == "context-too-large", [c["id"] for c in data["causes"]]
    assert top["title"] == "The model does not fit this memory at any context"  # not the context's fault
    assert account in top["evidence"]  # the doctor quotes the figures it planned the fix with
    # the shortfall the doctor names is the refusal's, against the same printed budget
    said = re.search(r"\(([\d.]+) MiB over at context", " ".join(shown))
    named = re.search(r"([\d.]+) MiB over", top["fix"])
    assert said and named and said.group(1) == named.group(1), (said, top["fix"])
    fix = top["fix_commands"][-1]
    assert fix != run
    program = parse_command(fix).tool == "llama.cpp"
    again = fit.fit_model(
        smollm_path,
        parse_command(fix).settings,
        budget_bytes=refused,
        arithmetic=program_arithmetic if program else None,
    )
    assert again.fits, (fix, again.memory.peak_rss_bytes / MiB)

    drop_page_cache()
    done = subprocess.run(
        [EDGEPILOT, "doctor", "--json", "--memory-limit", "150MiB", "--", *fix],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    report = json.loads(done.stdout)
    assert report["run"]["exit_code"] == 0, (fix, report["causes"][:1], done.stderr[-2000:])
    assert report["causes"][0]["id"] == "succeeded"

    # the other way out it names, a larger limit, holds the command as it was typed
    larger = re.search(r"`--memory-limit (\d+)MiB`", top["fix"])
    assert larger, top["fix"]
    drop_page_cache()
    done = subprocess.run(
        [EDGEPILOT, "doctor", "--json", "--memory-limit", f"{larger.group(1)}MiB", "--", *run],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    report = json.loads(done.stdout)
    assert report["run"]["exit_code"] == 0, (larger.group(0), done.stderr[-2000:])
