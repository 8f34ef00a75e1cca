"""What the supervisor knows, shared by the watchdog thread, the memory watch and the front's event loop."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

STARTING, READY, RESTARTING, FAILED, STOPPING = "starting", "ready", "restarting", "failed", "stopping"
KEEP_DEATHS = 5


@dataclass
class WorkerInfo:
    pid: int
    n_ctx: int
    settings: dict[str, Any]
    started: float  # time.time()
    ready_at: float | None = None


@dataclass
class Death:
    """One worker that died, and what the doctor made of it."""

    at: float
    pid: int
    uptime_seconds: float
    exit_code: int
    signal_name: str | None
    peak_rss_bytes: int | None
    cause: str  # a doctor cause id
    title: str
    fix: str
    evidence: list[str] = field(default_factory=list)
    action: str = ""  # what the watchdog did about it
    seen: str = ""  # what the watchdog saw, for people: "the worker was killed (SIGKILL: killed-by-system)"


def what_was_seen(signal_name: str | None, exit_code: int, cause: str) -> str:
    """The death as the watchdog saw it: the signal or exit status, and the doctor's cause when it has one."""
    known = f": {cause}" if cause and cause != "unknown" else ""
    if signal_name:
        return f"the worker was killed ({signal_name}{known})"
    return f"the worker exited (status {exit_code}{known})"


@dataclass
class Pressure:
    available_bytes: int | None = None
    total_bytes: int | None = None
    psi_some_avg10: float | None = None
    celsius: float | None = None
    zone: str | None = None
    gated: bool = False
    reason: str | None = None


class ServerState:
    def __init__(self, model_name: str, retry_after: int) -> None:
        self._lock = threading.Lock()
        self.model_name = model_name
        self.retry_after = retry_after
        self.started = time.time()
        self.phase = STARTING
        self.worker: WorkerInfo | None = None
        self.restarts = 0
        self.deaths: list[Death] = []
        self.failure: str | None = None
        self.pressure = Pressure()
        self.counts: Counter[str] = Counter()  # touched only on the event loop
        self.connections: Counter[str] = Counter()  # idle now, evicted, timed_out (serve/connections.py)
        self.in_flight = 0
        self.waiting = 0
        # where Android ranks the server for killing (device/background_watch.py's status), once it is watched
        self.background: Callable[[], dict[str, Any]] | None = None
        # --max-temp with llama-server: this process's guard (edgepilot's worker reports its own)
        self.thermal: Callable[[], dict[str, Any]] | None = None
        # --lookup / --draft on llama-server: its kind; the replies' drafted, accepted, generated tokens
        self.speculation_kind: str | None = None
        self.drafts = [0, 0, 0]

    def note_drafts(self, drafts: tuple[int, int] | None, n_gen: int | None) -> None:
        """One reply's draft counts (request_log.Exchange), added up for the status page (the event loop)."""
        if self.speculation_kind is not None and drafts is not None and n_gen is not None:
            self.drafts = [self.drafts[0] + drafts[0], self.drafts[1] + drafts[1], self.drafts[2] + n_gen]

    def speculation_status(self) -> dict[str, Any] | None:
        if self.speculation_kind is None:
            return None
        from edgepilot.engine.speculation import SpecStats

        drafted, accepted, n_gen = self.drafts
        return SpecStats(self.speculation_kind, drafted, min(accepted, n_gen), n_gen).to_json()

    def background_status(self) -> dict[str, Any] | None:
        return self.background() if self.background is not None else None

    def set_starting(self, info: WorkerInfo, restarting: bool) -> None:
        with self._lock:
            self.worker = info
            self.phase = RESTARTING if restarting else STARTING

    def set_ready(self, n_ctx: int) -> None:
        with self._lock:
            if self.worker is not None:
                self.worker.n_ctx = n_ctx
                self.worker.ready_at = time.time()
            if self.phase != STOPPING:
                self.phase = READY

    def set_died(self, death: Death) -> None:
        with self._lock:
            self.deaths = [*self.deaths, death][-KEEP_DEATHS:]
            if self.phase not in (STOPPING, FAILED):
                self.phase = RESTARTING

    def note_restart(self) -> None:
        with self._lock:
            self.restarts += 1

    def set_failed(self, message: str) -> None:
        with self._lock:
            self.phase, self.failure = FAILED, message

    def set_stopping(self) -> None:
        with self._lock:
            self.phase = STOPPING

    @property
    def ready(self) -> bool:
        return self.phase == READY

    def worker_pid(self) -> int | None:
        w = self.worker
        return w.pid if w is not None else None

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            w = self.worker
            return {
                "phase": self.phase,
                "model": self.model_name,
                "uptime_seconds": round(time.time() - self.started, 1),
                "restarts": self.restarts,
                "worker": asdict(w) if w is not None else None,
                "deaths": [asdict(d) for d in self.deaths],
                "failure": self.failure,
                "pressure": asdict(self.pressure),
                "requests": {**self.counts, "in_flight": self.in_flight, "waiting": self.waiting},
                "connections": {"idle": 0, "evicted": 0, "timed_out": 0, **self.connections},
                "background": self.background_status(),
                "speculation": self.speculation_status(),
            }
