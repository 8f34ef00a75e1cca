"""fit plans an offloaded run: on lavapipe (Debian's libggml0-backend-vulkan, Mesa's software Vulkan driver,
made visible with GGML_VK_VISIBLE_DEVICES=0), `edgepilot run --engine tools --device Vulkan0 --gpu-layers N`
peaks within 5 % of what `fit` predicts with the same flags, at three layer counts (SmolLM2: lavapipe takes
~1-2 minutes per run here; Gemma 3 takes ~4 and this x86 host's AMX buffers make its CPU share differ from a
phone's, see plan/offload.py)."""

from __future__ import annotations

import json

import pytest
import sidlane as lane

N_GEN = 4
CTX = 256
VISIBLE = {"GGML_VK_VISIBLE_DEVICES": "0"}


@pytest.mark.parametrize("layers", ["10", "20", "all"])
def test_fit_predicts_an_offloaded_runs_peak_within_5_percent(sid_root, layers):
    model = lane.model_in_root(sid_root, "smollm")
    flags = ["--device", "Vulkan0", "--gpu-layers", layers, "--ctx", str(CTX)]
    done = lane.run(sid_root, ["edgepilot", "fit", model, *flags, "--json"], env=VISIBLE)
    assert done.returncode == 0, done.stderr[-2000:]
    plan = json.loads(done.stdout)
    assert plan["settings"]["device"] == "Vulkan0"
    assert set(plan["memory"]["device_bytes"]) == {"Vulkan0"} and plan["memory"]["repack_bytes"] == 0
    prompt = lane.filling_prompt(sid_root, model, CTX - N_GEN - 24)
    argv = ["edgepilot", "run", model, "--engine", "tools", *flags, "--prompt-file", prompt]
    argv += ["-n", str(N_GEN), "--raw", "--temp", "0", "--json"]
    done = lane.run(sid_root, argv, env=VISIBLE, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(done.stdout)
    assert measured["settings"]["n_gpu_layers"] == plan["settings"]["n_gpu_layers"]
    assert measured["n_prompt"] + measured["n_gen"] > 0.85 * CTX
    predicted = plan["memory"]["peak_rss_bytes"]
    ratio = measured["peak_rss_bytes"] / predicted
    assert 0.95 <= ratio <= 1.05, (layers, predicted >> 20, measured["peak_rss_bytes"] >> 20)
