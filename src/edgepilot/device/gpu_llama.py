"""The devices llama.cpp itself can offload to, from `llama-server --list-devices`.

It prints `Available devices:` then one line per device, `  Vulkan0: llvmpipe (LLVM 22.1.8, 256 bits)
(24105 MiB, 22545 MiB free)`, or `  (none)`. Listing loads the GPU backends (a Vulkan instance, the drivers'
device enumeration) but creates no device and no buffer: a driver that crashes at the first buffer still
lists here, and the listing exits 0 (engine/gpu_check.py is the real check). Replayed from
`commands/llama-server---list-devices.txt` (design.md).
"""

from __future__ import annotations

import contextvars
import functools
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edgepilot.device import commands
from edgepilot.device.fs import SMALL_FILE

SNAPSHOT_NAME = "llama-server---list-devices"  # design.md: commands/llama-server---list-devices.txt
LIST_SECONDS = 15.0  # loading the backends and enumerating devices; ~0.3 s on lavapipe
MAX_DEVICES = 16
MAX_NAME_CHARS = 200
_HEADER = "Available devices:"


@functools.cache
def _line() -> re.Pattern[str]:
    return re.compile(
        r"^\s+(?P<name>[A-Za-z][\w.\-\[\]:]*?):\s+(?P<desc>.*?)"
        r"(?:\s+\((?P<total>\d+)\s+MiB,\s+(?P<free>\d+)\s+MiB free\))?\s*$"
    )


# llama.cpp's device names by backend: Vulkan0, GPUOpenCL, CUDA0, Metal, RPC[host:port] ...
_BACKENDS = (("vulkan", "vulkan"), ("gpuopencl", "opencl"), ("opencl", "opencl"))


@dataclass(frozen=True)
class LlamaDevice:
    """One device of `--list-devices`: `name` is what `-dev` takes."""

    name: str  # "Vulkan0"
    description: str  # "llvmpipe (LLVM 22.1.8, 256 bits)"
    backend: str  # "vulkan" | "opencl" | the name's letters, lowercased ("cuda", "metal", "rpc")
    total_bytes: int | None
    free_bytes: int | None


def backend_of(name: str) -> str:
    lowered = name.lower()
    for prefix, backend in _BACKENDS:
        if lowered.startswith(prefix):
            return backend
    letters = re.match(r"[a-z]+", lowered)
    return letters.group(0) if letters else "unknown"


def parse_list_devices(text: str) -> list[LlamaDevice] | None:
    """The devices listed; [] for `(none)`; None when the text is not a device list at all."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == _HEADER), None)
    if start is None:
        return None
    devices: list[LlamaDevice] = []
    for line in lines[start + 1 :]:
        if not line.strip() or line.strip() == "(none)":
            continue
        m = _line().match(line[: MAX_NAME_CHARS * 2])
        if m is None:
            if not line.startswith((" ", "\t")):
                break  # the list ended (a log line, a second section)
            continue
        total, free = m.group("total"), m.group("free")
        devices.append(
            LlamaDevice(
                name=m.group("name")[:MAX_NAME_CHARS],
                description=m.group("desc").strip()[:MAX_NAME_CHARS],
                backend=backend_of(m.group("name")),
                total_bytes=int(total) << 20 if total else None,
                free_bytes=int(free) << 20 if free else None,
            )
        )
        if len(devices) >= MAX_DEVICES:
            break
    return devices


def read_llama_devices(
    root: Path, tool: Path | str | None = None
) -> tuple[list[LlamaDevice] | None, str | None]:
    """llama.cpp's devices on this machine (live: `TOOL --list-devices` in a child with a deadline, TOOL
    defaulting to llama-server on PATH) or in a snapshot. (None, reason) when there is no list."""
    argv = [str(tool or "llama-server"), "--list-devices"]
    text, why = commands.run_command(root, argv, timeout=LIST_SECONDS, limit=SMALL_FILE, name=SNAPSHOT_NAME)
    if text is None:
        return None, f"llama.cpp's device list: {why}"
    devices = parse_list_devices(text)
    if devices is None:
        return None, "llama-server --list-devices printed no 'Available devices:' list"
    return devices, None


def llama_devices_later(
    root: Path, tool: Path | str | None = None
) -> Callable[[], tuple[list[LlamaDevice] | None, str | None]]:
    """Start read_llama_devices in a thread now and return the call that waits for its answer: the child
    loads llama.cpp's backends on another core while the probe reads the rest of the device."""
    answer: list[tuple[list[LlamaDevice] | None, str | None]] = []
    failure: list[BaseException] = []

    def listing() -> None:
        try:
            answer.append(read_llama_devices(root, tool))
        except BaseException as exc:  # handed to the caller's thread, where it would have been raised
            failure.append(exc)

    # the caller's context goes with it: `snapshot save` records the listing through a context variable
    context = contextvars.copy_context()
    worker = threading.Thread(target=context.run, args=(listing,), name="llama-devices", daemon=True)
    worker.start()

    def wait() -> tuple[list[LlamaDevice] | None, str | None]:
        worker.join()
        if failure:
            raise failure[0]
        return answer[0]

    return wait
