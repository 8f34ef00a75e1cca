"""fit plans an offloaded run, calibrated by one: on lavapipe (Debian's libggml0-backend-vulkan, Mesa's
software Vulkan driver, made visible with GGML_VK_VISIBLE_DEVICES=0), one `edgepilot run --engine tools
--device Vulkan0 --gpu-layers 10` teaches the plan its driver's memory and this host's extra CPU buffers
(tuned/offload_calibration.py); then `edgepilot run` peaks within 5 % of what `fit` predicts with the same
flags at two more layer counts, for both test models. Before that run the plan says its driver figure is
assumed (and for Gemma 3 on this x86 host it is far under: the AMX copy of its output, 190 MiB).

The device's first offloaded run is special: lavapipe compiles ggml's pipelines with LLVM on a cold cache
(Mesa's mesa_shader_cache) and that run peaks ~360-400 MiB higher than every later one (measured on a fresh
lane: 770 MiB predicted after a cold calibrating run, 415 MiB measured warm). The calibration marks it
(`cold`) and plans from the later runs once there are some, so each chain starts with that first run, then
one calibrating run, then compares (on a warm cache, setting the first run aside loses nothing).

Lavapipe is slow (a run filling ctx 64 takes ~20 s here): the two models' runs go side by side, each
with its own data directory so that neither's calibration file is written under the other's."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import sidlane as lane

N_GEN = 2
CTX = 64  # a prompt through lavapipe costs ~0.3 s a token here, and more for longer ones
CALIBRATE_AT = "10"
# two counts besides the calibrating one (a third cost minutes of lavapipe per model and told nothing new)
LAYERS = {"smollm": ["20", "all"], "gemma": ["5", "all"]}  # Gemma 3 has 18 blocks + output


def _env(which: str) -> dict[str, str]:
    data = f"/tmp/ep-{lane.CHECKOUT_ID}-offload-{which}"
    return {"GGML_VK_VISIBLE_DEVICES": "0", "EDGEPILOT_DATA_DIR": data}


def _first_run_on_the_device(root: Path, which: str, model: str, prompt: str) -> None:
    """The device's first offloaded run (its pipelines compiled, and cached by the driver), as the calibrating
    run will be: with `-n 1` no single-token decode runs, and its pipelines would compile in the next run."""
    argv = ["edgepilot", "run", model, "--engine", "tools", *_flags(CALIBRATE_AT), "--prompt-file", prompt]
    done = lane.run(root, [*argv, "-n", str(N_GEN), "--raw", "--json"], env=_env(which), timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]


def _flags(layers: str) -> list[str]:
    return ["--device", "Vulkan0", "--gpu-layers", layers, "--ctx", str(CTX)]


def _fit(root: Path, which: str, model: str, layers: str) -> dict[str, Any]:
    done = lane.run(root, ["edgepilot", "fit", model, *_flags(layers), "--json"], env=_env(which))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _run(root: Path, which: str, model: str, layers: str, prompt: str) -> dict[str, Any]:
    argv = ["edgepilot", "run", model, "--engine", "tools", *_flags(layers), "--prompt-file", prompt]
    argv += ["-n", str(N_GEN), "--raw", "--temp", "0", "--json"]
    done = lane.run(root, argv, env=_env(which), timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _driver_note(plan: dict[str, Any]) -> str:
    return next(n for n in plan["notes"] if "driver memory" in n)


def _chain(root: Path, which: str) -> list[tuple[str, str, int, int]]:
    """The calibrating run, then fit and run at each layer count: (which, layers, predicted, measured)."""
    model = lane.model_in_root(root, "smollm") if which == "smollm" else lane.bundled_model(root)
    lane.run(root, ["rm", "-rf", _env(which)["EDGEPILOT_DATA_DIR"]])
    prompt = lane.filling_prompt(root, model, CTX - N_GEN - 4)
    before = _fit(root, which, model, CALIBRATE_AT)
    assert "assumed" in _driver_note(before), before["notes"]
    _first_run_on_the_device(root, which, model, prompt)
    calibrating = _run(root, which, model, CALIBRATE_AT, prompt)
    assert calibrating["n_prompt"] + calibrating["n_gen"] > 0.85 * CTX
    rows = []
    for layers in LAYERS[which]:
        plan = _fit(root, which, model, layers)
        note = _driver_note(plan)
        assert "calibrated" in note and "llvmpipe" in note, plan["notes"]
        assert set(plan["memory"]["device_bytes"]) == {"Vulkan0"} and plan["memory"]["repack_bytes"] == 0
        measured = _run(root, which, model, layers, prompt)
        assert measured["settings"]["n_gpu_layers"] == plan["settings"]["n_gpu_layers"]
        assert measured["n_prompt"] + measured["n_gen"] > 0.85 * CTX
        rows.append((which, layers, plan["memory"]["peak_rss_bytes"], measured["peak_rss_bytes"]))
    return rows


def test_fit_predicts_offloaded_peaks_within_5_percent_after_one_calibrating_run(sid_root):
    with ThreadPoolExecutor(max_workers=2) as pool:
        chains = [pool.submit(_chain, sid_root, which) for which in LAYERS]
        rows = [row for chain in chains for row in chain.result()]
    table = [(which, layers, predicted >> 20, measured >> 20) for which, layers, predicted, measured in rows]
    print(table)
    assert len(rows) == 4
    for _which, _layers, predicted, measured in rows:
        assert 0.95 <= measured / predicted <= 1.05, table
