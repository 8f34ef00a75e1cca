"""Vulkan devices from `vulkaninfo --summary` (or JSON: Android's `cmd gpu vkjson`, `vulkaninfo --json`
files), each with a verdict: can llama.cpp's Vulkan backend use it (gpu_verdict).

`vulkaninfo --summary` prints `Vulkan Instance Version: X` and one `GPU<n>:` block per device with
`key = value` lines: apiVersion, driverVersion, vendorID, deviceID, deviceType, deviceName, driverID,
driverName, driverInfo, conformanceVersion. Versions appear as `1.4.305`, `4198599 (1.1.199)` or
`1.3.318 (4206910)`.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgepilot.device import commands
from edgepilot.device.gpu_details import GpuDetails, from_json, parse_full
from edgepilot.device.gpu_llama import LlamaDevice, read_llama_devices
from edgepilot.device.gpu_verdict import final_verdict, fix_state, judge, parse_version
from edgepilot.device.llama_build import vulkan_fix_of
from edgepilot.untrusted import loads_json, valid_text

VENDORS = {
    0x13B5: "ARM",
    0x5143: "Qualcomm",
    0x8086: "Intel",
    0x1002: "AMD",
    0x10DE: "NVIDIA",
    0x14E4: "Broadcom",
    0x1010: "Imagination",
    0x144D: "Samsung",
    0x10005: "Mesa (software)",
}

MAX_GPUS = 16
MAX_VALUE_CHARS = 256  # a driverInfo string is ~60 characters; longer values only slow the regexes down
VKJSON_FILE = 2 << 20  # `cmd gpu vkjson` prints a few hundred KiB per device
# patterns as strings: re compiles (and caches) them when first used, not on import
_GPU_HEADER = r"^GPU(\d+):\s*$"
_KV = r"^([A-Za-z][A-Za-z0-9_]*)\s*=\s*(.*)$"
_INSTANCE = r"Vulkan Instance Version:\s*(\S+)"


@dataclass
class VulkanDevice:
    name: str
    vendor: str | None
    vendor_id: int | None
    device_id: int | None
    device_type: str | None
    api_version: str | None
    driver: str | None  # the most telling driver string: driverInfo, else driverName + driverVersion
    driver_id: str | None
    driver_name: str | None
    driver_version: str | None
    vulkan_usable: bool | None
    reasons: list[str] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)
    storage_16bit: bool | None = None
    # Added in turn 4 (design.md): the device as llama.cpp names it (`-dev` takes it), its backend, the
    # crash-isolated driver check (engine/gpu_check.py, live probes only) and the verdict that sums it up.
    llama_cpp_name: str | None = None
    backend: str | None = None
    check: dict[str, Any] | None = None
    # usable | known-bad | needs-fix | crashed | failed | slow-software | not-listed | unknown
    verdict: str = "unknown"
    # What decides offload, where vulkaninfo (full text) or a Vulkan JSON dump says it.
    buffer_device_address: bool | None = None
    subgroup_size: int | None = None
    memory_heaps: list[dict[str, Any]] = field(default_factory=list)  # [{bytes, device_local}]
    llama_total_bytes: int | None = None  # what llama.cpp's list says the device has, and free
    llama_free_bytes: int | None = None
    # Added in turn 6: below Vulkan 1.2, edgepilot's old-Mali fix is "needed" (the llama.cpp here lacks it and
    # nothing else blocks) or "applied" (the llama.cpp in use was built with it); None: not concerned.
    vulkan_fix: str | None = None
    # llama.cpp's own description of the device (part of the driver check's cache key)
    llama_cpp_description: str | None = field(default=None, metadata={"json": False})
    # maxStorageBufferRange (full vulkaninfo / JSON): a larger weight stays on the CPU (plan/offload.py)
    max_storage_range: int | None = field(default=None, metadata={"json": False})


def _hex(value: str | None) -> int | None:
    if not value:
        return None
    m = re.search(r"0x[0-9a-fA-F]+|\d+", value)
    if not m:
        return None
    try:
        return int(m.group(0), 0)
    except ValueError:
        return None


def _clean_version(value: str | None) -> str | None:
    """ "4198599 (1.1.199)" -> "1.1.199"; "25.2.6 (104865798)" -> "25.2.6"; "92274688 (0x5800000)" kept."""
    if not value:
        return None
    inner = re.search(r"\((\d+\.\d+[^)]*)\)", value)
    if inner:
        return inner.group(1)
    return value.split(" (")[0].strip()


def parse_summary(text: str) -> tuple[list[dict[str, str]], str | None]:
    """Raw `key = value` blocks per GPU, and the instance version."""
    instance = None
    m = re.search(_INSTANCE, text)
    if m:
        instance = m.group(1)
    blocks: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    for raw in io.StringIO(text):
        line = raw.strip()
        if re.match(_GPU_HEADER, line):
            if len(blocks) >= MAX_GPUS:
                break
            current = {}
            blocks.append(current)
            continue
        if current is None:
            continue
        kv = re.match(_KV, line)
        if kv:
            current.setdefault(kv.group(1), kv.group(2).strip()[:MAX_VALUE_CHARS])
        elif line and not line.startswith(("-", "=")) and line.endswith(":"):
            current = None  # a new section ("Device Properties and Extensions:") ends the GPU block
    return blocks, instance


def _short(value: Any) -> str:
    return valid_text(str(value)[:MAX_VALUE_CHARS])


def _walk(node: Any):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def parse_json(text: str) -> list[dict[str, str]]:
    """Devices from a Vulkan JSON dump (vkjson, vulkaninfo --json): objects with deviceName and apiVersion."""
    return [raw for raw, _ in parse_json_details(text)]


def parse_json_details(text: str) -> list[tuple[dict[str, str], GpuDetails]]:
    try:
        data = loads_json(text)
    except ValueError:
        return []
    devices: list[tuple[dict[str, str], GpuDetails]] = []
    roots = (
        data.get("devices") if isinstance(data, dict) and isinstance(data.get("devices"), list) else [data]
    )
    for dev_root in roots[:MAX_GPUS]:
        props = next((n for n in _walk(dev_root) if "deviceName" in n and "apiVersion" in n), None)
        if props is None:
            continue
        raw = {k: _short(v) for k, v in props.items() if isinstance(v, (str, int))}
        nodes = list(_walk(dev_root))
        for node in nodes:
            if "storageBuffer16BitAccess" in node:
                raw["storageBuffer16BitAccess"] = _short(node["storageBuffer16BitAccess"]).lower()
            for key in ("driverID", "driverName", "driverInfo"):
                if key in node and isinstance(node[key], (str, int)):
                    raw.setdefault(key, _short(node[key]))
        devices.append((raw, from_json(nodes)))
    return devices


_DEVICE_TYPES = {"0": "OTHER", "1": "INTEGRATED_GPU", "2": "DISCRETE_GPU", "3": "VIRTUAL_GPU", "4": "CPU"}


def to_device(raw: dict[str, str], instance: str | None, fixed: bool = False) -> VulkanDevice:
    vendor_id = _hex(raw.get("vendorID"))
    api = _clean_version(raw.get("apiVersion"))
    if api and api.isdigit():  # JSON dumps carry the packed VK_MAKE_API_VERSION integer
        packed = parse_version(api)
        api = ".".join(map(str, packed)) if packed else api
    kind = (raw.get("deviceType") or "").replace("PHYSICAL_DEVICE_TYPE_", "")
    kind = _DEVICE_TYPES.get(kind, kind)
    driver_version = _clean_version(raw.get("driverVersion"))
    driver_name = raw.get("driverName") or None
    driver_info = raw.get("driverInfo") or None
    driver = driver_info or (
        f"{driver_name} {driver_version or ''}".strip() if driver_name else driver_version
    )
    storage16 = {"true": True, "1": True, "false": False, "0": False}.get(
        raw.get("storageBuffer16BitAccess", "")
    )
    dev = VulkanDevice(
        name=raw.get("deviceName", "unknown"),
        vendor=VENDORS.get(vendor_id) if vendor_id is not None else None,
        vendor_id=vendor_id,
        device_id=_hex(raw.get("deviceID")),
        device_type=kind or None,
        api_version=api,
        driver=driver,
        driver_id=(raw.get("driverID") or "").split(" ")[0] or None,
        driver_name=driver_name,
        driver_version=driver_version,
        vulkan_usable=None,
        storage_16bit=storage16,
    )
    _judge(dev, parse_version(api), parse_version(instance), storage16, fixed)
    return dev


def _judge(
    dev: VulkanDevice,
    api: tuple[int, ...] | None,
    instance: tuple[int, ...] | None,
    storage16: bool | None,
    fixed: bool,
) -> None:
    usable, reasons, refs = judge(dev, api, instance, storage16, fixed)
    dev.vulkan_usable, dev.reasons, dev.issues = usable, reasons, refs
    dev.vulkan_fix = fix_state(dev, api, instance, storage16, fixed)


def with_details(
    dev: VulkanDevice, details: GpuDetails | None, instance: str | None, fixed: bool = False
) -> VulkanDevice:
    """Add the full-text facts; a 16-bit storage fact the summary lacked can change the verdict."""
    if details is None:
        return dev
    dev.buffer_device_address = details.bda
    dev.subgroup_size = details.subgroup_size
    dev.memory_heaps = details.heaps
    dev.max_storage_range = details.max_storage_range
    if dev.storage_16bit is None and details.storage16 is not None:
        dev.storage_16bit = details.storage16
        _judge(dev, parse_version(dev.api_version), parse_version(instance), details.storage16, fixed)
    return dev


def _vulkan_devices(root: Path, android: bool, fixed: bool) -> tuple[list[VulkanDevice], list[str]]:
    """Devices as the Vulkan loader lists them (vulkaninfo, else Android's vkjson)."""
    reasons: list[str] = []
    text, why = commands.run_command(root, ["vulkaninfo", "--summary"], timeout=4.0)
    if text is not None:
        blocks, instance = parse_summary(text)
        if blocks:
            full, full_why = commands.run_command(root, ["vulkaninfo"], timeout=4.0)
            details = parse_full(full) if full is not None else []
            if full is None and not (full_why or "").startswith("not captured"):  # older snapshots lack it
                reasons.append(f"no bufferDeviceAddress/subgroup/heap facts ({full_why})")
            return [
                with_details(
                    to_device(b, instance, fixed), details[i] if i < len(details) else None, instance, fixed
                )
                for i, b in enumerate(blocks)
            ], reasons
        reasons.append("vulkaninfo --summary listed no GPU")
    else:
        reasons.append(f"no Vulkan device list ({why})")
    if android:
        text, why = commands.run_command(root, ["cmd", "gpu", "vkjson"], timeout=4.0, limit=VKJSON_FILE)
        if text is not None:
            devices = [
                with_details(to_device(raw, None, fixed), d, None, fixed)
                for raw, d in parse_json_details(text)
            ]
            if devices:
                return devices, []
            reasons.append("cmd gpu vkjson listed no GPU")
        else:
            reasons.append(f"no Android Vulkan JSON ({why})")
    return [], reasons


def _same_device(llama: LlamaDevice, dev: VulkanDevice) -> bool:
    a, b = llama.description.lower(), dev.name.lower()
    return bool(a and b) and (a == b or a.startswith(b) or b.startswith(a))


def _from_llama(llama: LlamaDevice) -> VulkanDevice:
    """A device llama.cpp lists that vulkaninfo did not describe: judged by its name alone."""
    dev = VulkanDevice(
        name=llama.description or llama.name,
        vendor=None,
        vendor_id=None,
        device_id=None,
        device_type=None,
        api_version=None,
        driver=None,
        driver_id=None,
        driver_name=None,
        driver_version=None,
        vulkan_usable=None,
    )
    if llama.backend == "vulkan":
        usable, reasons, refs = judge(dev, None, None, None)
        dev.vulkan_usable, dev.reasons, dev.issues = usable, reasons, refs
    return dev


def join(devices: list[VulkanDevice], llama: list[LlamaDevice] | None) -> list[VulkanDevice]:
    """The loader's devices joined with llama.cpp's list (None: no list), each with its verdict."""
    out: list[VulkanDevice] = []
    unmatched = list(devices)
    for ld in llama or []:
        match = next((d for d in unmatched if ld.backend == "vulkan" and _same_device(ld, d)), None)
        if match is None and ld.backend == "vulkan" and len(unmatched) == 1 and len(devices) == 1:
            match = unmatched[0]  # one device on both sides: a renamed description is still that device
        if match is not None:
            unmatched.remove(match)
        dev = match or _from_llama(ld)
        dev.llama_cpp_name, dev.backend, dev.llama_cpp_description = ld.name, ld.backend, ld.description
        dev.llama_total_bytes, dev.llama_free_bytes = ld.total_bytes, ld.free_bytes
        out.append(dev)
    for dev in unmatched:
        dev.backend = "vulkan"
        if llama is not None:
            dev.reasons.append(not_listed_reason(dev))
        out.append(dev)
    for dev in out:
        dev.verdict = final_verdict(dev, listed=llama is None or dev.llama_cpp_name is not None)
    return out


def not_listed_reason(dev: VulkanDevice) -> str:
    if "CPU" in (dev.device_type or "").upper():
        return (
            "llama.cpp does not list it: ggml skips CPU-type Vulkan devices unless GGML_VK_VISIBLE_DEVICES "
            "names them"
        )
    return "llama.cpp does not list it (no Vulkan backend installed, or GGML_VK_VISIBLE_DEVICES hides it)"


def read_gpus(
    root: Path,
    android: bool,
    llama_tool: Path | str | None = None,
    llama_list: Callable[[], tuple[list[LlamaDevice] | None, str | None]] | None = None,
) -> tuple[list[VulkanDevice], list[str]]:
    """GPUs as the Vulkan loader and llama.cpp see them, and why a list is missing (no vulkaninfo, no
    llama.cpp program, ...). `llama_tool`: the program that lists llama.cpp's devices (live only);
    `llama_list`: that list already under way (gpu_llama.llama_devices_later)."""
    devices, reasons = _vulkan_devices(root, android, fixed=vulkan_fix_of(llama_tool) is not None)
    llama, why = llama_list() if llama_list is not None else read_llama_devices(root, llama_tool)
    if why is not None:
        reasons.append(why)
    return join(devices, llama), reasons


def vulkan_devices(root: Path, android: bool) -> tuple[list[VulkanDevice], list[str]]:
    """The loader's devices in its order (vulkaninfo's `GPU<n>`), without llama.cpp's list: the facts the
    offloaded plan's driver prior reads (device/gpu_driver.py)."""
    return _vulkan_devices(root, android, fixed=False)
