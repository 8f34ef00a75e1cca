"""Where driver checks (gpu_check.py) are remembered, so later probes and runs do not load the driver again.

One JSON file, `gpu-checks.json` in edgepilot's data directory (datadir.py), written atomically
(safe_write.py). An entry's key is a hash of what decides whether the check still holds:
- the llama.cpp program (its real path, size, mtime) and the version it prints;
- the device as llama.cpp names and describes it (`Vulkan0`, `llvmpipe (LLVM 22.1.8, 256 bits)`);
- the driver files: every Vulkan ICD manifest the loader reads (and the library each names), and Android's
  `/vendor/lib*/hw/vulkan.*.so` (size and mtime), so a driver update is a new key;
- the environment the loader and ggml read (`VK_*`, `GGML_VK_*`: a layer, a visible-devices list).

The file is input (anyone with the data folder can write it): read only when it is a regular file of at most
CACHE_FILE bytes nested at most JSON_DEPTH deep, each entry a dict (engine/gpu_outcome.py types each field).
Its writer keeps it within that cap, so it never forgets what it wrote: beyond MAX_ENTRIES or CACHE_FILE the
oldest passed checks go first, then evidence of old entries; a failed check (its driver kept out of GPU
runs) goes only when nothing else is left.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import time
from pathlib import Path
from typing import Any

from edgepilot.digest import sha256_hex
from edgepilot.errors import UserError
from edgepilot.kept import Entries, KeyedCache
from edgepilot.untrusted import loads_json, read_capped

CACHE_NAME = "gpu-checks.json"
CACHE_FILE = 256 << 10
MANIFEST_FILE = 64 << 10
MAX_ENTRIES = 64
MAX_READ_ENTRIES = 4 * MAX_ENTRIES
JSON_DEPTH = 8  # {"checks": {key: {"facts": {"device": {...}}}}}
MAX_DRIVER_FILES = 64
FORMAT = 1
ICD_DIRS = (
    "/etc/vulkan/icd.d",
    "/usr/share/vulkan/icd.d",
    "/usr/local/share/vulkan/icd.d",
    "/usr/local/etc/vulkan/icd.d",
)
ANDROID_DRIVERS = ("/vendor/lib64/hw/vulkan.*.so", "/vendor/lib/hw/vulkan.*.so", "/system/lib64/libvulkan.so")
ENV_PREFIXES = ("VK_", "GGML_VK_")
CACHE = KeyedCache(
    name=CACHE_NAME, section="checks", most=MAX_ENTRIES, form=FORMAT, limit=CACHE_FILE, depth=JSON_DEPTH,
    what="the GPU check cache", then="checked again",
    refused="drivers are checked again and the results not kept",
)  # fmt: skip


def cache_path() -> Path:
    return CACHE.path()


def _stat(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}:absent"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def _manifests() -> list[str]:
    listed = os.environ.get("VK_DRIVER_FILES") or os.environ.get("VK_ICD_FILENAMES")
    if listed:
        return [p for p in listed.split(os.pathsep) if p][:MAX_DRIVER_FILES]
    dirs = list(ICD_DIRS)
    prefix = os.environ.get("PREFIX")  # Termux
    if prefix:
        dirs += [f"{prefix}/share/vulkan/icd.d", f"{prefix}/etc/vulkan/icd.d"]
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    dirs.append(f"{xdg}/vulkan/icd.d")
    found: list[str] = []
    for d in dirs:
        found += sorted(glob.glob(f"{d}/*.json"))
    return found[:MAX_DRIVER_FILES]


def driver_files() -> list[str]:
    """The Vulkan driver manifests a Khronos loader here would read (the loader's environment counts: one that
    points nowhere finds none)."""
    return [m for m in _manifests() if os.path.isfile(m)]


def _library_of(manifest: str) -> str | None:
    try:
        data = loads_json(read_capped(manifest, MANIFEST_FILE))
    except (OSError, ValueError, UserError):
        return None
    icd = data.get("ICD") if isinstance(data, dict) else None
    lib = icd.get("library_path") if isinstance(icd, dict) else None
    if not isinstance(lib, str) or not lib:
        return None
    return lib if os.path.isabs(lib) or "/" not in lib else str(Path(manifest).parent / lib)


def driver_fingerprint() -> str:
    """A hash of the driver files on this machine (a driver update changes it); a few stat calls."""
    parts: list[str] = []
    for manifest in _manifests():
        parts.append(_stat(manifest))
        lib = _library_of(manifest)
        if lib:
            parts.append(_stat(lib) if "/" in lib else f"lib:{lib}")
    for pattern in ANDROID_DRIVERS:
        parts += [_stat(p) for p in sorted(glob.glob(pattern))[:MAX_DRIVER_FILES]]
    return sha256_hex("\n".join(parts))[:16]


def loader_env() -> dict[str, str]:
    """The environment a Vulkan loader and ggml's Vulkan backend read."""
    return {k: v[:500] for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)}


def scope(tool: Path, tool_version: str | None) -> str:
    """What every check of this llama.cpp on this machine shares: the program, its version, the driver files
    and the loader's environment (a failed check in this scope keeps drivers out of its runs)."""
    try:
        real = str(tool.resolve())
    except OSError:
        real = str(tool)
    identity = {
        "tool": _stat(real),
        "version": tool_version or "",
        "driver": driver_fingerprint(),
        "env": loader_env(),
    }
    return sha256_hex(json.dumps(identity, sort_keys=True))[:24]


def check_key(scope_id: str, device: str, description: str) -> str:
    """One device's check in a scope: llama.cpp's name for it and its description."""
    raw = json.dumps([scope_id, device, description])
    return sha256_hex(raw)[:24]


def _read() -> Entries | None:
    """The remembered checks by key ({} when there are none or the file is damaged); None when permissions
    keep the file from us (noted once): then it is neither used nor written over."""
    checks = CACHE.entries()
    if checks is None:
        return None
    items = list(checks.items())[-MAX_READ_ENTRIES:]
    return {k: v for k, v in items if len(k) <= 64 and _entry_ok(v)}


def _entry_ok(entry: object) -> bool:
    """The keys every reader of an entry relies on, with their types (the rest: gpu_outcome.from_entry)."""
    if not isinstance(entry, dict):
        return False
    texts = ("scope", "device", "description", "outcome", "checked_at")
    return all(isinstance(entry.get(k, ""), str) for k in texts) and isinstance(entry.get("scope"), str)


def _failed(entry: dict[str, Any]) -> bool:
    return entry.get("ok") is False


def _oldest_first(checks: dict[str, dict[str, Any]]) -> list[str]:
    """Keys by when the check was made (a file's order is not its age when another writer sorted it)."""
    order = {k: n for n, k in enumerate(checks)}
    return sorted(checks, key=lambda k: (str(checks[k].get("checked_at") or ""), order[k]))


def bounded(checks: dict[str, dict[str, Any]], limit: int = CACHE_FILE) -> dict[str, dict[str, Any]]:
    """The checks to write: at most MAX_ENTRIES and `limit` bytes of JSON. The oldest passed (or undecided)
    checks are dropped first, then old entries lose their evidence; failed checks are dropped last."""
    kept = dict(checks)
    for key in _oldest_first(kept):
        if len(kept) <= MAX_ENTRIES:
            break
        if not _failed(kept[key]):
            del kept[key]
    for key in _oldest_first(kept):
        if len(kept) <= MAX_ENTRIES:
            break
        del kept[key]
    for strip in (False, True, None):
        for key in _oldest_first(kept):
            if len(CACHE.text(kept).encode()) <= limit:
                return kept
            if strip is False and not _failed(kept[key]):
                del kept[key]
            elif strip is True:
                kept[key] = {k: v for k, v in kept[key].items() if k not in ("evidence", "facts")}
            elif strip is None:
                del kept[key]
    return kept


def load() -> dict[str, dict[str, Any]]:
    """The remembered checks by key ({} when there are none or the file is unreadable)."""
    return _read() or {}


def store(key: str, entry: dict[str, Any]) -> str | None:
    """Remember one check (the oldest dropped beyond MAX_ENTRIES). The reason when it could not be saved."""
    return CACHE.store(key, {"checked_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **entry}, fit=bounded)


def forget(scope_id: str | None = None) -> int:
    """Drop the remembered checks of one scope (None: every one; the next probe checks again). How many."""
    checks = _read()
    if not checks:
        return 0
    if scope_id is None:
        with contextlib.suppress(OSError):
            cache_path().unlink()
        return len(checks)
    kept = {k: v for k, v in checks.items() if v.get("scope") != scope_id}
    if len(kept) == len(checks):
        return 0
    CACHE.replace(kept, fit=bounded)  # not kept: the checks are made again
    return len(checks) - len(kept)
