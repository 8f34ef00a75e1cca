"""Where Android ranks this process for killing: its `oom_score_adj`, and on Android its app's.

Android's ActivityManager sets each app process's oom_score_adj from what the app is doing (AOSP
ProcessList.java): 0 foreground, 100 visible, 200 perceptible (a foreground service: Termux with its
notification), 500 services, 700 the previous app, 800 old services (the "B" list), 900-999 cached apps.
When memory runs short lmkd kills the highest scores first, and since Android 11 cached apps are also
frozen. Android kills an app with its whole process group, children included (Termux's shell, edgepilot),
so on Android the app's score counts as much as this process's: its ancestors are read too, as far as /proc
shows them. Elsewhere only this process's own score counts (the kernel's OOM killer picks processes one by
one).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from edgepilot.device import fs
from edgepilot.device.android import is_termux

PREVIOUS_APP_ADJ = 700  # ProcessList.PREVIOUS_APP_ADJ: killed right after the cached apps
CACHED_APP_MIN_ADJ = 900  # ProcessList.CACHED_APP_MIN_ADJ: killed first, may be frozen
MAX_ANCESTORS = 16

# Classes from the safest up; a watch says each class above "kept" once.
KEPT, BACKGROUND, CACHED = "kept", "background", "cached"
RANK = {KEPT: 0, BACKGROUND: 1, CACHED: 2}


@dataclass
class Standing:
    oom_score_adj: int | None  # the highest of the scores read (None: not readable)
    pid: int | None  # whose score it is
    name: str  # that process's command name ("python3", "com.termux")
    own: bool  # the score is this process's own, not its app's
    klass: str  # kept | background | cached
    android: bool  # read as on Android (the app's score counts)
    reason: str | None = None  # why nothing could be read


def adj_class(adj: int | None) -> str:
    if adj is None or adj < PREVIOUS_APP_ADJ:
        return KEPT
    return CACHED if adj >= CACHED_APP_MIN_ADJ else BACKGROUND


def is_android(env: dict[str, str]) -> bool:
    return bool(env.get("ANDROID_ROOT") or env.get("ANDROID_DATA")) or is_termux(env)


def _stat(root: Path, pid: int | str) -> tuple[str, int | None]:
    """(command name, parent pid) from /proc/PID/stat; the name may hold spaces and parentheses."""
    text, _ = fs.read_text(root, f"proc/{pid}/stat", fs.VALUE_FILE)
    if not text or ")" not in text:
        return "?", None
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    ppid = int(fields[1]) if len(fields) > 1 and fields[1].isdecimal() else None
    return head.partition("(")[2], ppid


def read_standing(root: Path = fs.LIVE_ROOT, pid: int | str = "self") -> Standing:
    """This process's standing (pid: another one's), and on Android the highest of its ancestors'."""
    env, _ = fs.read_env(root)
    android = is_android(env)
    adj, reason = fs.read_int(root, f"proc/{pid}/oom_score_adj")
    name, parent = _stat(root, pid)
    best = Standing(adj, None if pid == "self" else int(pid), name, True, adj_class(adj), android, reason)
    if best.pid is None and fs.is_live(root):
        best.pid = os.getpid()
    for _ in range(MAX_ANCESTORS if android else 0):
        if parent is None or parent <= 1:
            break
        score, _ = fs.read_int(root, f"proc/{parent}/oom_score_adj")
        name, grand = _stat(root, parent)
        if score is None:
            break  # not ours to see (hidepid): the app is further up than /proc shows
        if best.oom_score_adj is None or score > best.oom_score_adj:
            best = Standing(score, parent, name, False, adj_class(score), android)
        parent = grand
    return best
