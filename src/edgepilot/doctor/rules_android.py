"""Phone and userland causes: the phantom-process killer, models on FUSE/SD storage, a 32-bit userland."""

from __future__ import annotations

import os
import re

from edgepilot.device import fs
from edgepilot.device.android import keep_alive_fix
from edgepilot.doctor.evidence import Evidence
from edgepilot.doctor.rulekit import (
    ALLOC_FAIL,
    BITS32_LINK,
    KILLER_LINE,
    LOAD_FAIL,
    MAPPING_FAIL,
    thirty_two_bit_evidence,
    upto_last,
)
from edgepilot.doctor.types import Cause, cause
from edgepilot.shown import shell_word

PHANTOM = re.compile(r"Trimming phantom processes|PhantomProcessRecord|excessive cpu", re.I)
TERMUX_SIGNAL9 = re.compile(r"Process completed \(signal 9\)")
AM_BACKGROUND = re.compile(
    upto_last("ActivityManager: Killing ", r"\((adj \d+)\): (empty|cached|bg )")
    + "|"
    + upto_last("am_kill", "(empty|cached) #"),
    re.I,
)

SHARED_PATH = re.compile(
    r"^(?:/sdcard|/storage/|/mnt/sdcard|/mnt/media_rw|/mnt/[^/]*(?:sd|ext)[^/]*/|"
    r"(?:~/|\S*/)?storage/(?:shared|downloads|dcim|external-\d+)/)",
    re.I,
)
DIRECT_IO = re.compile(r"direct I/O is enabled|direct_io = true", re.I)
DIRECT_IO_FAIL = re.compile(r"read error: Invalid argument|EINVAL", re.I)
SHARED_WORDS = re.compile(r"shared storage|loading from shared|~/storage/(shared|downloads)", re.I)


def background_killed(ev: Evidence) -> list[Cause]:
    phantom = ev.grep(PHANTOM)
    termux9 = ev.grep(TERMUX_SIGNAL9, limit=1)
    background = ev.grep(AM_BACKGROUND, limit=2)
    evidence = phantom + termux9 + background
    score = 90 if phantom else 80 if background else 70 if termux9 else 0
    a = ev.probe.android if ev.probe is not None else None
    phantom_on = a is not None and a.phantom_process_limit is not None
    if not score and ev.killed and phantom_on and not ev.has(KILLER_LINE):
        evidence.append(ev.status_line() or "killed by SIGKILL")
        score = 55  # SIGKILL with no memory killer in sight, on a phone that trims child processes
    if not score:
        return []
    if a is not None and a.sdk is not None:
        limit = a.phantom_process_limit if a.phantom_process_limit is not None else "off"
        evidence.append(f"Android {a.release or '?'} (SDK {a.sdk}), phantom-process limit: {limit}")
    return [cause("background-killed", score, evidence, keep_alive_fix(a))]


def _model_paths(ev: Evidence) -> list[str]:
    return list(dict.fromkeys(p for p in [ev.model, *ev.facts.model_paths] if p))


def _storage_of(ev: Evidence, path: str) -> tuple[bool | None, str | None]:
    """(slow?, why) for an absolute model path on the probed device."""
    if ev.probe is None or ev.root is None or not path.startswith("/"):
        return None, None
    if fs.is_live(ev.root) and not _exists(path):
        return None, None  # a log from another device: this machine's mounts say nothing about the path
    from edgepilot.device.storage import classify, read_mounts

    mounts, why = read_mounts(ev.root)
    if why:
        return None, None
    info = classify(ev.root, path, mounts, ev.probe.env.get("HOME"))
    if info.fstype is None:
        return None, None
    note = f": {info.note}" if info.note else ""
    return info.slow, f"{path} is on {info.mount_point} ({info.fstype}){note}"


def _exists(path: str) -> bool:
    try:
        return os.path.exists(path)
    except (OSError, ValueError):
        return False


def slow_storage_fuse(ev: Evidence) -> list[Cause]:
    evidence: list[str] = []
    score = 0
    shared = None
    for path in _model_paths(ev):
        slow, why = _storage_of(ev, path)
        if slow:
            evidence.append(why or path)
            shared, score = path, 85
            break
        if slow is None and SHARED_PATH.search(path):
            evidence.append(f"model path {path} is on Android shared storage or an SD card")
            shared, score = path, 65
            break
    direct_io_fail = ev.has(DIRECT_IO) and ev.has(DIRECT_IO_FAIL)
    if direct_io_fail:
        evidence += ev.grep(r"direct I/O is enabled|read error: Invalid argument", limit=2)
        score = 88 if shared else 70
    words = ev.grep(SHARED_WORDS, limit=1)
    f = ev.facts
    slow_load = f.load_ms is not None and f.load_ms > 20_000
    slow_prompt = f.prompt_tps is not None and f.prompt_tps < 1.0
    if words:
        evidence += words
        score = max(score, 55)
    if slow_load or slow_prompt:
        evidence += ev.grep(r"load time\s+=|prompt eval time\s+=", limit=2)
        score = score + 10 if score else 30  # slow on its own could also be a big model
    if not score:
        return []
    src = shared or "/sdcard/Download/MODEL.gguf"
    name = os.path.basename(src) if shared else "MODEL.gguf"
    fix = (
        f"copy the model to internal storage and load it from there: `cp {shell_word(src)} ~/`, "
        f"then `-m ~/{shell_word(name)}`"
    )
    if direct_io_fail:
        fix += (
            "; if it must stay on the card, add `--mmap`: SD cards reject llama.cpp's direct I/O with EINVAL "
            "(#18804)"
        )
    return [cause("slow-storage-fuse", min(score, 95), evidence, fix)]


def userland_32bit(ev: Evidence) -> list[Cause]:
    evidence = thirty_two_bit_evidence(ev)
    if not evidence:
        return []
    mapping = ev.grep(MAPPING_FAIL, limit=2)
    alloc = ev.grep(ALLOC_FAIL, limit=2)
    load = ev.grep(LOAD_FAIL, limit=1)
    if ev.has(BITS32_LINK) or mapping:
        score = 86
    elif alloc:
        score = 75
    elif load:
        score = 68
    else:
        score = 35  # a fact about the device, not tied to this failure
    evidence += mapping or alloc or load
    cpu = ev.probe.cpu if ev.probe is not None else None
    reasons = cpu.reasons if cpu is not None else []
    hint = next((r for r in reasons if "reinstall" in r), None)
    hint = hint or next((r for r in reasons if "64-bit" in r), None)
    fix = hint or (
        "install a 64-bit build (the arm64-v8a Termux APK from F-Droid or GitHub; on a PC an x86_64 build) "
        "and rebuild llama.cpp there"
    )
    fix += (
        "; check with `uname -m` (aarch64 or x86_64 is 64-bit) and `file $(command -v llama-cli)`; a 32-bit "
        "process addresses at most ~3 GiB, so models over ~2 GiB cannot load in it"
    )
    return [cause("userland-32bit", score, evidence, fix)]


RULES = (background_killed, slow_storage_fuse, userland_32bit)
