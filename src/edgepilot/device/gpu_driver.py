"""What a Vulkan driver brings into a process that offloads to it, as far as this device's files tell: which
physical device llama.cpp's `VulkanN` is, its type and memory heaps (vulkaninfo, device/gpu.py), and the size
of the driver's own libraries (its ICD and the large libraries it links, such as the shader compiler).

ggml-vulkan numbers devices as it picks them (ggml_vk_instance_init): with GGML_VK_VISIBLE_DEVICES the listed
indices of vkEnumeratePhysicalDevices (vulkaninfo's `GPU<n>` order), else every discrete and integrated GPU in
that order, else the first device that is not a CPU. The ICD is found through the Khronos loader's manifests
(`ICD.library_path`), or Android's `/vendor/lib*/hw/vulkan.*.so`; its DT_NEEDED entries name the libraries it
links, and those of LARGE_LIBRARY bytes or more (a compiler: libLLVM, libllvm-glnext, libGLES_mali) count.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from edgepilot import untrusted
from edgepilot.device import fs
from edgepilot.device.gpu import VulkanDevice, vulkan_devices

ICD_DIRS = ("etc/vulkan/icd.d", "usr/share/vulkan/icd.d", "usr/local/share/vulkan/icd.d")
ANDROID_DIRS = ("vendor/lib64/hw", "vendor/lib/hw")
LIB_DIRS = ("usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu", "usr/lib", "lib", "usr/local/lib")
LIB_DIRS += ("vendor/lib64", "system/lib64", "vendor/lib", "system/lib")
LARGE_LIBRARY = 4 << 20  # smaller ones (libc, libz, libstdc++) are shared with the process already
ELF_PART = 1 << 20  # a program header table, dynamic section or string table is far smaller
MAX_MANIFESTS = 64
# Mesa's driverID -> its manifest's name (`lvp_icd.x86_64.json`, ...): several drivers ship side by side
MESA_MANIFESTS = {
    "MESA_LLVMPIPE": "lvp",
    "MESA_RADV": "radeon",
    "INTEL_OPEN_SOURCE_MESA": "intel",
    "MESA_TURNIP": "freedreno",
    "MESA_PANVK": "panfrost",
    "MESA_NVK": "nouveau",
    "MESA_V3DV": "broadcom",
    "MESA_VENUS": "virtio",
    "MESA_HONEYKRISP": "asahi",
}


@dataclass
class DriverFacts:
    """One offload device as the plan's driver prior needs it (plan/driver_prior.py)."""

    llama_name: str  # "Vulkan0"
    name: str  # vulkaninfo's deviceName
    device_type: str | None  # CPU | INTEGRATED_GPU | DISCRETE_GPU | VIRTUAL_GPU | OTHER
    driver: str | None  # driverID, else driverName
    heaps: list[dict] = field(default_factory=list)  # [{bytes, device_local}]
    libraries: dict[str, int] = field(default_factory=dict)  # the driver's files (device path -> bytes)
    max_storage_range: int | None = None  # maxStorageBufferRange


def ggml_order(devices: list[VulkanDevice], visible: str | None) -> list[VulkanDevice]:
    """The devices as ggml-vulkan numbers them (Vulkan0 first)."""
    if visible is not None:
        picked = [int(p) for p in visible.split(",") if p.strip().isdigit()]
        return [devices[i] for i in picked if i < len(devices)]
    gpus = [d for d in devices if (d.device_type or "") in ("DISCRETE_GPU", "INTEGRATED_GPU")]
    if gpus:
        return gpus
    return [d for d in devices if "CPU" not in (d.device_type or "")][:1]


def _read_at(f: BinaryIO, offset: int, size: int) -> bytes:
    f.seek(offset)
    return f.read(min(size, ELF_PART))


def dynamic_needed(f: BinaryIO) -> list[str]:
    """DT_NEEDED names of a 64-bit little-endian ELF file ([] for anything else): its program headers, the
    dynamic section they point at, and the string table that section names."""
    head = _read_at(f, 0, 64)
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return []
    phoff = struct.unpack_from("<Q", head, 32)[0]
    phentsize, phnum = struct.unpack_from("<HH", head, 54)
    table = _read_at(f, phoff, phentsize * min(phnum, 64))
    loads, dynamic = [], None
    for off in range(0, len(table) - 55, max(phentsize, 56)):
        p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", table, off)
        if p_type == 1:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == 2:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return []
    raw = _read_at(f, dynamic[0], dynamic[1])
    entries = [struct.unpack_from("<qQ", raw, o) for o in range(0, len(raw) - 15, 16)]
    strtab = next((v for tag, v in entries if tag == 5), None)
    strsz = next((v for tag, v in entries if tag == 10), 0)
    where = [o + strtab - va for va, o, size in loads if strtab is not None and va <= strtab < va + size]
    if not where:
        return []
    strings = _read_at(f, where[0], strsz)
    names = []
    for tag, value in entries:
        if tag == 1 and value < len(strings):
            end = strings.find(b"\0", value)
            names.append(strings[value : end if end >= 0 else len(strings)].decode("utf-8", "replace"))
    return names


def _size(root: Path, path: str) -> int | None:
    local = fs.confined(root, path)
    try:
        return os.stat(local).st_size if local is not None else None
    except OSError:
        return None


def _needed(root: Path, path: str) -> list[str]:
    local = fs.confined(root, path)
    if local is None:
        return []
    try:
        with untrusted.open_regular(local) as f:
            return dynamic_needed(f)
    except (OSError, struct.error):
        return []


def _find_library(root: Path, name: str, beside: str) -> str | None:
    for d in (os.path.dirname(beside), *("/" + d for d in LIB_DIRS)):
        path = f"{d}/{name}"
        if _size(root, path) is not None:
            return path
    return None


def driver_libraries(root: Path, library: str) -> dict[str, int]:
    """The ICD library and the large libraries it links, with their sizes on disk."""
    size = _size(root, library)
    if size is None:
        return {}
    found = {library: size}
    for name in _needed(root, library):
        path = _find_library(root, name, library)
        linked = _size(root, path) if path else None
        if path and linked is not None and linked >= LARGE_LIBRARY:
            found[path] = linked
    return found


def _icd_library(root: Path, driver_id: str | None) -> str | None:
    """The ICD library of this driver: the manifest named for this Mesa driver, else the only one there is."""
    stem = MESA_MANIFESTS.get((driver_id or "").removeprefix("DRIVER_ID_"))
    mine: list[str] = []
    out: list[str] = []
    for d in ICD_DIRS:
        names, _ = fs.list_dir(root, d)
        for name in sorted(names)[:MAX_MANIFESTS]:
            if not name.endswith(".json"):
                continue
            try:
                data = untrusted.loads_json(fs.read_bytes(root, f"{d}/{name}", 64 << 10))
            except (OSError, ValueError):
                continue
            icd = data.get("ICD") if isinstance(data, dict) else None
            lib = icd.get("library_path") if isinstance(icd, dict) else None
            if isinstance(lib, str) and lib:
                lib = lib if lib.startswith("/") else _find_library(root, lib, f"/{d}/{name}") or ""
                if lib and stem and name.startswith(f"{stem}_"):
                    mine.append(lib)
                elif lib:
                    out.append(lib)
    for d in ANDROID_DIRS:
        names, _ = fs.list_dir(root, d)
        out += [f"/{d}/{n}" for n in sorted(names) if n.startswith("vulkan.") and n.endswith(".so")]
    if mine:
        return mine[0]
    return out[0] if len(out) == 1 else None


def driver_facts(root: Path, llama_name: str, android: bool = False) -> DriverFacts | None:
    """The facts for llama.cpp's `VulkanN` on this root (None: not a Vulkan device or not found)."""
    if not llama_name.startswith("Vulkan") or not llama_name[6:].isdigit():
        return None
    devices, _ = vulkan_devices(root, android)
    env = os.environ if fs.is_live(root) else fs.read_env(root)[0]
    ordered = ggml_order(devices, env.get("GGML_VK_VISIBLE_DEVICES"))
    index = int(llama_name[6:])
    if index >= len(ordered):
        return None
    dev = ordered[index]
    icd = _icd_library(root, dev.driver_id)
    return DriverFacts(
        llama_name=llama_name,
        name=dev.name,
        device_type=dev.device_type,
        driver=dev.driver_id or dev.driver_name,
        heaps=list(dev.memory_heaps),
        libraries=driver_libraries(root, icd) if icd else {},
        max_storage_range=dev.max_storage_range,
    )
