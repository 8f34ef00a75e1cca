"""The memory model against llama.cpp on aarch64 (the lane: cross-built llama-completion under qemu-user).

Both real models x {mmap, no mmap} x {repack, no repack}: the weight buffer (CPU_Mapped / CPU), CPU_REPACK,
KV, compute and output buffers the planner predicts are within 2 % of what llama.cpp logs, and the repack
layouts it names are the ones the rules predict. The dotprod-only and NEON-only CPU libraries check the
feature sets of real phone trees; the i8mm library on a CPU without i8mm dies with a real SIGILL.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

import aarch64_lane
from edgepilot.device.isa import repack_plan
from edgepilot.gguf.arch import arch_params
from edgepilot.gguf.gguf_header import read_header
from edgepilot.plan.fit import read_device
from edgepilot.plan.memory_model import INTERPRETER_BYTES, predict
from edgepilot.plan.settings import EngineSettings

DEVICES = Path(__file__).resolve().parents[1] / "devices"
MIB = 1 << 20
CTX = 512  # the buffer terms scale with it like at any other context; short runs keep CI quick


def _check_buffers(run: aarch64_lane.LaneRun, path: Path, settings: EngineSettings, plan) -> None:
    assert run.returncode == 0, run.stderr[-2000:]
    header = read_header(path)
    pred = predict(header, arch_params(header.metadata), settings, plan)
    logged = run.log["model_buffers_mib"]
    plain = "CPU_Mapped" if settings.use_mmap else "CPU"
    has_repack = pred.weights.repack_buffer_bytes(settings.repack) > 0
    assert set(logged) == ({plain, "CPU_REPACK"} if has_repack else {plain})
    pairs = {
        "weights": (
            pred.weights.weight_buffer_bytes(settings.use_mmap, settings.repack),
            sum(v for k, v in logged.items() if k != "CPU_REPACK") * MIB,
        ),
        "repack": (pred.weights.repack_buffer_bytes(settings.repack), logged.get("CPU_REPACK", 0.0) * MIB),
        "kv": (pred.memory.kv_bytes, run.log["kv_total_mib"] * MIB),
        "compute": (pred.memory.compute_reserved_bytes, sum(run.log["compute_buffers_mib"].values()) * MIB),
        "output": (pred.memory.output_bytes, sum(run.log["output_buffers_mib"].values()) * MIB),
    }
    for term, (predicted, got) in pairs.items():
        # logged sizes have 2 decimals of MiB: 0.005 MiB of rounding on top of the 2 %
        assert abs(predicted - got) <= 0.02 * got + 0.005 * MIB, (term, predicted / MIB, got / MIB)
    if settings.repack:
        assert set(run.repack_layouts) == set(pred.weights.repacked_types)
        assert sum(run.repack_layouts.values()) == pred.weights.repacked_tensors
    else:
        assert run.repack_layouts == {}


@pytest.mark.parametrize("repack", [True, False], ids=["repack", "no-repack"])
@pytest.mark.parametrize("use_mmap", [True, False], ids=["mmap", "no-mmap"])
@pytest.mark.parametrize("model", ["gemma", "smollm"])
def test_i8mm_buffers_match_llama_cpp(lane, model, use_mmap, repack, gemma_path, smollm_path):
    path = gemma_path if model == "gemma" else smollm_path
    settings = EngineSettings(n_ctx=CTX, n_threads=2, use_mmap=use_mmap, repack=repack)
    run = aarch64_lane.run_completion(lane, path, settings)
    # the i8mm library is what an i8mm phone (Snapdragon 8 Gen 2) runs: its tree's plan is the one to check
    plan = read_device(DEVICES / "sd8gen2-xiaomi13pro").cpu.repack_plan()
    assert plan == repack_plan(aarch64_lane.CPU_VARIANTS["i8mm"])
    _check_buffers(run, path, settings, plan)


@pytest.mark.parametrize(
    "cpu, device", [("dotprod", "pixel6a-tensor-g1"), ("neon", "xperia10ii-sd665")], ids=["dotprod", "neon"]
)
@pytest.mark.parametrize("model", ["gemma", "smollm"])
def test_other_feature_sets_match_their_phone_trees(lane, cpu, device, model, gemma_path, smollm_path):
    path = gemma_path if model == "gemma" else smollm_path
    settings = EngineSettings(n_ctx=CTX, n_threads=2)
    run = aarch64_lane.run_completion(lane, path, settings, qemu_cpu=aarch64_lane.QEMU_CPU_FOR[cpu], cpu=cpu)
    _check_buffers(run, path, settings, read_device(DEVICES / device).cpu.repack_plan())


def test_i8mm_library_dies_on_a_cpu_without_i8mm(lane, smollm_path):
    run = aarch64_lane.run_completion(
        lane, smollm_path, EngineSettings(n_ctx=256, n_threads=1), qemu_cpu="cortex-a53"
    )
    assert run.returncode == -signal.SIGILL


@pytest.mark.parametrize("model", ["gemma", "smollm"])
def test_peak_rss_with_mmap_and_repack(lane, model, gemma_path, smollm_path, tmp_path):
    """The issue's case (llama.cpp's defaults on an i8mm phone): a prompt filling the context, peak within
    5 %. ctx 128: each prompt token costs ~0.5 s under qemu, and the terms scale with the context as at 256
    (python benchmarks/arm_memory.py measures ctx 256).

    Predicted: the planner's peak minus its Python interpreter term; measured: the qemu process's peak minus
    qemu's own share (aarch64_lane.LaneRun.engine_peak_bytes).
    """
    from memory_accuracy import PromptMaker

    path = gemma_path if model == "gemma" else smollm_path
    settings = EngineSettings(n_ctx=128, n_threads=2)
    maker = PromptMaker(tmp_path)
    try:
        prompt, n_prompt = maker.make(path, settings.n_ctx - 12)
    finally:
        maker.close()
    assert n_prompt > 100
    base = aarch64_lane.baseline(lane)
    run = aarch64_lane.run_completion(lane, path, settings, prompt)
    assert run.returncode == 0, run.stderr[-2000:]
    header = read_header(path)
    plan = repack_plan(aarch64_lane.CPU_VARIANTS["i8mm"])
    pred = predict(header, arch_params(header.metadata), settings, plan).memory
    predicted = pred.peak_rss_bytes - INTERPRETER_BYTES
    measured = run.engine_peak_bytes(base)
    assert abs(predicted - measured) <= 0.05 * measured, (predicted / MIB, measured / MIB)
    # the repacked duplicate is in it: without it the prediction would miss by more than 5 %
    assert pred.repack_bytes > 0.05 * measured
