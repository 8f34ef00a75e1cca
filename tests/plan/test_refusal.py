"""`run`'s refusal says what is true (issue 31): the nearest setting that fits, or that nothing fits and by
how much, never "use the settings above" when the settings above do not fit. Pure planning."""

from __future__ import annotations

import re

from edgepilot.plan.fit import fit_model
from edgepilot.plan.requested import RequestedSettings
from edgepilot.plan.types import DoesNotFit

MIB = 1 << 20


def test_refusal_names_the_largest_context_that_fits(smollm_path):
    plan = fit_model(smollm_path, RequestedSettings(n_ctx=32768), budget_bytes=300 * MIB)
    text = str(DoesNotFit(plan))
    assert not plan.fits and 0 < plan.max_ctx < 32768
    assert f"--ctx {plan.max_ctx} fits" in text
    assert "settings above" not in text
    # and that context does fit, by the planner
    assert fit_model(smollm_path, RequestedSettings(n_ctx=plan.max_ctx), budget_bytes=300 * MIB).fits


def test_refusal_says_nothing_fits_and_by_how_much(smollm_path):
    budget = int(131.9 * MIB)
    plan = fit_model(smollm_path, budget_bytes=budget, ctx_target=4096)
    text = str(DoesNotFit(plan))
    assert not plan.fits and plan.max_ctx == 0
    over = re.search(
        r"nothing fits at any context with these settings \((\d+\.\d) MiB over at context 256\)", text
    )
    assert over, text
    smallest = fit_model(
        smollm_path,
        RequestedSettings(
            n_ctx=256,
            n_ubatch=plan.settings.n_ubatch,
            type_k=plan.settings.type_k,
            type_v=plan.settings.type_v,
            flash_attn=plan.settings.flash_attn,
        ),
        budget_bytes=budget,
    )
    assert abs(float(over.group(1)) * MIB - (smallest.memory.peak_rss_bytes - budget)) < 0.1 * MIB
    # the nearest thing that does fit: the same model by llama.cpp's own program (no interpreter)
    assert "nearest that fits: llama.cpp's llama-completion" in text
    lean = next(a for a in plan.alternatives if a.kind == "llama-completion")
    assert lean.fits and lean.peak_rss_bytes <= budget
    assert lean.llama_cpp_args[0] == "llama-completion" and "-no-cnv" in lean.llama_cpp_args
    assert "budget of 131.9 MiB" in text  # as the budget's account shows it


def test_without_a_fitting_option_the_refusal_says_only_what_is_over(smollm_path):
    plan = fit_model(smollm_path, budget_bytes=60 * MIB, ctx_target=4096)
    text = str(DoesNotFit(plan))
    assert "nothing fits at any context" in text and "nearest" not in text
