"""fit on another llama.cpp than the pinned one: after a run through it (which calibrates the plan for that
version, tuned/calibrate.py), fit's predicted peak is within 5 % of the peak a context-filling run measures,
for both real models, at a context the calibration run did not use."""

from __future__ import annotations

import json

import pytest
import sidlane as lane

N_GEN = 4


def run_filled(root, model: str, ctx: int) -> dict:
    prompt = lane.filling_prompt(root, model, ctx - N_GEN - 24)
    argv = ["edgepilot", "run", model, "--prompt-file", prompt, "-n", str(N_GEN), "--raw", "--temp", "0"]
    done = lane.run(root, [*argv, "--ctx", str(ctx), "--json"], timeout=1200)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("which", ["smollm", "gemma"])
def test_fit_is_within_5_percent_of_a_filled_run_on_debians_llama_cpp(sid_root, which):
    model = lane.model_in_root(sid_root, "smollm") if which == "smollm" else lane.bundled_model(sid_root)
    run_filled(sid_root, model, 1024)  # the first run on this version calibrates its plan
    done = lane.run(sid_root, ["edgepilot", "fit", model, "--ctx", "2048", "--json"])
    assert done.returncode == 0, done.stderr[-2000:]
    plan = json.loads(done.stdout)
    assert plan["engine"]["kind"] == "tools" and plan["engine"]["version"].startswith("0.7")
    assert any("memory planned for llama-server 0.7" in n for n in plan["notes"]), plan["notes"]
    measured = run_filled(sid_root, model, 2048)
    assert measured["n_prompt"] + measured["n_gen"] > 0.95 * 2048
    predicted = plan["memory"]["peak_rss_bytes"]
    ratio = measured["peak_rss_bytes"] / predicted
    assert 0.95 <= ratio <= 1.05, (which, predicted >> 20, measured["peak_rss_bytes"] >> 20)
