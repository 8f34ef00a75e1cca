"""The buffer sizes llama.cpp logs when it loads a model: the truth of its arithmetic, for that version.

    load_tensors:   CPU_Mapped model buffer size =    92.10 MiB
    load_tensors:   CPU_REPACK model buffer size =    12.66 MiB
    llama_context:        CPU  output buffer size =     0.19 MiB
    llama_kv_cache:        CPU KV buffer size =    22.50 MiB
    sched_reserve:        CPU compute buffer size =    27.51 MiB
(the same words in the pinned llama.cpp and in later ones; newer llama-servers print them at -lv 4 only)

Each buffer belongs to a backend, and an offloaded run's log names several (llama.cpp 0.7.0, `-dev Vulkan0`):
    llama_prepare_model_devices: using device Vulkan0 (llvmpipe (LLVM 22.1.8, 256 bits)) (unknown id) - ...
    load_tensors:          AMX model buffer size =   190.00 MiB     (a CPU extra buffer type: x86 AMX)
    load_tensors:      Vulkan0 model buffer size =    32.77 MiB     (the device)
    sched_reserve: Vulkan_Host compute buffer size =     4.01 MiB     (pinned host memory for the device)
so the sizes are kept per backend and kind, and each backend is classed: the CPU's plain weights (`CPU`,
`CPU_Mapped`), its repacked copies (`CPU_REPACK`), its other extra buffer types (`AMX`, `KLEIDIAI`, ...:
copies of some weights in another layout), a device (named in a `using device` line, or NAME + number), or a
device's host buffers (`Vulkan_Host`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

MIB = 1 << 20
# (?<!\S): the backend name starts a word, so one long word is not rescanned from each of its characters
BUFFER = re.compile(r"(?<!\S)(\S+)\s+(model|KV|compute|output) buffer size\s*=\s*([\d.]+)\s*MiB")
# `using device Vulkan0 (llvmpipe (LLVM 22.1.8, 256 bits)) (unknown id) - 23203 MiB free`: the description
# is what the first parentheses hold (parentheses of its own, one level deep, included)
USING_DEVICE = re.compile(r"using device (\S+) \(((?:[^()]|\([^()]*\))*)\)")
# Vulkan0, CUDA1, OpenCL0, RPC[host:port] ...; starting at a word's start only (linear on a hostile line)
DEVICE_NAME = re.compile(r"(?<![A-Za-z_-])[A-Za-z][A-Za-z_-]*\d+|RPC\S*")
CPU_WEIGHTS = frozenset({"CPU", "CPU_Mapped"})
# device buffer types whose name has no device number: ggml-opencl's is "OpenCL" (its device: GPUOpenCL;
# ggml_backend_opencl_buffer_type_get_name, and "a buffer (OpenCL)" in llama.cpp#19393's log)
DEVICE_BUFFERS = frozenset({"OpenCL"})

CPU, REPACK, EXTRA, DEVICE, HOST = "cpu", "repack", "extra", "device", "host"


def backend_class(backend: str, devices: Iterable[str] = ()) -> str:
    """Where a buffer of this backend lives: cpu | repack | extra (another CPU layout) | device | host."""
    if backend in CPU_WEIGHTS:
        return CPU
    if backend.endswith("REPACK"):
        return REPACK
    if backend.endswith("_Host"):
        return HOST
    if backend in devices or backend in DEVICE_BUFFERS or DEVICE_NAME.fullmatch(backend):
        return DEVICE
    return EXTRA


@dataclass
class LoggedBuffers:
    weights_bytes: int = 0  # CPU_Mapped (mmap) or CPU (read) model buffers
    repack_bytes: int = 0
    kv_bytes: int = 0  # every backend's (a CPU run: the CPU's)
    compute_bytes: int = 0
    output_bytes: int = 0
    lines: int = 0  # how many buffer lines were read (0: the log said nothing, e.g. too low a verbosity)
    extra_bytes: int = 0  # model buffers of the CPU's other extra buffer types (AMX, ...)
    by_backend: dict[str, dict[str, int]] = field(default_factory=dict)  # backend -> kind -> bytes
    devices: dict[str, str] = field(default_factory=dict)  # the devices in use: name -> description

    def bytes_of(self, klass: str, kind: str | None = None) -> int:
        """Every buffer of one class of backend (and one kind: model, KV, compute, output)."""
        return sum(
            size
            for backend, kinds in self.by_backend.items()
            if backend_class(backend, self.devices) == klass
            for k, size in kinds.items()
            if kind is None or k == kind
        )

    def device_bytes(self, name: str, kind: str | None = None) -> int:
        kinds = self.by_backend.get(name, {})
        return sum(size for k, size in kinds.items() if kind is None or k == kind)


def logged_buffers(log: Iterable[str]) -> LoggedBuffers:
    out = LoggedBuffers()
    for line in log:
        used = USING_DEVICE.search(line)
        if used:
            out.devices[used.group(1)] = used.group(2)
            continue
        m = BUFFER.search(line)
        if not m:
            continue
        backend, kind, size = m.group(1), m.group(2), int(float(m.group(3)) * MIB)
        out.lines += 1
        kinds = out.by_backend.setdefault(backend, {})
        kinds[kind] = kinds.get(kind, 0) + size
        if kind == "model":
            klass = backend_class(backend, out.devices)
            if klass == REPACK:
                out.repack_bytes += size
            elif klass == EXTRA:
                out.extra_bytes += size
            elif klass == CPU:
                out.weights_bytes += size
        elif kind == "KV":
            out.kv_bytes += size
        elif kind == "compute":
            out.compute_bytes += size
        else:
            out.output_bytes += size
    return out
