"""Progress of a long command when stderr is not a terminal (a pipe, a log file, CI).

On a terminal bench, tune, pull and build draw rich bars; elsewhere a bar cannot redraw, and a reader saw
nothing for as long as the work took (quantize and compare said each step, then nothing while llama.cpp
worked). There the latest state goes to stderr as one line every few seconds ($EDGEPILOT_PROGRESS_SECONDS,
default 5): what runs, how far it got, and the time since the start.
The lines come from a thread, so a long call into llama.cpp (which releases the GIL) still gets them; a
command done within the first period prints none.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType

PERIOD_ENV = "EDGEPILOT_PROGRESS_SECONDS"
DEFAULT_PERIOD = 5.0

# (units done, units in all or None) -> how far, e.g. "3 of 30"
Figures = Callable[[float, float | None], str]


def period() -> float:
    """Seconds between lines: $EDGEPILOT_PROGRESS_SECONDS when it is a positive number, else 5."""
    try:
        value = float(os.environ.get(PERIOD_ENV) or DEFAULT_PERIOD)
    except ValueError:
        return DEFAULT_PERIOD
    return value if math.isfinite(value) and value > 0 else DEFAULT_PERIOD


def count(done: float, total: float | None) -> str:
    return f"{done:.0f} of {total:.0f}" if total else f"{done:.0f}"


def mebibytes(done: float, total: float | None) -> str:
    mib = 1 << 20
    return f"{done / mib:.1f} of {total / mib:.1f} MiB" if total else f"{done / mib:.1f} MiB"


def percent(done: float, _total: float | None) -> str:
    return f"{done:.0f}%"


def elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


class PipeProgress:
    """update() records the state; a thread prints it every period() seconds while the block runs."""

    def __init__(self, title: str, figures: Figures = count) -> None:
        self.title, self.figures = title, figures
        self.description = ""
        self.done: float | None = None
        self.total: float | None = None
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{title}-progress", daemon=True)
        self._lock = threading.Lock()

    def update(self, description: str, done: float | None = None, total: float | None = None) -> None:
        with self._lock:
            self.description, self.done, self.total = description, done, total

    def line(self) -> str:
        from edgepilot.shown import shown

        with self._lock:
            parts = [f"{self.title}: {shown(self.description)}" if self.description else self.title]
            if self.done is not None:
                parts.append(self.figures(self.done, self.total))
        parts.append(elapsed(time.monotonic() - self.t0))
        return " · ".join(parts)

    def _run(self) -> None:
        every = period()
        while not self._stop.wait(every):
            try:
                sys.stderr.write(self.line() + "\n")
                sys.stderr.flush()
            except (OSError, ValueError):  # stderr closed or gone: nothing to say it to
                return

    def __enter__(self) -> PipeProgress:
        self.t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _exc: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=1)
