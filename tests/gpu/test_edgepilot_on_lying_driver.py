"""edgepilot's own commands on the old Mali acted out by the lying layer (device apiVersion 1.1, NULL
vkGetBufferDeviceAddress), where llama.cpp's Vulkan backend dies with SIGSEGV: edgepilot must not. probe says
why the GPU is not usable, run/bench/tune/serve answer on the CPU and say so once, nothing hangs.

Each test has a data directory of its own: the driver check edgepilot remembers is part of what is tested.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import sidlane as lane
from gpulane import lying_env


def _env(layer: str, mode: str) -> dict[str, str]:
    return lying_env(layer, mode, EDGEPILOT_DATA_DIR=f"/tmp/ep-lying-{uuid.uuid4().hex[:10]}")


def _edgepilot(root: Path, env: dict[str, str], *args: str, timeout: float = 600):
    return lane.run(root, [f"{lane.VENV}/bin/edgepilot", *args], env, timeout=timeout)


def _run(root: Path, env: dict[str, str], model: str) -> dict:
    done = _edgepilot(
        root, env, "run", model, "-p", "Count: one, two, three,", "-n", "4", "--temp", "0", "--json"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_probe_explains_and_the_run_that_follows_stays_on_the_cpu(
    gpu_root: Path, lying_layer: str, smollm_in_root: str
) -> None:
    env = _env(lying_layer, "bda")
    done = _edgepilot(gpu_root, env, "probe", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    gpus = json.loads(done.stdout)["gpus"]
    mali = next(g for g in gpus if g["name"].startswith("Mali-G77"))
    assert mali["llama_cpp_name"] == "Vulkan0"
    assert mali["check"]["outcome"] == "crashed" and mali["check"]["signal"] == "SIGSEGV"
    assert mali["verdict"] == "crashed" and mali["vulkan_usable"] is False
    assert any("1.1" in r and "vkGetBufferDeviceAddress" in r for r in mali["reasons"]), mali["reasons"]

    result = _run(gpu_root, env, smollm_in_root)
    assert result["settings"]["device"] == "none" and result["n_gen"] == 4
    assert any("kept out" in n and "SIGSEGV" in n for n in result["notes"]), result["notes"]


@pytest.mark.parametrize("mode", ["bda", "create-device"])
def test_run_needs_no_probe_first(gpu_root: Path, lying_layer: str, smollm_in_root: str, mode: str) -> None:
    """-dev none alone: ggml creates no device, so neither the lie nor the crash in vkCreateDevice is met."""
    result = _run(gpu_root, _env(lying_layer, mode), smollm_in_root)
    assert result["n_gen"] == 4 and result["settings"]["device"] == "none"
    assert result["notes"] == []


def test_a_driver_that_crashes_as_it_loads_never_loads_in_a_cpu_run(
    gpu_root: Path, lying_layer: str, smollm_in_root: str
) -> None:
    """The enumerate mode crashes whatever -dev says: a CPU run keeps every driver from loading from its first
    start, so it neither crashes nor has to start again."""
    result = _run(gpu_root, _env(lying_layer, "enumerate"), smollm_in_root)
    assert result["n_gen"] == 4 and result["settings"]["device"] == "none"
    assert result["notes"] == []


def test_bench_and_tune_stay_on_the_cpu(gpu_root: Path, lying_layer: str, smollm_in_root: str) -> None:
    env = _env(lying_layer, "bda")
    short = ("-p", "8", "-n", "2", "-r", "1")
    done = _edgepilot(gpu_root, env, "bench", smollm_in_root, *short, "--no-warmup", "--no-save", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert {r["device"] for r in json.loads(done.stdout)["rows"]} == {"none"}
    done = _edgepilot(gpu_root, env, "tune", smollm_in_root, *short, "--no-save", "--json", timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["gpu"] is None and report["profile"]["offload_device"] == "none"
    assert any("Vulkan0 not tried" in n and "SIGSEGV" in n for n in report["notes"]), report["notes"]


@pytest.mark.parametrize("mode", ["bda", "enumerate"])
def test_serve_answers_on_the_cpu(
    gpu_root: Path, lying_layer: str, smollm_in_root: str, tmp_path, mode
) -> None:
    import openai

    argv = [f"{lane.VENV}/bin/edgepilot", "serve", smollm_in_root, "--port", "0", "--json", "--ctx", "512"]
    with lane.served(gpu_root, argv, tmp_path / "serve.log", env=_env(lying_layer, mode)) as started:
        client = openai.OpenAI(base_url=started["base_url"], api_key="none", max_retries=0, timeout=120)
        reply = client.chat.completions.create(
            model=started["model_name"],
            messages=[{"role": "user", "content": "Say hi."}],
            max_tokens=4,
            temperature=0,
        )
        assert reply.usage.completion_tokens > 0
