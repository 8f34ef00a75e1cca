"""Memory causes with the model known: the planner's numbers are the evidence and its context the fix."""

from __future__ import annotations

from edgepilot.doctor.diagnose import diagnose
from edgepilot.plan import fit
from edgepilot.plan.requested import RequestedSettings

MiB = 1 << 20


def test_sigkill_with_a_context_too_large_for_the_budget(smollm_path):
    budget = 300 * MiB
    command = ["edgepilot", "run", str(smollm_path), "--ctx", "32768", "-p", "hi"]
    d = diagnose(["Killed"], exit_code=137, command=command, root=None, budget_bytes=budget)
    plan = fit.fit_model(smollm_path, fit.RequestedSettings(n_ctx=32768), budget_bytes=budget)
    assert not plan.fits and 0 < plan.max_ctx < 32768

    ids = [c.id for c in d.causes]
    assert ids[:2] == ["killed-by-system", "context-too-large"]
    killed = d.causes[0]
    assert any(
        e.startswith("memory plan: ctx 32768") and f"largest context that fits: {plan.max_ctx}" in e
        for e in killed.evidence
    )
    assert f"--ctx {plan.max_ctx}" in killed.fix and str(smollm_path) in killed.fix
    assert d.plan is not None and d.plan.max_ctx == plan.max_ctx


def test_alloc_failure_with_the_model_known_gives_settings_that_fit(smollm_path):
    lines = [
        "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 754974720",
        "llama_kv_cache_init: failed to allocate buffer for kv cache",
    ]
    d = diagnose(
        lines,
        model=str(smollm_path),
        requested=RequestedSettings(n_ctx=32768),
        root=None,
        budget_bytes=200 * MiB,
    )
    assert d.causes[0].id == "context-too-large"
    assert "-c " in d.causes[0].fix or "--ctx " in d.causes[0].fix
    assert d.plan is not None and not d.plan.fits


def test_no_plan_for_a_model_that_fits(smollm_path):
    d = diagnose(
        ["Killed"],
        exit_code=137,
        model=str(smollm_path),
        requested=RequestedSettings(n_ctx=512),
        root=None,
        budget_bytes=4096 * MiB,
    )
    killed = d.causes[0]
    assert killed.id == "killed-by-system"
    assert "context-too-large" not in [c.id for c in d.causes]
    assert "logcat" in killed.fix  # the plan fits: look for who else took the memory


def test_edgepilot_runs_own_refusal_is_read(smollm_path):
    from edgepilot.plan.types import DoesNotFit

    budget = 300 * MiB
    plan = fit.fit_model(smollm_path, fit.RequestedSettings(n_ctx=32768), budget_bytes=budget)
    command = ["edgepilot", "run", str(smollm_path), "--ctx", "32768"]
    d = diagnose(
        [f"edgepilot: error: {DoesNotFit(plan)}"],
        exit_code=2,
        command=command,
        root=None,
        budget_bytes=budget,
    )
    top = d.causes[0]
    assert top.id == "context-too-large"
    assert any("the system would kill this run" in e for e in top.evidence)
    assert f"--ctx {plan.max_ctx}" in top.fix
