"""Every memory cause's fix goes through the planner (issue 31): the command it proposes, read back like any
command line and planned again under the same budget, fits it and differs from the command that failed.
When no context fits, the fix says so with the figures and gives the nearest thing that does.

Pure planning on the real SmolLM2 file (no llama.cpp run): the cgroup tests run the fixes for real.
"""

from __future__ import annotations

import shutil

from edgepilot.doctor.command import parse_command
from edgepilot.doctor.diagnose import diagnose
from edgepilot.doctor.types import DeviceState, RunRecord
from edgepilot.plan.fit import fit_model
from edgepilot.plan.memory_model import program_arithmetic
from edgepilot.plan.requested import RequestedSettings
from edgepilot.plan.types import DoesNotFit

MIB = 1 << 20
MEMORY = ("n_ctx", "n_ubatch", "type_k", "type_v", "flash_attn", "use_mmap", "repack")
MEMORY_CAUSES = {"killed-by-system", "out-of-memory-alloc", "context-too-large"}
KV_FAIL = [
    "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 754974720",
    "llama_kv_cache_init: failed to allocate buffer for kv cache",
]


def replan(model, argv: list[str], budget: int):
    """The proposed command through the planner, as the tool it names will plan it."""
    facts = parse_command(argv)
    program = facts.tool == "llama.cpp"
    return fit_model(
        model,
        facts.settings,
        budget_bytes=budget,
        ctx_target=None if program else 4096,
        arithmetic=program_arithmetic if program else None,
        own_process=False,
    )


def settings(plan) -> tuple:
    return tuple(getattr(plan.settings, f) for f in MEMORY)


def check_fixes(d, model, failed: list[str], budget: int, failed_settings: tuple) -> int:
    """Each memory cause's proposed command fits `budget` by the plan and differs from what failed."""
    checked = 0
    for c in d.causes:
        if c.id not in MEMORY_CAUSES:
            continue
        assert c.fix_commands, (c.id, c.fix)
        command = c.fix_commands[-1]
        assert command != failed, c.id
        again = replan(model, command, budget)
        assert again.fits, (c.id, command, again.memory.peak_rss_bytes / MIB, budget / MIB)
        other_program = parse_command(command).tool != parse_command(failed).tool
        assert other_program or settings(again) != failed_settings, (c.id, command)
        checked += 1
    return checked


def test_killed_by_the_limit_gets_settings_that_fit_it(smollm_path):
    budget = 300 * MIB
    failed = ["edgepilot", "run", str(smollm_path), "--ctx", "32768", "-p", "hi"]
    d = diagnose(["Killed"], exit_code=137, command=failed, root=None, budget_bytes=budget)
    ids = [c.id for c in d.causes]
    assert ids[:2] == ["killed-by-system", "context-too-large"]
    before = fit_model(smollm_path, RequestedSettings(n_ctx=32768), budget_bytes=budget, own_process=False)
    assert check_fixes(d, smollm_path, failed, budget, settings(before)) == 2
    assert "--ctx" in d.causes[0].fix_commands[0] and str(smollm_path) in d.causes[0].fix


def test_a_failed_allocation_of_llama_cli_gets_a_llama_cli_that_fits(smollm_path):
    budget = 200 * MIB
    failed = ["llama-cli", "-m", str(smollm_path), "-c", "32768", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"]
    d = diagnose([*KV_FAIL], exit_code=1, command=failed, root=None, budget_bytes=budget)
    ids = [c.id for c in d.causes]
    assert "out-of-memory-alloc" in ids and "context-too-large" in ids
    before = replan(smollm_path, failed, budget)
    assert not before.fits
    assert check_fixes(d, smollm_path, failed, budget, settings(before)) == 2
    fix = d.causes[0].fix_commands[0]
    assert fix[0] == "llama-cli" and "-c" in fix


def test_a_refusal_whose_settings_were_already_the_smallest_gets_what_does_fit(smollm_path):
    # issue 31: the run already used ctx 256 and a q8_0 KV cache; the doctor proposed them again
    budget = int(131.9 * MIB)
    failed = [
        "edgepilot",
        "run",
        str(smollm_path),
        "-n",
        "16",
        "--ctx",
        "256",
        "--kv",
        "q8_0",
        "--ubatch",
        "128",
    ]
    plan = fit_model(smollm_path, parse_command(failed).settings, budget_bytes=budget)
    lines = [f"edgepilot: error: {DoesNotFit(plan)}", plan.budget.account]
    d = diagnose(lines, exit_code=2, command=failed, root=None, budget_bytes=150 * MIB)
    top = d.causes[0]
    assert top.id == "context-too-large"
    assert "nothing fits in 131.9 MiB (edgepilot run's own budget) at any context" in top.fix
    assert "MiB over" in top.fix
    assert check_fixes(d, smollm_path, failed, budget, settings(plan)) == 1
    command = top.fix_commands[-1]
    assert command[0].endswith("llama-completion") and "-no-cnv" in command
    assert command[command.index("-n") + 1] == "16"  # the failed command's own token count
    assert "--ctx 256" not in top.fix and "-ctk q8_0 -ctv q8_0 -fa on" not in top.fix.split("`")[0]


def test_a_refusal_with_a_smaller_context_that_fits_names_it(smollm_path):
    budget = 300 * MIB
    failed = ["edgepilot", "run", str(smollm_path), "--ctx", "32768"]
    plan = fit_model(smollm_path, RequestedSettings(n_ctx=32768), budget_bytes=budget)
    d = diagnose([f"edgepilot: error: {DoesNotFit(plan)}"], exit_code=2, command=failed, root=None)
    top = d.causes[0]
    assert top.id == "context-too-large"
    assert check_fixes(d, smollm_path, failed, budget, settings(plan)) == 1
    assert f"--ctx {plan.max_ctx}" in top.fix


def test_a_kill_the_plan_did_not_predict_is_planned_under_the_peak_it_had(smollm_path):
    budget = 4096 * MIB
    failed = ["edgepilot", "run", str(smollm_path), "--ctx", "4096"]
    state = DeviceState(3 << 30, 30.0, 10.0, None, None)
    run = RunRecord(failed, -9, 137, 9, "SIGKILL", 3.0, 240 * MIB, state, state)
    killer = "Out of memory: Killed process 4242 (edgepilot) total-vm:900000kB, anon-rss:200000kB"
    d = diagnose([killer], command=failed, root=None, run=run, budget_bytes=budget)
    top = d.causes[0]
    assert top.id == "killed-by-system"
    before = fit_model(smollm_path, RequestedSettings(n_ctx=4096), budget_bytes=budget, own_process=False)
    assert before.fits  # the plan said it fits: the memory it had was less than the budget
    assert check_fixes(d, smollm_path, failed, 240 * MIB, settings(before)) == 1
    assert "240.0 MiB (its peak when it was killed)" in top.fix and "lowmemorykiller" in top.fix


def test_when_only_a_smaller_quantization_fits_the_fix_makes_it_and_it_fits(tmp_path, smollm_path):
    from click.testing import CliRunner

    from edgepilot.cli import app

    model = tmp_path / smollm_path.name  # the fix writes next to the model: not into the test extra
    shutil.copy(smollm_path, model)
    budget = 118 * MIB
    failed = ["llama-cli", "-m", str(model), "-c", "512", "-n", "16"]
    d = diagnose(["Killed"], exit_code=137, command=failed, root=None, budget_bytes=budget)
    top = d.causes[0]
    assert top.id == "killed-by-system" and "nothing fits in 118.0 MiB" in top.fix
    quantize, run = top.fix_commands
    assert quantize[:2] == ["edgepilot", "quantize"] and quantize[quantize.index("--to") + 1] == "Q4_0"
    made = CliRunner().invoke(app, quantize[1:])
    assert made.exit_code == 0, made.output
    assert run != failed and run[run.index("-m") + 1] == str(tmp_path / "SmolLM2-135M-Instruct-Q4_0.gguf")
    again = replan(run[run.index("-m") + 1], run, budget)
    assert again.fits, again.memory.peak_rss_bytes / MIB
