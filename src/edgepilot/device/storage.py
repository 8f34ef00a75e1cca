"""Which filesystem a path lives on, so a model on /sdcard (FUSE) or an SD card can be flagged.

On Android 11+ shared storage (/sdcard -> /storage/emulated/0) is served through FUSE: model loads take tens
of seconds and prompt processing crawls (llama.cpp PR #7016: 26 s load, 0.27 t/s). Android 9-10 used sdcardfs,
also a stacked filesystem. Removable SD cards (vfat/exfat) are slow at random reads and reject direct I/O with
EINVAL (#18804). Termux's own home (/data/data/com.termux/files/home) is on /data (f2fs or ext4): fast.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot.device import fs

SLOW_FS = {
    "fuse": "FUSE (Android shared storage): slow model loads and page-cache misses (llama.cpp PR #7016)",
    "fuseblk": "FUSE block filesystem: slow model loads",
    "sdcardfs": "sdcardfs (Android 9-10 shared storage): stacked filesystem, slower loads",
    "esdfs": "esdfs (vendor shared-storage layer): stacked filesystem, slower loads",
    "vfat": "FAT (removable card?): slow random reads; direct I/O fails with EINVAL (llama.cpp #18804)",
    "exfat": "exFAT (removable card?): slow random reads; direct I/O fails with EINVAL (llama.cpp #18804)",
    "9p": "9p (VM/WSL share): slow random reads",
    "nfs": "network filesystem: loads depend on the network",
    "nfs4": "network filesystem: loads depend on the network",
    "cifs": "network filesystem: loads depend on the network",
}

MAX_MOUNTS = 20000  # a container host has a few thousand; /proc/mounts is capped at fs.TABLE_FILE anyway

# Android's shared-storage symlinks, for replaying a device whose own symlinks were not saved.
ANDROID_ALIASES: tuple[tuple[str, str], ...] = (
    ("/sdcard", "/storage/self/primary"),
    ("/storage/self/primary", "/storage/emulated/0"),
    ("/mnt/sdcard", "/storage/emulated/0"),
)


@dataclass
class Mount:
    source: str
    mount_point: str
    fstype: str
    options: str


@dataclass
class PathStorage:
    path: str
    resolved: str
    mount_point: str | None
    fstype: str | None
    source: str | None
    slow: bool | None
    note: str | None
    free_bytes: int | None = None
    total_bytes: int | None = None


@dataclass
class StorageFacts:
    paths: list[PathStorage]
    reasons: list[str] = field(default_factory=list)


def _unescape(value: str) -> str:
    # /proc/mounts escapes space, tab, newline and backslash as octal.
    return value.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def parse_mounts(text: str) -> list[Mount]:
    mounts: list[Mount] = []
    for line in io.StringIO(text):
        parts = line.split(maxsplit=4)
        if len(parts) < 4:
            continue
        mounts.append(Mount(_unescape(parts[0]), _unescape(parts[1]), parts[2], parts[3]))
        if len(mounts) >= MAX_MOUNTS:
            break
    return mounts


def mount_for(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount that serves `path`: the longest mount point that is a prefix (the last one mounted wins)."""
    best: Mount | None = None
    for m in mounts:
        mp = m.mount_point.rstrip("/") or "/"
        covers = path == mp or mp == "/" or path.startswith(mp + "/")
        if covers and (best is None or len(mp) >= len(best.mount_point.rstrip("/") or "/")):
            best = m
    return best


def termux_aliases(home: str | None) -> tuple[tuple[str, str], ...]:
    if not home:
        return ANDROID_ALIASES
    home = home.rstrip("/")
    return (
        (f"{home}/storage/shared", "/storage/emulated/0"),
        (f"{home}/storage/downloads", "/storage/emulated/0/Download"),
        *ANDROID_ALIASES,
    )


def classify(root: Path, path: str, mounts: list[Mount], home: str | None = None) -> PathStorage:
    resolved = fs.realpath(root, path, termux_aliases(home))
    mount = mount_for(resolved, mounts)
    if mount is None:
        return PathStorage(path, resolved, None, None, None, None, "mount table unavailable")
    note = SLOW_FS.get(mount.fstype)
    return PathStorage(
        path=path,
        resolved=resolved,
        mount_point=mount.mount_point,
        fstype=mount.fstype,
        source=mount.source,
        slow=note is not None,
        note=note,
    )


def read_mounts(root: Path) -> tuple[list[Mount], str | None]:
    text, why = fs.read_text(root, "proc/mounts", fs.TABLE_FILE)
    if text is None:
        return [], why
    return parse_mounts(text), None


def read_storage(root: Path, env: dict[str, str], android: bool) -> StorageFacts:
    reasons: list[str] = []
    mounts, why = read_mounts(root)
    if why:
        reasons.append(f"mount table unavailable ({why})")
    home = env.get("HOME")
    paths: list[str] = []
    if home:
        paths.append(home)
    if android:
        paths.append("/sdcard")
    out: list[PathStorage] = []
    for path in paths:
        info = classify(root, path, mounts, home)
        space, _ = fs.statvfs(root, info.resolved)
        if space:
            info.free_bytes = space.get("free_bytes")
            info.total_bytes = space.get("total_bytes")
        out.append(info)
    if not home:
        reasons.append("HOME not set: no home filesystem to check")
    return StorageFacts(paths=out, reasons=reasons)
