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
