"""An offloaded run's memory (plan/offload.py) against what llama.cpp 0.7.0 logged on Mesa's lavapipe
(`-dev Vulkan0 -ngl N -lv 4`, GGML_VK_VISIBLE_DEVICES=0, Debian sid's packages) and the peaks measured there
(VmHWM of llama-server behind `edgepilot run --engine tools`, a prompt filling the context)."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from rich.cells import cell_len
from rich.console import Console

from edgepilot.gguf.arch import arch_params
from edgepilot.gguf.gguf_header import read_header
from edgepilot.plan.arithmetic import EngineArithmetic
from edgepilot.plan.driver_prior import prior_costs
from edgepilot.plan.memory_model import predict
from edgepilot.plan.settings import EngineSettings
from lavapipe_facts import LAVAPIPE

MIB = 2**20
DRIVER = prior_costs(LAVAPIPE)  # what probe's facts of lavapipe give before any run
# SmolLM2 135M Q4_1, -c 256 -ub 256 (n_layer 30: `all` = 31). Logged MiB: CPU_Mapped (summed), Vulkan0 model,
# CPU KV, Vulkan0 KV, Vulkan0 compute, Vulkan_Host compute; the peak (VmHWM) measured with it.
SMOLLM_256 = {
    0: (92.10, 0.0, 5.62, 0.0, 7.28, 2.88, 389.7),
    10: (73.08, 47.71, 3.94, 1.69, 7.69, 2.88, 419.2),
    20: (51.94, 68.85, 2.06, 3.56, 7.69, 2.88, 442.9),
    31: (28.69, 92.10, 0.0, 5.62, 7.38, 2.88, 397.3),
}
# the CPU share stays mapped as one span: a CPU layer at each end of the file keeps all of it resident
# (smaps of the running llama-server: 92.1 MiB of the file at -ngl 0, 10 and 20, 28.7 at all)
SMOLLM_RESIDENT_FILE = {0: 92.1, 10: 92.1, 20: 92.1, 31: 28.7}


def _settings(ngl: int, ctx: int = 256, ub: int = 256) -> EngineSettings:
    return EngineSettings(n_ctx=ctx, n_ubatch=ub, n_threads=2, device="Vulkan0", n_gpu_layers=ngl)


@pytest.fixture(scope="module")
def smollm(smollm_path):
    header = read_header(smollm_path)
    return header, arch_params(header.metadata)


@pytest.mark.parametrize("ngl", sorted(SMOLLM_256))
def test_buffers_per_device_match_llamas_log(smollm, ngl):
    header, arch = smollm
    cpu_w, dev_w, cpu_kv, dev_kv, dev_comp, host_comp, _ = SMOLLM_256[ngl]
    a = EngineArithmetic("0.7.0", reserve_one_output=True)
    pred = predict(header, arch, _settings(ngl), {}, arithmetic=a, driver=DRIVER)
    o = pred.offload
    assert o is not None
    assert o.cpu_weights.weight_buffer_bytes(False, False) / MIB == pytest.approx(cpu_w, abs=0.02)
    assert o.device_weights_bytes / MIB == pytest.approx(dev_w, abs=0.02)
    assert o.cpu_kv_bytes / MIB == pytest.approx(cpu_kv, abs=0.02)
    assert o.device_kv_bytes / MIB == pytest.approx(dev_kv, abs=0.02)
    assert o.device_compute_bytes / MIB == pytest.approx(dev_comp, rel=0.1)
    assert o.host_compute_bytes / MIB == pytest.approx(host_comp, rel=0.05)
    assert o.cpu_weights_resident(True) / MIB == pytest.approx(SMOLLM_RESIDENT_FILE[ngl], abs=0.1)
    assert pred.memory.repack_bytes == 0  # llama.cpp adds no CPU_REPACK while a GPU is in use
    assert pred.memory.device_bytes == {"Vulkan0": o.device_bytes}


@pytest.mark.parametrize("ngl", [10, 20, 31])
def test_before_any_run_the_plan_is_on_the_safe_side_of_the_measured(smollm, ngl):
    """These peaks were measured with the driver's cache warm; the plan before any run is for a first run,
    which compiles every pipeline (tests/plan/test_driver_prior.py: within 25 % of one)."""
    header, arch = smollm
    measured = SMOLLM_256[ngl][-1] * MIB
    peak = predict(header, arch, _settings(ngl), {}, driver=DRIVER).memory.peak_rss_bytes
    assert measured < peak < 2.2 * measured, (ngl, peak / MIB, measured / MIB)


def test_a_cpu_run_is_planned_as_before(smollm):
    header, arch = smollm
    cpu = EngineSettings(n_ctx=256, n_ubatch=256, n_threads=2)
    pred = predict(header, arch, cpu, {})
    assert pred.offload is None and pred.memory.device_bytes == {} and pred.memory.driver_bytes == 0
    # the same settings on the device at -ngl 0 still cost the driver and the device's compute buffer
    at_zero = predict(header, arch, replace(cpu, device="Vulkan0", n_gpu_layers=0), {}, driver=DRIVER)
    assert at_zero.memory.peak_rss_bytes > pred.memory.peak_rss_bytes + 100 * MIB


# Gemma 3 270M Q4_K_M, -c 256 -ub 256 (n_layer 18): Vulkan0 model buffer, Vulkan0 KV, CPU KV (MiB)
GEMMA_256 = {10: (32.77, 2.25, 2.25), 19: (65.16, 4.5, 0.0)}


def test_the_assumed_driver_grows_with_the_weight_types_on_the_device(smollm, gemma_path):
    """Before any run on the device: one set of pipelines compiled per weight type on it, SmolLM2's two
    (Q4_1, and Q8_0 in its tied output's copy), Gemma 3's four."""
    header, arch = smollm
    smol = predict(header, arch, _settings(31), {}, driver=DRIVER).memory.driver_bytes
    gemma = read_header(gemma_path)
    o = predict(gemma, arch_params(gemma.metadata), _settings(19), {}, driver=DRIVER).offload
    assert o is not None and o.weight_types == 4 and not o.calibrated
    assert o.driver_bytes - smol == 2 * DRIVER.per_type_bytes
    assert any("assumed" in n and "llvmpipe" in n for n in o.notes), o.notes


@pytest.mark.parametrize("ngl", sorted(GEMMA_256))
def test_a_tied_output_larger_than_the_device_binds_stays_on_the_cpu(gemma_path, ngl):
    """Gemma 3's output is its 170 MiB Q8_0 token_embd, beyond lavapipe's 128 MiB storage buffer range:
    llama.cpp keeps it off Vulkan0 (the log's Vulkan0 model buffer holds the blocks only)."""
    header = read_header(gemma_path)
    arch = arch_params(header.metadata)
    o = predict(header, arch, _settings(ngl), {}, driver=DRIVER).offload
    dev_w, dev_kv, cpu_kv = GEMMA_256[ngl]
    assert o is not None
    assert o.device_weights_bytes / MIB == pytest.approx(dev_w, abs=0.05)
    assert o.device_kv_bytes / MIB == pytest.approx(dev_kv, abs=0.02)
    assert o.cpu_kv_bytes / MIB == pytest.approx(cpu_kv, abs=0.02)


def test_fit_shows_the_devices_share_at_50_columns(smollm_path):
    from edgepilot.cli.fit_render import render_fit
    from edgepilot.plan.fit import fit_model
    from edgepilot.plan.requested import ALL_LAYERS, RequestedSettings

    req = RequestedSettings(n_ctx=256, device="Vulkan0", n_gpu_layers=ALL_LAYERS)
    plan = fit_model(smollm_path, req, budget_bytes=2 << 30)
    assert plan.settings.n_gpu_layers == 31 and set(plan.memory.device_bytes) == {"Vulkan0"}
    for width in (50, 80):
        buf = io.StringIO()
        render_fit(plan, Console(width=width, file=buf, color_system=None))
        text = buf.getvalue()
        for line in text.splitlines():  # only a single token (a long path) may be wider than the screen
            assert cell_len(line) <= width or " " not in line.strip().removesuffix("\\").strip(), text
        assert "on Vulkan0" in text and f"{plan.memory.device_bytes['Vulkan0'] / MIB:.1f}" in text
        assert "GPU driver" in text
