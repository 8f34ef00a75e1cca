"""The speed-up model behind tune's prediction (bench/spec_costs.py): the acceptance a llama-server run's
counts imply, the tokens a step gives, the cost curve read between and beyond its points, and the curve
measured for real on SmolLM2 (its figures are the machine's; only their shape is checked here)."""

from __future__ import annotations

import random

import pytest

from edgepilot.bench.spec_costs import (
    Costs,
    acceptance_per_token,
    measure_costs,
    predict_draft,
    predict_lookup,
    tokens_per_step,
)
from edgepilot.plan.settings import EngineSettings


def _simulated_share(a: float, k: int, steps: int, rng: random.Random) -> float:
    """Steps that keep drafts until the first the target would not pick: the share of drafts kept."""
    kept = 0
    for _ in range(steps):
        for _ in range(k):
            if rng.random() >= a:
                break
            kept += 1
    return kept / (steps * k)


@pytest.mark.parametrize("a", [0.2, 0.5, 0.8, 0.95])
@pytest.mark.parametrize("k", [1, 3, 8])
def test_the_acceptance_recovered_from_a_runs_counts_is_the_one_that_made_them(a, k):
    share = _simulated_share(a, k, 20_000, random.Random(a * 100 + k))
    assert acceptance_per_token(share, k) == pytest.approx(a, abs=0.02)
    # the tokens a step gives: its kept drafts plus the target's own
    assert tokens_per_step(a, k) == pytest.approx(
        1 + k * _simulated_share(a, k, 20_000, random.Random(7)), rel=0.03
    )


def test_the_ends_of_acceptance():
    assert acceptance_per_token(0.0, 4) == 0.0 and acceptance_per_token(1.0, 4) == 1.0
    assert tokens_per_step(0.0, 4) == 1 and tokens_per_step(1.0, 4) == 5


def test_the_curve_is_read_between_and_beyond_its_points():
    costs = Costs(128, {1: 0.010, 2: 0.012, 5: 0.018})
    assert costs.at(1) == costs.per_token() == 0.010
    assert costs.at(3.5) == pytest.approx(0.015)
    assert costs.at(8) == pytest.approx(0.018 + 3 * 0.002)  # the last slope, extended
    assert costs.at(0.5) == 0.010


def test_the_prediction_is_tokens_per_step_over_the_steps_cost():
    flat = Costs(128, {b: 0.010 for b in range(1, 10)})  # a bandwidth-bound device: a batch costs one read
    linear = Costs(128, {b: 0.010 * b for b in range(1, 10)})  # compute-bound: each token costs the same
    free = Costs(128, {b: 0.0 for b in range(1, 10)})  # a draft that costs nothing
    a, k = 0.8, 4
    e = tokens_per_step(a, k)
    assert predict_draft(flat, free, a, k) == pytest.approx(e)
    assert predict_draft(linear, free, a, k) == pytest.approx(e / (k + 1))
    # a draft at half the target's cost: its catch-up batch of E tokens, then k-1 single tokens
    half = Costs(128, {b: 0.005 * b for b in range(1, 10)})
    step = 0.010 + 0.005 * e + (k - 1) * 0.005
    assert predict_draft(flat, half, a, k) == pytest.approx(e * 0.010 / step)
    # lookup from its run: 100 tokens in 40 steps, 60 drafted tokens kept of 120
    assert predict_lookup(flat, 120, 60, 100) == pytest.approx(100 / 40)
    assert predict_lookup(linear, 120, 60, 100) == pytest.approx(100 * 0.010 / (40 * 0.010 * 4))
    assert predict_lookup(flat, 0, 0, 0) is None


def test_the_curve_is_measured_on_a_real_model(smollm_path):
    costs = measure_costs(smollm_path, EngineSettings(n_ctx=512, n_threads=2), sizes=(1, 2, 9), rounds=2)
    assert set(costs.seconds) == {1, 2, 9} and all(s > 0 for s in costs.seconds.values())
    assert costs.depth == 128
