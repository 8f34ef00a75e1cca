"""--max-temp: above it, generation moves to fewer threads until the CPU has cooled, and says so.

A daemon thread reads the hottest CPU thermal zone (device/thermal.py) every INTERVAL seconds. The CPU counts
as hot above the limit and as cool again RESUME_MARGIN_C degrees below it (hysteresis: the thread count does
not flap at the line). The count itself changes in the generation's own thread, between two tokens: the
in-process engine calls its `between_tokens` hook before each decode (and, with a fresh reading, when a
generation starts), and the guard then calls llama_set_n_threads on the live context, as llama-bench does
between tests, and reads the count back from llama.cpp. Hot: half the threads (at least one), for prompts too.

llama-server takes its thread count once, when it starts (-t/-tb): a request has no thread field and its
POST /props changes nothing. With it the guard watches and warns; it does not restart the server.

The first move to fewer threads is said, and the first move back; later ones are only counted (`switches`).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgepilot.device import fs
from edgepilot.device.thermal import ThermalZone, cpu_zones, hottest_cpu, read_thermal, reread
from edgepilot.errors import UserError
from edgepilot.shown import shown
from edgepilot.words import count

if TYPE_CHECKING:
    from edgepilot.plan.settings import EngineSettings

INTERVAL = 1.0  # seconds between readings
RESUME_MARGIN_C = 5.0  # back to every thread at or below the limit minus this
LOWEST_C, HIGHEST_C = 20.0, 125.0  # a room's temperature; past any CPU's shutdown point
FEWER, FULL = "fewer", "full"


def parse_max_temp(text: str | None) -> float | None:
    """--max-temp's value in °C ("80", "80C", "80°C"); one line (UserError) for anything else."""
    if text is None:
        return None
    raw = text.strip()
    for unit in ("°C", "°c", "C", "c"):
        raw = raw.removesuffix(unit)
    try:
        value = float(raw)
    except ValueError:
        raise UserError(
            f"--max-temp {shown(text[:40])}: not a temperature; give degrees Celsius, e.g. --max-temp 80"
        ) from None
    if not math.isfinite(value) or not LOWEST_C <= value <= HIGHEST_C:
        raise UserError(f"--max-temp {shown(text[:40])}: out of range ({LOWEST_C:g} to {HIGHEST_C:g} °C)")
    return value


@dataclass
class ThermalLimit:
    """What run, chat and serve were asked for: the limit, and the device whose sensors decide."""

    max_temp_c: float
    root: Path = fs.LIVE_ROOT  # a device tree in tests
    interval: float = INTERVAL


def llama_server_fixed(n_threads: int) -> str:
    return (
        f"llama-server keeps the {count(n_threads, 'thread')} it started with (it takes no thread count per "
        "request): lower --threads, or use --engine inprocess"
    )


def guard_note(max_temp_c: float, n_threads: int, switches: bool) -> str:
    """What --max-temp will do, said when a server starts."""
    head = f"--max-temp {max_temp_c:g}: above it"
    if not switches:
        return f"{head} the log says so; {llama_server_fixed(n_threads)}"
    fewer = max(1, n_threads // 2)
    return (
        f"{head} generation moves from {count(n_threads, 'thread')} to {fewer} between tokens, back at "
        f"{max_temp_c - RESUME_MARGIN_C:g} °C"
    )


def thermal_limit(max_temp: str | None, root: str | Path = fs.LIVE_ROOT) -> ThermalLimit | None:
    """--max-temp (and the hidden --watch-root) as given on the command line; None without --max-temp."""
    value = parse_max_temp(max_temp)
    return None if value is None else ThermalLimit(value, Path(root))


@dataclass
class ThermalSwitch:
    to: str  # "fewer" (the CPU passed the limit) | "full" (it cooled to resume_below_c)
    celsius: float
    seconds: float  # since the guard started
    at_token: int | None  # tokens generated in that generation before the switch (None: no engine switched)
    n_threads: int | None  # read back from llama.cpp after the switch (None: the engine cannot switch)
    n_threads_batch: int | None


@dataclass
class ThermalReport:
    max_temp_c: float
    resume_below_c: float
    full_threads: int | None  # the planned count (None: no engine attached)
    fewer_threads: int | None  # while hot (None: the guard cannot change threads, see `reason`)
    sensor: str | None  # the zone read (its type, else its directory name)
    celsius: float | None  # the last reading
    peak_c: float | None
    hot: bool
    switches: list[ThermalSwitch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was said
    reason: str | None = None  # why the guard only warns (llama-server, one thread) or cannot watch


@dataclass
class _Context:
    engine: Any  # engine/inprocess.py's LlamaEngine
    full: int
    full_batch: int
    fewer: int
    hot: bool = False  # what it runs with now


class ThermalGuard:
    """`with ThermalGuard(limit, on_note):` around the work, after `attach` of each engine. on_note is
    called (from the watch's thread, or the generation's) with each thing said."""

    def __init__(self, limit: ThermalLimit, on_note: Callable[[str], None] | None = None) -> None:
        self.limit, self.on_note = limit, on_note
        self.resume_below = limit.max_temp_c - RESUME_MARGIN_C
        self.sensor: str | None = None
        self.celsius: float | None = None
        self.peak: float | None = None
        self.reason: str | None = None  # why it can only warn
        self.unwatched: str | None = None  # why it cannot even watch (no sensor; the watch failed)
        self.switches: list[ThermalSwitch] = []
        self.notes: list[str] = []
        self._zones: list[ThermalZone] | None = None  # the CPU zones read (found by the first reading)
        self._hot = False
        self._said: set[str] = set()
        self._contexts: list[_Context] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()

    # -- engines -----------------------------------------------------------------------------------------
    def attach(self, engine: Any) -> None:
        """Let the guard change this engine's threads between its tokens (the in-process engine; the first
        attached is the one reported). llama-server's count is fixed: the guard warns instead."""
        s = engine.settings
        if getattr(engine, "kind", None) != "inprocess":
            self.warn_only(llama_server_fixed(s.n_threads))
            return
        if s.n_threads <= 1:
            self.warn_only("already on 1 thread: nothing to shed")
            return
        ctx = _Context(engine, s.n_threads, s.n_threads_batch or s.n_threads, max(1, s.n_threads // 2))
        self._contexts.append(ctx)
        engine.between_tokens = lambda n_gen: self._between(ctx, n_gen)

    def warn_only(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason

    def _between(self, ctx: _Context, n_gen: int) -> None:
        """In the generation's thread, before a decode: move to the thread count the temperature asks for."""
        if n_gen == 0 and self._thread is not None:
            self.check()  # a generation starts: a reading of now, not one up to `interval` old
        hot = self._hot
        if hot == ctx.hot:
            return
        n, n_batch = (ctx.fewer, ctx.fewer) if hot else (ctx.full, ctx.full_batch)
        ctx.engine.set_threads(n, n_batch)
        got, got_batch = ctx.engine.thread_counts()
        ctx.hot = hot
        if ctx is self._contexts[0]:
            self._switched(FEWER if hot else FULL, n_gen, got, got_batch)

    # -- readings ----------------------------------------------------------------------------------------
    def check(self) -> None:
        """Read the sensors once and decide hot or cool; with no engine to switch, a change is said here."""
        if self._zones is None:  # the CPU zones, chosen once: a cooler one never stands in for them
            found, reasons = read_thermal(self.limit.root)
            self._zones, zone = cpu_zones(found) or None, hottest_cpu(found)
        else:
            zone, reasons = hottest_cpu(reread(self.limit.root, self._zones)), []
            if zone is None:
                return  # unreadable this once (a driver busy): the state stays as it was
        with self._lock:
            if zone is None or zone.celsius is None:
                if self.sensor is None and self.unwatched is None:
                    why = reasons[0] if reasons else "no thermal zone reads a temperature"
                    self.unwatched = f"no readable CPU temperature ({why})"
                return
            c = zone.celsius
            self.sensor, self.celsius = zone.type or zone.zone, c
            self.peak = c if self.peak is None else max(self.peak, c)
            if not self._hot and c > self.limit.max_temp_c:
                self._hot = True
            elif self._hot and c <= self.resume_below:
                self._hot = False
            else:
                return
            hot = self._hot
        if not self._contexts:
            self._switched(FEWER if hot else FULL, None, None, None)

    def _switched(self, to: str, at_token: int | None, n: int | None, n_batch: int | None) -> None:
        c = self.celsius if self.celsius is not None else 0.0  # set by the reading that decided
        seconds = round(time.monotonic() - self._t0, 2)
        with self._lock:
            self.switches.append(ThermalSwitch(to, c, seconds, at_token, n, n_batch))
            if to in self._said:
                return
            self._said.add(to)
            note = self._note(to, c, n)
            self.notes.append(note)
        if self.on_note is not None:
            self.on_note(note)

    def _note(self, to: str, c: float, n: int | None) -> str:
        limit = f"--max-temp {self.limit.max_temp_c:g}"
        if to == FEWER:
            head = f"thermal: CPU at {c:g} °C, above {limit}"
            if n is None:
                return f"{head}: {self.reason}" if self.reason else head
            full = self._contexts[0].full
            return (
                f"{head}: generating on {count(n, 'thread')} instead of {full} until it cools to "
                f"{self.resume_below:g} °C"
            )
        if n is None:
            return f"thermal: CPU down to {c:g} °C, at or below {self.resume_below:g} °C"
        return f"thermal: CPU down to {c:g} °C: generating on {count(n, 'thread')} again"

    # -- lifetime and reports ----------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.wait(self.limit.interval):
            try:
                self.check()
            except Exception as exc:  # a guard must never end the work it guards
                self.unwatched = f"thermal guard stopped: {type(exc).__name__}: {exc}"
                return

    def __enter__(self) -> ThermalGuard:
        self._t0 = time.monotonic()
        self.check()
        if self.sensor is None:  # nothing to watch: said once, at the start
            note = f"thermal: --max-temp {self.limit.max_temp_c:g} cannot be kept: {self.unwatched}"
            self.notes.append(note)
            if self.on_note is not None:
                self.on_note(note)
            return self
        self._thread = threading.Thread(target=self._loop, name="edgepilot-thermal", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.limit.interval + 1)

    def report(self) -> ThermalReport:
        first = self._contexts[0] if self._contexts else None
        with self._lock:
            return ThermalReport(
                max_temp_c=self.limit.max_temp_c,
                resume_below_c=self.resume_below,
                full_threads=first.full if first else None,
                fewer_threads=first.fewer if first else None,
                sensor=self.sensor,
                celsius=self.celsius,
                peak_c=self.peak,
                hot=self._hot,
                switches=list(self.switches),
                notes=list(self.notes),
                reason=self.unwatched or self.reason,
            )

    def status(self) -> dict[str, Any]:
        """For serve's status: the latest reading, the threads in use now (read back), what was said."""
        first = self._contexts[0] if self._contexts else None
        n_threads = first.engine.thread_counts()[0] if first else None
        with self._lock:
            return {
                "max_temp_c": self.limit.max_temp_c,
                "resume_below_c": self.resume_below,
                "celsius": self.celsius,
                "peak_c": self.peak,
                "hot": self._hot,
                "n_threads": n_threads,
                "switches": len(self.switches),
                "warning": self.notes[-1] if self.notes else None,
                "reason": self.unwatched or self.reason,
            }


def watch_only(limit: ThermalLimit, settings: EngineSettings, on_note: Callable[[str], None]) -> ThermalGuard:
    """A guard for a llama-server started with these settings: it watches and warns."""
    guard = ThermalGuard(limit, on_note)
    guard.warn_only(llama_server_fixed(settings.n_threads))
    return guard


@contextlib.contextmanager
def guarding(
    limit: ThermalLimit | None, engines: list[Any], on_note: Callable[[str], None] | None
) -> Iterator[ThermalGuard | None]:
    """The guard over these engines for the block (None: no --max-temp)."""
    if limit is None:
        yield None
        return
    guard = ThermalGuard(limit, on_note)
    for engine in engines:
        guard.attach(engine)
    try:
        with guard:
            yield guard
    finally:
        for engine in engines:
            if getattr(engine, "kind", None) == "inprocess":
                engine.between_tokens = None
