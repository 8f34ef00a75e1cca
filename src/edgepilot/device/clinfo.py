"""The OpenCL devices `clinfo` prints (its default, human-readable form), as raw facts per device.

clinfo lists the platforms (`Number of platforms N`, then each one's `  Platform Name  X` block), then per
platform `  Platform Name  X`, `Number of devices N` and one block per device: `  Device Name  X`,
`  Device Version  X`, `  Driver Version  X`, `  Device Extensions  a b c`, `  Global memory size  N (x GiB)`
and so on, each label padded with spaces to one column. It ends with a `NULL platform behavior` section
that names the devices again (not new devices) and `ICD loader properties`.

The text is untrusted (a device tree, or a driver's strings): platforms and devices are capped at ggml's
own limits, values at a few hundred characters, the extension list at MAX_EXTENSIONS names.
"""

from __future__ import annotations

import re

MAX_PLATFORMS = 16  # ggml-opencl's NPLAT and NDEV
MAX_DEVICES = 16
MAX_VALUE_CHARS = 300  # a Qualcomm driver string is ~130 characters
MAX_LINE_CHARS = 16 << 10  # an extension list is ~2 KB
MAX_EXTENSIONS = 256
_ENDS = ("NULL platform behavior", "ICD loader properties")
_SPLIT = re.compile(r"\s{2,}")
_NUMBER = re.compile(r"^\s*(\d{1,20})\b")
# clinfo's labels -> our keys (only what ggml-opencl decides on, or probe shows)
_DEVICE_KEYS = {
    "Device Name": "name",
    "Device Vendor": "vendor",
    "Device Vendor ID": "vendor_id",
    "Device Version": "device_version",
    "Driver Version": "driver_version",
    "Device OpenCL C Version": "opencl_c_version",
    "Device Type": "device_type",
    "Global memory size": "global_mem",
    "Max memory allocation": "max_alloc",
    "Device Extensions": "extensions",
}


def _label_value(line: str) -> tuple[str, str] | None:
    """`  Device Name      QUALCOMM Adreno(TM) 750` -> ("Device Name", "QUALCOMM Adreno(TM) 750")."""
    stripped = line.strip()
    parts = _SPLIT.split(stripped, maxsplit=1)
    if len(parts) != 2:
        return (stripped, "") if stripped else None
    return parts[0], parts[1].strip()


def parse_clinfo(text: str) -> tuple[list[dict[str, str]], int | None]:
    """(one dict per device: `platform` plus the _DEVICE_KEYS found, the platform count clinfo printed).
    Never raises; an unrecognised text gives ([], None)."""
    devices: list[dict[str, str]] = []
    n_platforms: int | None = None
    platform = ""
    in_devices = False
    current: dict[str, str] | None = None
    for raw in text.splitlines():
        line = raw[:MAX_LINE_CHARS]
        if line.startswith(_ENDS):
            break
        pair = _label_value(line)
        if pair is None:
            continue
        label, value = pair
        if label == "Number of platforms":
            n_platforms = _count(value)
        elif label == "Platform Name":
            platform, in_devices, current = value[:MAX_VALUE_CHARS], False, None
        elif label == "Number of devices":
            in_devices = True
        elif in_devices and label == "Device Name":
            if len(devices) >= MAX_DEVICES:
                break
            current = {"platform": platform, "name": value[:MAX_VALUE_CHARS]}
            devices.append(current)
        elif current is not None and label in _DEVICE_KEYS:
            key = _DEVICE_KEYS[label]
            current.setdefault(key, value if key == "extensions" else value[:MAX_VALUE_CHARS])
    return devices, n_platforms


def _count(value: str) -> int | None:
    m = _NUMBER.match(value)
    return min(int(m.group(1)), MAX_PLATFORMS * 1000) if m else None


def size_bytes(value: str | None) -> int | None:
    """`5814714368 (5.415GiB)` -> 5814714368."""
    if not value:
        return None
    m = _NUMBER.match(value)
    return int(m.group(1)) if m else None


def extension_names(value: str | None) -> list[str]:
    """The `cl_...` names of an extension list (at most MAX_EXTENSIONS)."""
    if not value:
        return []
    names = [w for w in value.split() if re.fullmatch(r"cl_[A-Za-z0-9_]{1,80}", w)]
    return names[:MAX_EXTENSIONS]
