"""Speculation with the target offloaded (issue 42), on lavapipe in the GPU lane: Debian's llama-server
(0.7.x, another llama.cpp than ours) with every layer on Vulkan0 keeps plain generation's greedy text with
n-gram lookup and with a draft model (SmolLM2 drafting for itself), counts the drafts, and the draft goes to
the target's device (-devd) with as many layers (-ngld), as fit plans it: fit's peak for the draft run is
within 5 % of the measured one once the plain runs have calibrated the driver
(tuned/offload_calibration.py), the draft counting no second driver. Each first run of a kind compiles its
batches' pipelines (lavapipe's LLVM, ~100-200 MiB more on a cold shader cache): the plain run and the draft
run are each made twice, and fit is held to the second.

Lavapipe is slow (a token of prompt ~0.3 s here, more for longer prompts): ctx 64, two lines said twice
(lookup needs a repeat longer than its 12-token n-gram) and 16 tokens."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import sidlane as lane

from speckit import LINES

N_GEN = 16
FLAGS = ["--device", "Vulkan0", "--gpu-layers", "all", "--ctx", "64"]


def _edgepilot(root: Path, env: dict[str, str], *args: str) -> dict[str, Any]:
    done = lane.run(root, ["edgepilot", *args, "--json"], env=env, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _run(root: Path, env: dict[str, str], model: str, prompt: str, *extra: str) -> dict[str, Any]:
    argv = ["run", model, "--engine", "tools", *FLAGS, "--prompt-file", prompt, "--raw", "--temp", "0"]
    result = _edgepilot(root, env, *argv, "-n", str(N_GEN), *extra)
    assert result["settings"]["device"] == "Vulkan0" and result["n_gen"] == N_GEN, result
    return result


def test_lookup_and_a_draft_on_an_offloaded_target_keep_the_text_and_the_plan(gpu_root, smollm_in_root):
    data = f"/tmp/ep-spec-gpu-{uuid.uuid4().hex[:8]}"
    env = {"GGML_VK_VISIBLE_DEVICES": "0", "EDGEPILOT_DATA_DIR": data}
    prompt = f"{data}-prompt.txt"
    lane.host_path(gpu_root, prompt).write_text(LINES * 2)  # 38 tokens: 16 more fit in ctx 64
    try:
        plain = _run(gpu_root, env, smollm_in_root, prompt)
        plain_again = _run(gpu_root, env, smollm_in_root, prompt)  # the first run compiles the pipelines
        assert plain_again["text"] == plain["text"] and plain["speculation"] is None
        lookup = _run(gpu_root, env, smollm_in_root, prompt, "--lookup", "--draft-max", "12")
        draft_flags = ("--draft", smollm_in_root)
        first_draft = _run(gpu_root, env, smollm_in_root, prompt, *draft_flags)  # compiles its pipelines
        planned = _edgepilot(gpu_root, env, "fit", smollm_in_root, *FLAGS, *draft_flags)
        draft = _run(gpu_root, env, smollm_in_root, prompt, *draft_flags)
    finally:
        lane.run(gpu_root, ["rm", "-rf", data, prompt])
    assert first_draft["text"] == draft["text"]
    for name, result in (("lookup", lookup), ("draft", draft)):
        spec = result["speculation"]
        assert result["text"] == plain["text"], (name, result["text"], plain["text"])
        assert spec["drafted"] > 0 and 0 < spec["accepted"] <= spec["drafted"], (name, spec)
    args = draft["llama_cpp_args"]
    assert args[args.index("-ngld") + 1] == args[args.index("-ngl") + 1]
    assert args[args.index("-devd") + 1] == "Vulkan0"
    predicted, measured = planned["memory"]["peak_rss_bytes"], draft["peak_rss_bytes"]
    peaks = (plain_again["peak_rss_bytes"], first_draft["peak_rss_bytes"], predicted, measured)
    table = dict(zip(("plain", "first draft", "fit", "draft"), (n >> 20 for n in peaks), strict=True))
    print(table)
    assert abs(predicted - measured) <= 0.05 * measured, table
