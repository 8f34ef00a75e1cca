"""What `vulkaninfo --summary` leaves out and llama.cpp's offload depends on: bufferDeviceAddress, 16-bit
storage, subgroup size and memory heaps, from the full `vulkaninfo` text or a Vulkan JSON dump
(`cmd gpu vkjson`).

The full text has one `GPU<n>:` block per device under `Device Properties and Extensions:`, with lines such as
`subgroupSize = 8`, `storageBuffer16BitAccess = true`, `bufferDeviceAddress = true` and

    memoryHeaps: count = 1
        memoryHeaps[0]:
            size   = 25276502016 (0x5e298d000) (23.54 GiB)
            ...
                MEMORY_HEAP_DEVICE_LOCAL_BIT
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MAX_GPUS = 16
MAX_HEAPS = 16
# patterns as strings: re compiles (and caches) them when first used, not on import
_GPU_HEADER = r"^GPU(\d+):\s*$"
_BOOL = {"true": True, "1": True, "false": False, "0": False}
_FLAG_KEYS = {"bufferDeviceAddress": "bda", "storageBuffer16BitAccess": "storage16"}
_FLAG = r"^\s*(bufferDeviceAddress|storageBuffer16BitAccess)\s*=\s*(\w+)"
_SUBGROUP = r"^\s*subgroupSize\s*=\s*(\d+)"
_HEAP = r"^\s*memoryHeaps\[(\d+)\]:"
_SIZE = r"^\s*size\s*=\s*(\d+)"
_RANGE = r"^\s*maxStorageBufferRange\s*=\s*(\d+)"


@dataclass
class GpuDetails:
    bda: bool | None = None
    storage16: bool | None = None
    subgroup_size: int | None = None
    heaps: list[dict[str, Any]] = field(default_factory=list)  # [{bytes, device_local}]
    max_storage_range: int | None = None  # maxStorageBufferRange: the largest tensor the device binds


def parse_full(text: str) -> list[GpuDetails]:
    """One GpuDetails per `GPU<n>:` block of the full `vulkaninfo` text, in order."""
    out: list[GpuDetails] = []
    current: GpuDetails | None = None
    in_heaps = False
    for line in text.splitlines():
        if re.match(_GPU_HEADER, line.strip()) and not line.startswith((" ", "\t")):
            if len(out) >= MAX_GPUS:
                break
            current = GpuDetails()
            out.append(current)
            in_heaps = False
            continue
        if current is None:
            continue
        stripped = line.strip()
        if stripped.startswith("memoryHeaps:"):
            in_heaps = True
            continue
        if stripped.startswith("memoryTypes:"):
            in_heaps = False
        if in_heaps:
            _heap_line(current, stripped)
            continue
        flag = re.match(_FLAG, line)
        if flag:
            value = _BOOL.get(flag.group(2).lower())
            attr = _FLAG_KEYS[flag.group(1)]
            if getattr(current, attr) is None:
                setattr(current, attr, value)
            continue
        sub = re.match(_SUBGROUP, line)
        if sub and current.subgroup_size is None:
            current.subgroup_size = int(sub.group(1))
        ranged = re.match(_RANGE, line)
        if ranged and current.max_storage_range is None:
            current.max_storage_range = int(ranged.group(1))
    return out


def _heap_line(current: GpuDetails, stripped: str) -> None:
    if re.match(_HEAP, stripped):
        if len(current.heaps) < MAX_HEAPS:
            current.heaps.append({"bytes": None, "device_local": False})
        return
    if not current.heaps:
        return
    size = re.match(_SIZE, stripped)
    if size and current.heaps[-1]["bytes"] is None:
        current.heaps[-1]["bytes"] = int(size.group(1))
    elif stripped == "MEMORY_HEAP_DEVICE_LOCAL_BIT":
        current.heaps[-1]["device_local"] = True


def from_json(nodes: list[dict[str, Any]]) -> GpuDetails:
    """The same facts from one device's JSON objects (gpu._walk over a vkjson / vulkaninfo --json device)."""
    got = GpuDetails()
    for node in nodes:
        for key, attr in _FLAG_KEYS.items():
            if key in node and getattr(got, attr) is None:
                setattr(got, attr, _BOOL.get(str(node[key]).lower()))
        if "subgroupSize" in node and got.subgroup_size is None and isinstance(node["subgroupSize"], int):
            got.subgroup_size = node["subgroupSize"]
        ranged = node.get("maxStorageBufferRange")
        if got.max_storage_range is None and isinstance(ranged, int) and not isinstance(ranged, bool):
            got.max_storage_range = ranged
        heaps = node.get("memoryHeaps")
        if isinstance(heaps, list) and not got.heaps:
            for heap in heaps[:MAX_HEAPS]:
                if isinstance(heap, dict) and isinstance(heap.get("size"), int):
                    flags = heap.get("flags")
                    local = bool(flags & 1) if isinstance(flags, int) else "DEVICE_LOCAL" in str(flags)
                    got.heaps.append({"bytes": heap["size"], "device_local": local})
    return got
