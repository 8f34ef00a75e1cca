"""The GPU driver's own memory before any offloaded run on the device has measured it, from the device's facts
(device/gpu_driver.py: the device's type and heaps from vulkaninfo, the driver's libraries on disk).

What an offloaded llama.cpp process holds beyond the buffers it logs, and why:
- Where device memory lives. On a UMA device (deviceType INTEGRATED_GPU: every phone GPU; CPU: a software
  driver such as lavapipe or SwiftShader, whose "device memory" is malloc'd or memfd host memory; or a device
  whose only memory heap is the device-local one) each device buffer is this RAM and counts in the process's
  resident set once. A discrete GPU's device-local heap is its own VRAM: the buffers do not count.
- The driver's code. The Vulkan loader opens the ICD library, which links its shader compiler (Mesa's
  software drivers and RADV: libLLVM; Adreno: libllvm-glnext; Mali: inside libGLES_mali). Those file pages
  count as they are touched, at most the whole file: the driver's library bytes on disk (ICD + the large
  libraries it links) bound the code term (lavapipe: 158 MiB on disk, 68 resident after a cold run; the rest
  stands for the allocator's and the loader's share, 15-50 MiB more).
- The compiled pipelines. ggml-vulkan compiles one set of pipelines per quantized weight type on the device
  (matrix-vector for decode, matrix-matrix for prompts, dequantize) plus the shared ones (norms, rope,
  softmax, copies). A software driver JIT-compiles each into CPU code with LLVM and keeps the code and the
  compiler's state in the process (JIT_*); a GPU driver keeps its binaries in device memory and a small
  host-side object (GPU_*).
None of this depends on the ubatch: the pipelines are the same ones (a first run at a new size compiles more,
a one-off the calibration sets aside, tuned/offload_calibration.py). The first offloaded run with llama.cpp's
programs replaces this prior with what the device really showed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from edgepilot.device.gpu_llama import backend_of
from edgepilot.plan.offload import MIB, SPEC_MIN_STORAGE_RANGE, DriverCosts

if TYPE_CHECKING:
    from edgepilot.device.gpu_driver import DriverFacts

UMA_TYPES = ("INTEGRATED_GPU", "CPU")
# Without the driver's files (a snapshot, an Android vendor partition we cannot list): the size of a phone's
# Vulkan driver with its compiler, an assumption the first run replaces.
DEFAULT_CODE_BYTES = 64 * MIB
# What compiling the pipelines leaves in the process: a shared set (norms, rope, softmax, copies, the f16/f32
# matrix kernels) and one set per quantized weight type on the device. A software driver JIT-compiles them to
# CPU code with LLVM. Measured with lavapipe (Mesa 26.2, LLVM 22.1.8) and llama.cpp 0.7.0 on an empty
# mesa_shader_cache, all layers, ctx 256, a prompt filling it: SmolLM2 (2 types) peaked at 771 MiB, 418 more
# than the same run with the cache warm (382 MiB of anonymous mappings LLVM keeps, 11 MiB more of libLLVM
# touched, 34 MiB transient); Gemma 3 (4 types) at 1072+ MiB. Less the plan's other terms and the code term
# below, the compiled pipelines: 387 and ~525 MiB, so ~70 MiB a type and ~250 MiB shared. ctx 512, ubatch 512
# compiled the same (385 MiB of anonymous mappings). A GPU driver's compiler emits small GPU binaries into
# device memory: its host share is the driver's objects per pipeline, not measured here (no phone ran this
# project's tests), assumed small; its first run replaces it.
JIT_SHARED = 250 * MIB
JIT_PER_TYPE = 70 * MIB
GPU_SHARED = 32 * MIB
GPU_PER_TYPE = 8 * MIB
# The driver's instance and device objects, descriptor and command pools, the loader's other drivers.
FIXED_BYTES = 16 * MIB


def counts_in_ram(facts: DriverFacts | None) -> bool:
    """Does device memory count in this process's resident set (None facts: assume a phone's UMA GPU)?"""
    if facts is None or facts.device_type in UMA_TYPES:
        return True
    if facts.device_type == "DISCRETE_GPU":
        return False
    local = [h for h in facts.heaps if h.get("device_local")]
    return len(facts.heaps) <= 1 or not local


def prior_costs(facts: DriverFacts | None) -> DriverCosts:
    """The driver's assumed costs for a Vulkan device with these facts (None: nothing known of it): its first
    run, which compiles every pipeline the model needs (the safe side: later runs load them from the driver's
    cache, and the calibration follows those)."""
    uma = counts_in_ram(facts)
    code = sum(facts.libraries.values()) if facts is not None and facts.libraries else None
    jit = facts is not None and facts.device_type == "CPU"
    shared, per_type = (JIT_SHARED, JIT_PER_TYPE) if jit else (GPU_SHARED, GPU_PER_TYPE)
    code_bytes = code if code is not None else DEFAULT_CODE_BYTES
    what = "nothing known of the device" if facts is None else f"{facts.name}, {facts.device_type or 'type?'}"
    source = (
        f"from {what}: {'its memory is RAM' if uma else 'its own memory'}, {code_bytes / MIB:.0f} MiB of "
        f"driver code ({'its libraries' if code is not None else 'a phone driver assumed'}), pipelines "
        f"compiled {'to CPU code' if jit else 'by a GPU compiler'} ({shared / MIB:.0f} MiB + "
        f"{per_type / MIB:.0f} per weight type)"
    )
    return DriverCosts(
        source,
        base_bytes=FIXED_BYTES + code_bytes + shared + per_type,  # with the first weight type's set
        max_tensor_bytes=(facts.max_storage_range if facts else None) or SPEC_MIN_STORAGE_RANGE,
        uma=uma,
        base_types=1,
        per_type_bytes=per_type,
    )


# ggml's OpenCL backend on an Adreno: the largest buffer is CL_DEVICE_MAX_MEM_ALLOC_SIZE as the public clinfo
# and ggml_opencl logs of Adreno 7xx/8xx phones report it: 1 GiB (tests/devices/sd8gen3-*, sd8elite-*). It
# builds its kernel programs from source at every start with the vendor's LLVM-based compiler in the process
# (libllvm-qcom): its compile memory is assumed to be LLVM's as measured on lavapipe (JIT_SHARED), the rest a
# phone's driver, until a run measures it.
OPENCL_MAX_ALLOC = 1 << 30


def driver_for(device: str, facts: DriverFacts | None = None) -> DriverCosts:
    """The assumed driver costs of a llama.cpp device (`GPUOpenCL`: an Adreno's OpenCL; else Vulkan's)."""
    if backend_of(device) == "opencl":
        phone = prior_costs(None)
        return replace(
            phone,
            source="a phone's driver with LLVM's compile memory (no OpenCL driver measured on a phone yet)",
            base_bytes=phone.base_bytes - GPU_SHARED + JIT_SHARED,
            max_tensor_bytes=OPENCL_MAX_ALLOC,
        )
    return prior_costs(facts)
