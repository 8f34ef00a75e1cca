"""Issue 40, part 5: the offloaded plan before any offloaded run comes from the device's facts (vulkaninfo's
device type and heaps, the driver's libraries on disk: plan/driver_prior.py) and lands within 25 % of the
first run's peak; after the second offloaded run of the same model it is within 5 % of the next run.

On lavapipe (Debian's libggml0-backend-vulkan, Mesa's software driver, visible with GGML_VK_VISIBLE_DEVICES=0)
with an empty data folder and an empty Mesa shader cache (the driver compiles every pipeline in the first
run, as on a new device), at llama.cpp's default ubatch (512) and all layers on the device, a prompt filling
the context: the settings of the issue's measurement (a prior 84 % over the first run), on SmolLM2. (Gemma 3
ran here too until a fresh CI run measured the pair at over 20 minutes, most of it lavapipe compiling every
pipeline twice; its prior's arithmetic is the same and plan/test_driver_prior.py covers its facts, and the
packaged lane's offload-plan test still calibrates and plans Gemma on lavapipe.)"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import sidlane as lane

CTX = 128  # a prompt through lavapipe costs ~0.3 s a token here: 128 halves each run of 256
N_GEN = 2
FLAGS = ["--device", "Vulkan0", "--gpu-layers", "all", "--ctx", str(CTX)]


def _env(tag: str) -> dict[str, str]:
    return {
        "GGML_VK_VISIBLE_DEVICES": "0",
        "EDGEPILOT_DATA_DIR": f"/tmp/ep-prior-{tag}",
        "MESA_SHADER_CACHE_DIR": f"/tmp/ep-prior-{tag}-mesa",
    }


def _fit(root: Path, env: dict[str, str], model: str) -> dict[str, Any]:
    done = lane.run(root, ["edgepilot", "fit", model, *FLAGS, "--json"], env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _run(root: Path, env: dict[str, str], model: str, prompt: str) -> int:
    argv = ["edgepilot", "run", model, "--engine", "tools", *FLAGS, "--prompt-file", prompt]
    done = lane.run(root, [*argv, "-n", str(N_GEN), "--raw", "--temp", "0", "--json"], env=env, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["settings"]["device"] == "Vulkan0" and result["n_prompt"] + result["n_gen"] > 0.85 * CTX
    return result["peak_rss_bytes"]


def _chain(root: Path, which: str) -> dict[str, Any]:
    model = lane.model_in_root(root, "smollm") if which == "smollm" else lane.bundled_model(root)
    env = _env(f"{which}-{uuid.uuid4().hex[:8]}")
    prompt = lane.filling_prompt(root, model, CTX - N_GEN - 12)
    prior = _fit(root, env, model)
    first = _run(root, env, model, prompt)
    second = _run(root, env, model, prompt)
    calibrated = _fit(root, env, model)
    third = _run(root, env, model, prompt)
    lane.run(root, ["rm", "-rf", env["EDGEPILOT_DATA_DIR"], env["MESA_SHADER_CACHE_DIR"]])
    return {"which": which, "prior": prior, "calibrated": calibrated, "peaks": (first, second, third)}


def _driver_note(plan: dict[str, Any]) -> str:
    return next(n for n in plan["notes"] if "driver memory" in n)


@pytest.mark.parametrize("which", ["smollm"])
def test_the_prior_is_within_25_percent_of_the_first_run_and_two_runs_bring_it_within_5(gpu_root, which):
    c = _chain(gpu_root, which)
    first, second, third = c["peaks"]
    prior, calibrated = c["prior"]["memory"]["peak_rss_bytes"], c["calibrated"]["memory"]["peak_rss_bytes"]
    table = [which] + [n >> 20 for n in (prior, first, second, calibrated, third)]
    print(table)
    note = _driver_note(c["prior"])
    assert "assumed" in note and "llvmpipe" in note and "CPU" in note, note  # from the device's facts
    assert "calibrated" in _driver_note(c["calibrated"]), c["calibrated"]["notes"]
    assert abs(prior - first) / first <= 0.25, table
    assert abs(calibrated - third) / third <= 0.05, table
