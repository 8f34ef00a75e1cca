"""A planned run survives under a real memory limit equal to its budget (cgroup v1, the kernel's OOM killer).

The planner picks the largest context whose predicted peak fits 200 MiB; the run, with a prompt that fills
that context, must finish inside a 200 MiB cgroup. (At 300 MiB the plan is an 8192-token q8_0 context
whose prefill alone takes over 10 minutes on two cores: the same check, five times the cost.) The doctor's
end-to-end test covers the other side: a context far beyond the plan is killed.
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
BUDGET = 200 * MIB
EDGEPILOT = str(Path(sys.executable).with_name("edgepilot"))
problem = cgroup_problem()
pytestmark = pytest.mark.skipif(problem is not None, reason=problem or "")


N_GEN = 4


def _filling_prompt(path: Path, model: Path, n_ctx: int) -> Path:
    with LlamaEngine(model, EngineSettings(n_ctx=256, n_threads=2)) as engine:
        words = engine.tokenize("phone battery memory model token layer cache window " * (n_ctx // 4))
        prompt_tokens = words[: n_ctx - N_GEN - 8]
        prompt = b"".join(engine.piece(t) for t in prompt_tokens).decode("utf-8", errors="ignore")
    path.write_text(prompt)
    return path


def _run_limited(model: Path, prompt: Path, extra: list[str]) -> dict:
    run = [
        EDGEPILOT,
        "run",
        str(model),
        "--prompt-file",
        str(prompt),
        "-n",
        str(N_GEN),
        "--raw",
        "--temp",
        "0",
    ]
    doctor = [EDGEPILOT, "doctor", "--memory-limit", "200MiB", "--json", "--", *run, *extra]
    proc = subprocess.run(doctor, capture_output=True, text=True, timeout=900)
    return json.loads(proc.stdout)


def test_planned_context_survives_a_memory_limit_equal_to_the_budget(tmp_path, smollm_path):
    plan = fit_model(smollm_path, budget_bytes=BUDGET)
    assert plan.fits and plan.max_ctx >= 1024
    prompt = _filling_prompt(tmp_path / "p.txt", smollm_path, plan.settings.n_ctx)
    report = _run_limited(smollm_path, prompt, ["--budget", "200MiB"])
    assert report["run"]["exit_code"] == 0, report["causes"][:1]
    cgroup = report["run"]["cgroup"]
    assert cgroup["oom_kill"] == 0 and cgroup["max_usage_bytes"] <= BUDGET, cgroup  # what the kernel counts
    peak = report["run"]["peak_rss_bytes"]
    # a plan bound by the budget fills it (no margin with --budget): RSS may pass it by the prediction's error
    assert peak <= BUDGET * 1.05, peak / MIB
    # the prediction was for exactly this: a prompt that fills the planned context
    assert abs(plan.memory.peak_rss_bytes - peak) / peak < 0.05, (
        plan.memory.peak_rss_bytes / MIB,
        peak / MIB,
    )


def test_fit_and_run_agree_inside_a_200mib_cgroup(smollm_path):
    """issue 31: inside 200 MiB, fit (no llama.cpp loaded) recommended settings that run (llama.cpp loaded,
    its budget taking itself away a second time) then refused. Both now count the run's process once."""
    from edgepilot.doctor.cgroup import MemoryLimit, drop_page_cache

    with MemoryLimit(200 * MIB) as group:
        planned = subprocess.run(
            group.wrap([EDGEPILOT, "fit", str(smollm_path), "--json"]),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert planned.returncode == 0, planned.stderr
        plan = json.loads(planned.stdout)
        assert plan["fits"] and plan["budget"]["limit_bytes"] == 200 * MIB
        recommended = plan["edgepilot_args"]
        assert recommended[:3] == ["edgepilot", "run", str(smollm_path)]
        drop_page_cache()
        ran = subprocess.run(
            group.wrap([EDGEPILOT, *recommended[1:], "-n", "8", "--json"]),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert ran.returncode == 0, (recommended, ran.stderr[-3000:])
    result = json.loads(ran.stdout)
    assert result["settings"]["n_ctx"] == plan["settings"]["n_ctx"] and result["n_gen"] > 0
