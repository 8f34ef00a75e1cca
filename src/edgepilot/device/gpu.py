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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgepilot.device import commands
from edgepilot.device.gpu_verdict import judge, parse_version
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
_GPU_HEADER = re.compile(r"^GPU(\d+):\s*$")
_KV = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)\s*=\s*(.*)$")
_INSTANCE = re.compile(r"Vulkan Instance Version:\s*(\S+)")


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
    m = _INSTANCE.search(text)
    if m:
        instance = m.group(1)
    blocks: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    for raw in io.StringIO(text):
        line = raw.strip()
        if _GPU_HEADER.match(line):
            if len(blocks) >= MAX_GPUS:
                break
            current = {}
            blocks.append(current)
            continue
        if current is None:
            continue
        kv = _KV.match(line)
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
    try:
        data = loads_json(text)
    except ValueError:
        return []
    devices: list[dict[str, str]] = []
    roots = (
        data.get("devices") if isinstance(data, dict) and isinstance(data.get("devices"), list) else [data]
    )
    for dev_root in roots[:MAX_GPUS]:
        props = next((n for n in _walk(dev_root) if "deviceName" in n and "apiVersion" in n), None)
        if props is None:
            continue
        raw = {k: _short(v) for k, v in props.items() if isinstance(v, (str, int))}
        for node in _walk(dev_root):
            if "storageBuffer16BitAccess" in node:
                raw["storageBuffer16BitAccess"] = _short(node["storageBuffer16BitAccess"]).lower()
            for key in ("driverID", "driverName", "driverInfo"):
                if key in node and isinstance(node[key], (str, int)):
                    raw.setdefault(key, _short(node[key]))
        devices.append(raw)
    return devices


_DEVICE_TYPES = {"0": "OTHER", "1": "INTEGRATED_GPU", "2": "DISCRETE_GPU", "3": "VIRTUAL_GPU", "4": "CPU"}


def to_device(raw: dict[str, str], instance: str | None) -> VulkanDevice:
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
    usable, reasons, refs = judge(dev, parse_version(api), parse_version(instance), storage16)
    dev.vulkan_usable, dev.reasons, dev.issues = usable, reasons, refs
    return dev


def read_gpus(root: Path, android: bool) -> tuple[list[VulkanDevice], list[str]]:
    """Vulkan devices and the reasons they could not be listed (no vulkaninfo, no driver, ...)."""
    reasons: list[str] = []
    text, why = commands.run_command(root, ["vulkaninfo", "--summary"], timeout=4.0)
    if text is not None:
        blocks, instance = parse_summary(text)
        if blocks:
            return [to_device(b, instance) for b in blocks], reasons
        reasons.append("vulkaninfo --summary listed no GPU")
    else:
        reasons.append(f"no Vulkan device list ({why})")
    if android:
        text, why = commands.run_command(root, ["cmd", "gpu", "vkjson"], timeout=4.0, limit=VKJSON_FILE)
        if text is not None:
            devices = [to_device(raw, None) for raw in parse_json(text)]
            if devices:
                return devices, []
            reasons.append("cmd gpu vkjson listed no GPU")
        else:
            reasons.append(f"no Android Vulkan JSON ({why})")
    return [], reasons
