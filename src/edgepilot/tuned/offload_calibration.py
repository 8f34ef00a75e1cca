"""Learn an offload device's own memory from offloaded runs, per llama.cpp version, device and model.

A run with layers on a GPU (`-dev Vulkan0 -ngl N` through llama-server) logs its buffers per backend
(engine/load_log.py): the device's model, KV and compute buffers, the pinned host buffers (`Vulkan_Host`), the
CPU's share (`CPU_Mapped`) and any of the CPU's extra buffer types (`AMX` on x86). What no log shows is the
driver itself: its libraries, its heap and the pipelines it compiled. After each such run this module keeps,
in the version's calibration file (tuned/calibrate.py) under `offload`, keyed by the device as llama.cpp names
and describes it (`Vulkan0 (llvmpipe (LLVM 22.1.8, 256 bits))`, from the load log's `using device` line) and
by model, one sample: the measured peak less the plan's runtime, the plan's resident CPU weights and every
buffer the log showed (the driver's term), the extra CPU buffers, the ubatch, the layer count, the weight
types on the device, whether the prompt filled the context and whether it was this model's first run on this
device (`cold`: it compiled the driver's pipelines for the model's weight types, a one-off peak).
plan/offload.py turns them into the driver's memory for other settings (learned_driver). A log without a
`using device` line for the planned device (another llama.cpp's words, too low a verbosity) records nothing:
the plan stays on the assumed figures.
"""

from __future__ import annotations

import time
from typing import Any

from edgepilot.engine.load_log import CPU, LoggedBuffers
from edgepilot.gguf.gguf_records import GGUFHeader
from edgepilot.plan.arithmetic import DriverSample, LearnedDevice
from edgepilot.plan.types import FitResult
from edgepilot.tuned.calibration_check import valid_sample

KEEP_SAMPLES = 8
# a kept sample's keys and the DriverSample fields they fill
SAMPLE = {
    "driver": "driver_bytes", "runtime": "runtime_bytes", "extra": "extra_bytes", "n_ubatch": "n_ubatch",
    "n_gpu_layers": "n_gpu_layers", "weight_types": "weight_types",
}  # fmt: skip


def device_key(name: str, description: str) -> str:
    return f"{name} ({description})"


def offload_sample(
    header: GGUFHeader,
    n_layer: int,
    plan: FitResult,
    logged: LoggedBuffers,
    peak_bytes: int,
    filled: bool,
    n_ubatch: int,
) -> dict[str, Any]:
    """What one offloaded run showed beyond what the plan can compute (bytes)."""
    from edgepilot.plan.offload import device_weight_types  # a CPU plan never loads the offload's model

    m, s = plan.memory, plan.settings
    buffers = sum(sum(kinds.values()) for kinds in logged.by_backend.values())
    cpu_weights_logged = logged.bytes_of(CPU, "model")  # counted as the plan's resident span instead
    driver = peak_bytes - m.runtime_bytes - m.weights_bytes - (buffers - cpu_weights_logged)
    return {
        "driver": max(0, int(driver)),  # below 0: the plan's runtime counted it already (the reader's range)
        "runtime": int(m.runtime_bytes),
        "extra": int(logged.extra_bytes),
        "n_ubatch": int(n_ubatch),
        "n_gpu_layers": int(s.n_gpu_layers),
        "weight_types": device_weight_types(header, n_layer, s.n_gpu_layers),
        "filled": bool(filled),
        "peak": int(peak_bytes),
        "buffers": {b: dict(k) for b, k in logged.by_backend.items()},
    }


def record_offloaded(
    data: dict[str, Any],
    model_key: str,
    n_vocab: int,
    device: str,
    logged: LoggedBuffers,
    sample: dict[str, Any],
) -> bool:
    """Add one sample to the version's data (False: the log named no device to key it by)."""
    description = logged.devices.get(device)
    if description is None:
        return False
    section = data.setdefault("offload", {})
    if not isinstance(section, dict):
        section = data["offload"] = {}
    entry = section.get(device_key(device, description))
    entry = entry if isinstance(entry, dict) and isinstance(entry.get("models"), dict) else {"models": {}}
    entry.update(device=device, description=description, seen=time.time())
    per_model = entry["models"].get(model_key)
    per_model = per_model if isinstance(per_model, dict) else {}
    runs = [r for r in per_model.get("runs") or [] if _valid(r)]
    # the first run of this model on this device compiled the pipelines of its weight types (a one-off peak)
    sample = {**sample, "cold": not runs}
    per_model.update(n_vocab=n_vocab, runs=[*runs, sample][-KEEP_SAMPLES:])
    entry["models"][model_key] = per_model
    section[device_key(device, description)] = entry
    return True


def _valid(run: Any) -> bool:
    """Every field the plan reads in range (tuned/calibration_check.py)."""
    return valid_sample(run)


def _samples(runs: Any) -> list[DriverSample]:
    return [
        DriverSample(
            **{field: r[key] for key, field in SAMPLE.items()},
            filled=bool(r.get("filled")),
            cold=bool(r.get("cold")),
        )
        for r in (runs if isinstance(runs, list) else [])
        if _valid(r)
    ]


def _per_type(models: dict[str, list[DriverSample]]) -> int | None:
    """The driver's memory per weight type, from models that differ in them (None: they do not)."""
    small = {k: [s for s in v if s.n_ubatch <= 256] or v for k, v in models.items() if v}
    points = sorted(
        {(max(s.weight_types for s in v), max(s.driver_bytes for s in v)) for v in small.values()}
    )
    if len(points) < 2 or points[0][0] == points[-1][0]:
        return None
    (t0, d0), (t1, d1) = points[0], points[-1]
    return max(0, (d1 - d0) // (t1 - t0))


def learned_devices(data: dict[str, Any], model_key: str) -> dict[str, LearnedDevice]:
    """Per device name, what its runs with this version showed: this model's own runs when there are some,
    else the other models' (scaled by weight types in plan/offload.py). A device seen with several
    descriptions (a driver update) uses the one seen last."""
    section = data.get("offload")
    out: dict[str, LearnedDevice] = {}
    seen: dict[str, float] = {}
    for entry in section.values() if isinstance(section, dict) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("models"), dict):
            continue
        name, description = entry.get("device"), entry.get("description")
        when = entry.get("seen") if isinstance(entry.get("seen"), (int, float)) else 0.0
        if not isinstance(name, str) or not isinstance(description, str) or when < seen.get(name, -1.0):
            continue
        models = {k: _samples(v.get("runs")) for k, v in entry["models"].items() if isinstance(v, dict)}
        own = models.get(model_key) or []
        others = [s for k, v in models.items() if k != model_key for s in v]
        if not own and not others:
            continue
        seen[name] = when
        out[name] = LearnedDevice(
            device=name,
            description=description,
            samples=tuple(own or others),
            same_model=bool(own),
            per_type_bytes=None if own else _per_type(models),
        )
    return out
