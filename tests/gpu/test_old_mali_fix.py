"""Issue 32: the old Mali runs anyway. On the lying layer (Mali-G77 disguise: device apiVersion 1.1, NULL
vkGetBufferDeviceAddress) llama.cpp's own build dies with SIGSEGV, and the llama.cpp that
`edgepilot build --vulkan` makes (the engine's source with the old-Mali fix) runs every layer on it and
generates what the CPU generates.

The fixed build is made inside the root once per fix (vulkanfix.py; 10-20 min the first time on 2 cores)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import sidlane as lane
import vulkanfix
from gpulane import SIGSEGV_RETURNCODE, lying_env

from edgepilot.toolchain.vulkan_fix import LOG_LINE, MARKER, fix_id

# A prompt whose greedy continuation is clear-cut: on an open one ("The capital of France is") lavapipe and
# the CPU part after 4 tokens whatever the driver says (the same on the honest lavapipe): float sums differ.
PROMPT = "1, 2, 3, 4, 5, 6,"
OPEN_PROMPT = "The capital of France is"
GREEDY = ["-n", "8", "--temp", "0", "-no-cnv", "-c", "256", "--no-warmup", "-s", "1"]


@pytest.fixture(scope="session")
def gemma_in_root(gpu_root: Path) -> str:
    return lane.bundled_model(gpu_root)


def _completion(root: Path, program: str, model: str, env: dict[str, str], *flags: str, prompt: str = PROMPT):
    return lane.run(root, [program, "-m", model, "-p", prompt, *GREEDY, *flags], env, timeout=900)


def test_the_build_says_what_it_carries(fixed_build: dict) -> None:
    assert fixed_build["vulkan"] is True and fixed_build["vulkan_fix"] == fix_id()
    assert fixed_build["flags"]["GGML_VULKAN"] == "ON"
    assert set(vulkanfix.TOOLS.split(",")) <= set(fixed_build["tools"])


@pytest.mark.parametrize("which", ["smollm", "gemma"])
def test_offloaded_run_on_the_lying_driver_matches_the_cpu(
    gpu_root: Path, lying_layer: str, fixed_build: dict, smollm_in_root: str, gemma_in_root: str, which: str
) -> None:
    model = smollm_in_root if which == "smollm" else gemma_in_root
    env = lying_env(lying_layer, "bda")
    # llama.cpp's own build (Debian's, unfixed): the same run dies at the first Vulkan buffer.
    unfixed = _completion(gpu_root, "llama-completion", model, env, "-ngl", "99")
    assert unfixed.returncode == SIGSEGV_RETURNCODE, unfixed.stderr[-1500:]

    fixed_tool = vulkanfix.tool("llama-completion")
    gpu = _completion(gpu_root, fixed_tool, model, env, "-ngl", "99", "-v")  # -v: ggml-vulkan's info lines
    assert gpu.returncode == 0, gpu.stderr[-3000:]
    assert f"{LOG_LINE} ({MARKER})" in gpu.stderr
    assert "using device Vulkan0 (Mali-G77 MC9)" in gpu.stderr
    offloaded = [ln for ln in gpu.stderr.splitlines() if "offloaded" in ln and "layers to GPU" in ln]
    assert offloaded, gpu.stderr[-3000:]
    done, total = (int(n) for n in offloaded[-1].split("offloaded ")[1].split(" layers")[0].split("/"))
    assert done == total, offloaded[-1]
    assert "Vulkan0 model buffer size" in gpu.stderr

    cpu = _completion(gpu_root, fixed_tool, model, env, "-dev", "none")
    assert cpu.returncode == 0, cpu.stderr[-3000:]
    assert "Vulkan0 model buffer size" not in cpu.stderr
    assert gpu.stdout.strip() == cpu.stdout.strip() and len(cpu.stdout.strip()) > len(PROMPT)

    # On an open prompt the fixed run on the lying driver computes what the honest lavapipe computes.
    lied = _completion(gpu_root, fixed_tool, model, env, "-ngl", "99", prompt=OPEN_PROMPT)
    honest = _completion(
        gpu_root, fixed_tool, model, {"GGML_VK_VISIBLE_DEVICES": "0"}, "-ngl", "99", prompt=OPEN_PROMPT
    )
    assert lied.returncode == 0 and honest.returncode == 0, (lied.stderr[-1500:], honest.stderr[-1500:])
    assert lied.stdout.strip() == honest.stdout.strip() and len(lied.stdout.strip()) > len(OPEN_PROMPT)


def test_probe_says_usable_with_the_fix_and_run_offloads(
    gpu_root: Path, lying_layer: str, fixed_build: dict, smollm_in_root: str
) -> None:
    data = f"/tmp/ep-fix-{uuid.uuid4().hex[:10]}"
    env = lying_env(lying_layer, "bda", EDGEPILOT_DATA_DIR=data, **vulkanfix.tools_env())
    edgepilot = f"{lane.VENV}/bin/edgepilot"
    done = lane.run(gpu_root, [edgepilot, "probe", "--json"], env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    mali = next(g for g in json.loads(done.stdout)["gpus"] if g["name"].startswith("Mali-G77"))
    assert mali["check"]["ok"] is True, mali["check"]
    assert mali["verdict"] == "usable" and mali["vulkan_fix"] == "applied"
    assert any("usable with edgepilot's fix" in r for r in mali["reasons"]), mali["reasons"]

    text = lane.run(gpu_root, [edgepilot, "probe"], {**env, "COLUMNS": "50"}, timeout=600)
    verdicts = [ln.split() for ln in text.stdout.splitlines() if ln.strip().startswith("verdict ")]
    assert text.returncode == 0 and ["verdict", "usable"] in verdicts, text.stdout

    gpu = ["--device", "Vulkan0", "--gpu-layers", "all"]
    argv = [edgepilot, "run", smollm_in_root, "-p", PROMPT, "-n", "4", "--temp", "0", *gpu, "--json"]
    ran = lane.run(gpu_root, argv, env, timeout=900)
    assert ran.returncode == 0, ran.stderr[-3000:]
    result = json.loads(ran.stdout)
    assert result["n_gen"] == 4 and result["settings"]["device"] == "Vulkan0", result["settings"]

    # the GPU choice measures it: llama-bench of the fixed build, every layer on the Mali
    argv = [edgepilot, "bench", smollm_in_root, "-p", "8", "-n", "4", "-r", "1", *gpu, "--json"]
    benched = lane.run(gpu_root, argv, env, timeout=900)
    assert benched.returncode == 0, benched.stderr[-3000:]
    rows = json.loads(benched.stdout)["rows"]
    assert rows and all(r["avg_ts"] > 0 for r in rows), rows


def test_probe_without_the_fix_names_the_build(gpu_root: Path, lying_layer: str) -> None:
    """Debian's llama.cpp only: the check crashes, and the reason says which command makes one that runs."""
    env = lying_env(lying_layer, "bda", EDGEPILOT_DATA_DIR=f"/tmp/ep-fix-{uuid.uuid4().hex[:10]}")
    done = lane.run(gpu_root, [f"{lane.VENV}/bin/edgepilot", "probe", "--json"], env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    mali = next(g for g in json.loads(done.stdout)["gpus"] if g["name"].startswith("Mali-G77"))
    assert mali["verdict"] == "crashed" and mali["vulkan_fix"] == "needed"
    assert any("`edgepilot build --vulkan`" in r for r in mali["reasons"]), mali["reasons"]
