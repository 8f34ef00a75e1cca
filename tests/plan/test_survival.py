"""A planned run survives under a real memory limit equal to its budget (cgroup v1, the kernel's OOM killer).

The planner picks the largest context whose predicted peak fits 300 MiB; the run, with a prompt that fills
that context, must finish inside a 300 MiB cgroup. (The doctor's end-to-end test covers the other side: a
context far beyond the plan is killed.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from edgepilot.doctor.cgroup import cgroup_problem
from edgepilot.engine.inprocess import LlamaEngine
from edgepilot.plan.fit import fit_model
from edgepilot.plan.settings import EngineSettings

MIB = 1 << 20
BUDGET = 300 * MIB
EDGEPILOT = str(Path(sys.executable).with_name("edgepilot"))
problem = cgroup_problem()
pytestmark = pytest.mark.skipif(problem is not None, reason=problem or "")


def test_planned_context_survives_a_memory_limit_equal_to_the_budget(tmp_path, smollm_path):
    plan = fit_model(smollm_path, budget_bytes=BUDGET)
    assert plan.fits and plan.max_ctx >= 1024
    n_ctx, n_gen = plan.settings.n_ctx, 4
    with LlamaEngine(smollm_path, EngineSettings(n_ctx=256)) as engine:
        words = engine.tokenize("phone battery memory model token layer cache window " * (n_ctx // 4))
        prompt_tokens = words[: n_ctx - n_gen - 8]
        prompt = b"".join(engine.piece(t) for t in prompt_tokens).decode("utf-8", errors="ignore")
    prompt_file = tmp_path / "prompt.txt"
    prompt_file.write_text(prompt)
    run = [EDGEPILOT, "run", str(smollm_path), "--budget", "300MiB", "--prompt-file", str(prompt_file)]
    run += ["-n", str(n_gen), "--raw", "--temp", "0", "--json"]
    doctor = [EDGEPILOT, "doctor", "--memory-limit", "300MiB", "--json", "--", *run]
    proc = subprocess.run(doctor, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["run"]["exit_code"] == 0
    peak = report["run"]["peak_rss_bytes"]
    assert peak <= BUDGET
    # the prediction was for exactly this: a prompt that fills the planned context
    assert abs(plan.memory.peak_rss_bytes - peak) / peak < 0.05, (
        plan.memory.peak_rss_bytes / MIB,
        peak / MIB,
    )
