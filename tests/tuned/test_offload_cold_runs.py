"""A model's first offloaded run on a device compiles the driver's pipelines for its weight types (lavapipe:
LLVM on a cold mesa_shader_cache; a phone: its shader compiler), a one-off peak. The calibration sets it aside
once the model has a later run, whether or not another model ran on the device before: after the second run
of the same model the plan follows that run (issue 40: within 5 %)."""

from __future__ import annotations

from edgepilot.engine.load_log import LoggedBuffers
from edgepilot.plan.offload import DriverCosts, learned_driver
from edgepilot.tuned.offload_calibration import learned_devices, record_offloaded

MIB = 1 << 20
LOGGED = LoggedBuffers(lines=9, devices={"Vulkan0": "llvmpipe (LLVM 22.1.8, 256 bits)"})


def _sample(driver_mib: int, weight_types: int) -> dict:
    return {
        "driver": driver_mib * MIB,
        "runtime": 40 * MIB,
        "extra": 0,
        "n_ubatch": 256,
        "n_gpu_layers": 10,
        "weight_types": weight_types,
        "filled": True,
        "peak": 0,
        "buffers": {},
    }


def _driver_now(data: dict, model: str, weight_types: int) -> int:
    learned = learned_devices(data, model)["Vulkan0"]
    driver, _, _ = learned_driver(learned, DriverCosts("unused", 0), 256, 10, weight_types, 40 * MIB)
    return driver


def test_the_second_model_on_a_device_follows_its_own_warm_run():
    data: dict = {}
    for mib in (560, 190):  # SmolLM2: a cold first run, then a warm one
        assert record_offloaded(data, "smollm:1", 49152, "Vulkan0", LOGGED, _sample(mib, 2))
    # Gemma 3 next: its first run compiles the pipelines of two weight types SmolLM2 did not have
    record_offloaded(data, "gemma:1", 262144, "Vulkan0", LOGGED, _sample(520, 4))
    assert _driver_now(data, "gemma:1", 4) == 520 * MIB  # alone, the first run is kept (the safe side)
    record_offloaded(data, "gemma:1", 262144, "Vulkan0", LOGGED, _sample(300, 4))
    assert _driver_now(data, "gemma:1", 4) == 300 * MIB
    runs = data["offload"]["Vulkan0 (llvmpipe (LLVM 22.1.8, 256 bits))"]["models"]["gemma:1"]["runs"]
    assert [r["cold"] for r in runs] == [True, False]
