"""Issue 32: after `edgepilot build --vulkan`, the in-process engine (CPU-only) loads that build's libllama,
which holds ggml's Vulkan backend. No GPU driver may load in edgepilot's own process: a driver that crashes
while listing its devices would kill edgepilot itself (no verdict, no advice); an honest one has no business
there either (the engine names no device, but ggml-vulkan would still open the driver)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import sidlane as lane
import vulkanfix
from gpulane import SIGSEGV_RETURNCODE, lying_env

PROMPT = "1, 2, 3, 4, 5, 6,"


@pytest.fixture(scope="session")
def binding_in_root(gpu_root: Path, fixed_build: dict) -> str:
    return vulkanfix.install_binding(gpu_root)


def _inprocess_run(root: Path, model: str, env: dict[str, str], binding: str):
    env = {
        **env,
        **vulkanfix.tools_env(),
        "PYTHONPATH": binding,
        "EDGEPILOT_DATA_DIR": f"/tmp/ep-inproc-{uuid.uuid4().hex[:10]}",
    }
    argv = [
        f"{lane.VENV}/bin/edgepilot",
        "run",
        model,
        "-p",
        PROMPT,
        "-n",
        "8",
        "--temp",
        "0",
        "--engine",
        "inprocess",
        "--verbose",
        "--json",
    ]
    return lane.run(root, argv, env, timeout=900)


def _loaded_the_vulkan_build(done) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    engine = result["engine"]
    assert engine["kind"] == "inprocess", engine
    assert (engine.get("library") or "").startswith(vulkanfix.TOOLS_DIR), engine
    assert result["n_gen"] == 8
    return result


def test_a_driver_crashing_in_enumeration_does_not_end_edgepilot(
    gpu_root: Path, lying_layer: str, binding_in_root: str, smollm_in_root: str
) -> None:
    env = lying_env(lying_layer, "enumerate")
    # the driver really crashes a process that lists its devices: llama.cpp's own tool, on the CPU
    listed = lane.run(gpu_root, [vulkanfix.tool("llama-completion"), "--list-devices"], env, timeout=300)
    assert listed.returncode == SIGSEGV_RETURNCODE, listed.stderr[-1500:]

    _loaded_the_vulkan_build(_inprocess_run(gpu_root, smollm_in_root, env, binding_in_root))


def test_an_honest_gpu_driver_is_not_even_opened_in_process(
    gpu_root: Path, binding_in_root: str, smollm_in_root: str
) -> None:
    done = _inprocess_run(gpu_root, smollm_in_root, {"GGML_VK_VISIBLE_DEVICES": "0"}, binding_in_root)
    _loaded_the_vulkan_build(done)
    assert "ggml_vulkan" not in done.stderr and "Vulkan0" not in done.stderr, done.stderr[-3000:]
