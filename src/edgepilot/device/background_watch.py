"""While run, chat or serve work: notice when Android moves the process (or its app) to a class it kills
first, and say so once per class, with what keeps it alive.

A daemon thread reads the standing (device/background.py: a few small /proc files) every INTERVAL seconds;
llama.cpp releases the GIL while it computes, so the reads cost the generation nothing measurable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edgepilot.device import fs
from edgepilot.device.background import CACHED, RANK, Standing, read_standing

INTERVAL = 1.0  # seconds between reads


def _meaning(s: Standing) -> str:
    if s.klass == CACHED:
        return "a cached app, killed first when memory runs short (and it may be frozen)"
    return "behind the apps in use (the previous app or an old service), killed right after the cached apps"


def background_note(s: Standing, root: Path = fs.LIVE_ROOT) -> str:
    """One message: who was moved, to what, what it means and what to do."""
    who = "this process" if s.own else f"its app {s.name} (pid {s.pid})"
    head = f"background: {who} now has oom_score_adj {s.oom_score_adj}"
    if not s.android:
        return (
            f"{head} (Android's {s.klass} class): the kernel's OOM killer picks it first; whatever raised it "
            "decides (a session manager, a parent's setting); as root `choom -n 0 -p PID` lowers it"
        )
    from edgepilot.device.android import keep_alive_fix, read_android

    env, _ = fs.read_env(root)
    android, _ = read_android(root, env)
    return f"{head}: Android counts it as {_meaning(s)}; {keep_alive_fix(android)}"


class BackgroundWatch:
    """`with BackgroundWatch(on_note):` around long work. on_note is called (from the watch's thread) once
    for each class reached, background then cached; `notes` keeps what was said, `status()` the latest."""

    def __init__(
        self,
        on_note: Callable[[str], None] | None = None,
        root: Path = fs.LIVE_ROOT,
        interval: float = INTERVAL,
    ) -> None:
        self.on_note, self.root, self.interval = on_note, root, interval
        self.notes: list[str] = []
        self.latest: Standing | None = None
        self.failure: str | None = None
        self._said = 0  # the highest class rank said so far
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self) -> str | None:
        """Read the standing once; the message when it reached a class not said before."""
        s = read_standing(self.root)
        rank = RANK[s.klass]
        if rank <= self._said:
            self.latest = s
            return None
        note = background_note(s, self.root)  # before the reading shows: status() never has one without it
        self.notes.append(note)
        self._said, self.latest = rank, s
        if self.on_note is not None:
            self.on_note(note)
        return note

    def _loop(self) -> None:
        while True:
            try:
                self.check()
            except Exception as exc:  # a watch must never end the work it watches
                self.failure = f"background watch stopped: {exc}"
                return
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> BackgroundWatch:
        self._thread = threading.Thread(target=self._loop, name="edgepilot-background", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.interval + 1)
        if self.failure is None:
            self.check()  # a move in the last interval is still said

    def status(self) -> dict[str, Any]:
        """For serve's /health and status page: the latest reading and what was said."""
        s = self.latest
        return {
            "oom_score_adj": s.oom_score_adj if s else None,
            "class": s.klass if s else None,
            "pid": s.pid if s else None,
            "own": s.own if s else None,
            "warning": self.notes[-1] if self.notes else None,
        }
