"""How the llama.cpp that runs differs from the pinned one the memory model is calibrated on.

The pinned arithmetic (memory_model.py, compute.py) is llama-cpp-python 0.3.36's llama.cpp in a Python
process. Another engine changes some terms:
- the process: llama-server carries no interpreter, but its own HTTP server, slots and sampler arrays;
- the compute buffer: newer llama.cpp reserves the graph for the outputs it will really produce (one logits
  row, `n_outputs_max = 1`) instead of one per ubatch token, and lays some graphs out differently.
These terms are learned from what that llama.cpp logs and how much memory its process really used
(tuned/calibrate.py records them per version and model); the planner applies them here.
An offloaded run adds what no log shows: the GPU driver's own memory (its libraries, its heap, the pipelines
it compiled) and the CPU's extra buffer types; tuned/offload_calibration.py learns them per version, device
(as llama.cpp names and describes it) and model, and plan/offload.py applies them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EngineArithmetic:
    """Corrections to the pinned memory model for one llama.cpp (None / 0: the pinned term)."""

    engine: str  # what it is for, e.g. "llama-server 0.7.0 (build 11669, commit Debian)"
    runtime_bytes: int | None = None  # the process without model buffers (replaces the pinned runtime)
    running_extra_bytes: int = 0  # resident memory a context-filling run adds beyond the compute it touches
    reserve_one_output: bool = False  # the compute graph is reserved for one logits row, not one per token
    compute_reserved_delta_bytes: int = 0  # logged compute buffer minus the arithmetic's estimate
    learned_from: int = 0  # measured runs behind these terms (0: an engine nobody has measured here yet)
    notes: list[str] = field(default_factory=list)
    offload: dict[str, LearnedDevice] = field(default_factory=dict)  # device name -> its learned driver


@dataclass(frozen=True)
class DriverSample:
    """What one offloaded run showed beyond the buffers llama.cpp logged (tuned/offload_calibration.py)."""

    driver_bytes: int  # its peak less the planned runtime, the CPU's resident weights and the logged buffers
    runtime_bytes: int  # the runtime the plan counted then (with the driver: all that is not a buffer)
    extra_bytes: int  # the CPU's extra buffer types (x86 AMX, ...): weights copied into another layout
    n_ubatch: int
    n_gpu_layers: int
    weight_types: int  # distinct quantized weight types on the device (one set of pipelines each)
    filled: bool  # the prompt filled the context: every pipeline a long prompt needs was compiled
    # The first run on this device and driver: it compiled the driver's pipelines (a one-off peak: lavapipe's
    # LLVM, a phone's shader compiler) that later runs load from the driver's cache.
    cold: bool = False


@dataclass(frozen=True)
class LearnedDevice:
    """An offload device's own memory as measured with one llama.cpp (None: today's assumed figures)."""

    device: str  # llama.cpp's name: "Vulkan0"
    description: str  # as llama.cpp lists it: "llvmpipe (LLVM 22.1.8, 256 bits)"
    samples: tuple[DriverSample, ...]
    same_model: bool  # measured with the model being planned (else: other models, scaled)
    per_type_bytes: int | None = None  # driver memory per device weight type, when models differ in them
