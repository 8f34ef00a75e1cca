"""`edgepilot bench --sustained`: generation back to back for minutes, measured in windows, to see the speed a
device holds once it is hot (or its CPU share is cut), not the speed of a burst.

Each window decodes single tokens as llama-bench's tg test does, on a context reset when it would fill, and
records tokens/s, the CPU temperature (monitor.py), each cluster's current frequency (scaling_cur_freq) and
the battery's draw while it discharges; tokens per joule follow from the draw, the tokens and the time.
"""

from __future__ import annotations

import datetime as dt
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from edgepilot.bench.monitor import Recording, Sensors
from edgepilot.bench.request import Progress
from edgepilot.device import fs
from edgepilot.device.cpu import SYS_CPU, read_cpu
from edgepilot.engine.choice import EngineInfo, choose_engine
from edgepilot.errors import UserError
from edgepilot.tuned.identity import DeviceId, MeasuredModel, device_id, model_id, versions

if TYPE_CHECKING:
    from collections.abc import Callable

    from edgepilot.bench.measure import Bencher
    from edgepilot.engine.inprocess import LlamaEngine

# Tokens in the context before it is reset. Short, and the fills run on across windows: a token's cost grows
# with the context, and a long fill would make the first window of each fill look fast.
N_CTX = 128
FALL = 0.10  # a window this much below the first windows' median counts as the speed having fallen
MIN_WINDOW = 1.0


@dataclass
class SustainedWindow:
    start_s: float  # seconds since the first window began
    seconds: float  # time spent decoding in this window
    tokens: int
    tokens_per_s: float
    temp_c: float | None = None  # the hottest CPU zone read during the window
    freq_mhz: list[int | None] = field(default_factory=list)  # per cluster, as `clusters` lists them
    watts: float | None = None  # the battery's mean draw during the window; None unless it discharged


@dataclass
class SustainedReport:
    model: MeasuredModel
    device: DeviceId
    duration_s: float
    window_s: float
    n_threads: int
    clusters: list[str]  # the CPUs of each cluster, e.g. "0-3"
    windows: list[SustainedWindow] = field(default_factory=list)
    first_ts: float | None = None  # median of the first third of the windows
    steady_ts: float | None = None  # median of the last third
    fell_at_s: float | None = None  # when speed fell to its steady level and stayed there (None: it did not)
    drop_pct: float | None = None  # how far steady_ts is below first_ts
    watts: float | None = None  # mean battery draw over the windows that measured it
    tokens_per_joule: float | None = None  # their tokens ÷ their energy (watts × seconds)
    power_windows: int = 0  # windows with a battery draw
    power_note: str | None = None  # why there is no draw, or only for some windows (None: no battery)
    started: str = ""
    seconds: float = 0.0
    kind: str = "sustained"
    engine: EngineInfo | None = None
    build: dict[str, str] = field(default_factory=dict)
    sensors: list[str] = field(default_factory=list)
    partial: bool = False  # stopped by Ctrl-C: `windows` are the ones measured
    run_id: int | None = None
    db_path: str | None = None
    plot_png: str | None = None  # --plot: the chart written as a PNG


class Windowed(Protocol):
    """A run measured in windows (a sustained bench, one setting of `tune --sustained`) and its summary."""

    windows: list[SustainedWindow]
    first_ts: float | None
    steady_ts: float | None
    fell_at_s: float | None
    drop_pct: float | None


def summarize(report: Windowed) -> None:
    """Steady speed, the fall and when it came, from the windows measured."""
    speeds = [w.tokens_per_s for w in report.windows]
    if not speeds:
        return
    third = max(1, len(speeds) // 3)
    first = statistics.median(speeds[:third])
    steady = statistics.median(speeds[-third:])
    report.first_ts, report.steady_ts = round(first, 3), round(steady, 3)
    report.drop_pct = round((first - steady) / first * 100, 1) if first > 0 else None
    # fallen: from this window to the last, every one >10 % below, and nearer the steady speed than the first
    # when the fall is deeper than that. A dip the speed came back from (another program for a while; windows
    # 3-4 of 10 on a busy machine) is not the device holding a lower speed, nor is a VM's 12 % swing before a
    # fall to a fifth (the swing is 10 % below, yet far from where the speed went).
    below = min(first * (1 - FALL), (first + steady) / 2)
    fallen = len(speeds)
    while fallen > 0 and speeds[fallen - 1] < below:
        fallen -= 1
    report.fell_at_s = report.windows[fallen].start_s if fallen < len(speeds) else None


def power_summary(report: SustainedReport, sensors_note: str | None) -> None:
    """Mean draw and tokens per joule over the windows whose draw was measured (the battery discharging)."""
    measured = [w for w in report.windows if w.watts is not None and w.seconds > 0]
    report.power_windows = len(measured)
    if not measured:
        report.power_note = sensors_note
        return
    joules = sum(w.watts * w.seconds for w in measured)
    seconds = sum(w.seconds for w in measured)
    report.watts = round(joules / seconds, 3)
    report.tokens_per_joule = round(sum(w.tokens for w in measured) / joules, 3) if joules > 0 else None
    if len(measured) < len(report.windows):
        report.power_note = f"power measured in {len(measured)} of {len(report.windows)} windows (plugged in)"


def cluster_freqs(root: Path, clusters: list[list[int]]) -> list[int | None]:
    """Each cluster's current frequency in MHz (its first online CPU that says), None where unreadable."""
    out: list[int | None] = []
    for cpus in clusters:
        mhz = None
        for cpu in cpus:
            khz, _ = fs.read_int(root, f"{SYS_CPU}/cpu{cpu}/cpufreq/scaling_cur_freq")
            if khz is not None:
                mhz = khz // 1000
                break
        out.append(mhz)
    return out


def run_sustained(
    path: Path,
    duration: float,
    window: float,
    n_threads: int | None = None,
    progress: Progress | None = None,
    verbose: bool = False,
    engine: str | None = None,
    root: Path = fs.LIVE_ROOT,
) -> SustainedReport:
    if window < MIN_WINDOW or window > duration:
        raise UserError(f"--window must be between {MIN_WINDOW:g} s and the duration ({duration:g} s)")
    info = choose_engine(engine, tool="llama-bench")
    if info.kind == "tools":
        raise UserError("bench --sustained needs the in-process engine for now (llama-bench: not yet)")
    if n_threads is None:
        from edgepilot.tuned.decide import decide

        n_threads = decide(path).settings.n_threads
    cpu = read_cpu(root)
    groups = [c.cpus for c in cpu.clusters]
    from edgepilot.device.cpusets import cpulist

    sensors = Sensors.find(root)
    report = SustainedReport(
        model=MeasuredModel.of(model_id(path)),
        device=device_id(cpu=cpu),
        duration_s=duration,
        window_s=window,
        n_threads=n_threads,
        clusters=[cpulist(g) for g in groups],
        started=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        engine=info,
        build=versions(),
        sensors=sensors.notes,
    )
    update = progress or (lambda _d, _n, _t: None)
    t_start = time.perf_counter()
    try:
        _measure(path, report, sensors, groups, root, update, verbose)
    except KeyboardInterrupt:
        if not report.windows:
            raise
        report.partial = True
    update("done", 1, 1)
    report.seconds = round(time.perf_counter() - t_start, 2)
    summarize(report)
    power_summary(report, sensors.power_note)
    return report


def _measure(path, report, sensors, groups, root, update, verbose) -> None:
    from edgepilot.bench.measure import Bencher, bench_settings
    from edgepilot.engine.inprocess import LlamaEngine

    n_windows = max(1, round(report.duration_s / report.window_s))
    total = int(report.duration_s)
    with LlamaEngine(path, bench_settings(0, N_CTX, report.n_threads), verbose=verbose) as engine:
        bencher = Bencher(engine)
        bencher.set_threads(report.n_threads)
        report.model = MeasuredModel.of(model_id(path), engine.load.description, engine.load.n_params)
        bencher.tg(1)  # warm-up
        filled = 0  # tokens in the context
        engine.reset()
        t0 = time.perf_counter()
        for i in range(n_windows):
            start = time.perf_counter()
            end = t0 + (i + 1) * report.window_s
            recording = Recording(sensors).start()

            def tick(tokens: int, seconds: float, i: int = i) -> None:
                elapsed = int(time.perf_counter() - t0)
                speed = f"{tokens / seconds:.1f} t/s" if seconds else "…"
                update(f"window {i + 1}/{n_windows} {speed}", min(elapsed, total), total)

            tokens, seconds, filled = decode_until(engine, bencher, end, filled, N_CTX, tick)
            report.windows.append(window_of(start - t0, tokens, seconds, recording, root, groups))


def decode_until(
    engine: LlamaEngine,
    bencher: Bencher,
    end: float,
    filled: int,
    n_ctx: int,
    tick: Callable[[int, float], None],
) -> tuple[int, float, int]:
    """Single tokens decoded back to back until `end` (a time.perf_counter() value), the context reset when
    it would fill. `filled`: tokens already in it. Returns (tokens, seconds decoding, tokens now in it)."""
    from edgepilot.bench.measure import decode_each
    from edgepilot.engine import interrupts

    tokens, seconds = 0, 0.0
    while time.perf_counter() < end:
        interrupts.raise_pending()
        tick(tokens, seconds)
        if filled >= n_ctx - 1:
            engine.reset()
            filled = 0
        n, took = decode_each(engine, bencher._tokens(n_ctx - 1 - filled), end)
        filled += n
        tokens += n
        seconds += took
    return tokens, seconds, filled


def window_of(
    start_s: float, tokens: int, seconds: float, recording: Recording, root: Path, groups: list[list[int]]
) -> SustainedWindow:
    """A finished window: its speed, the hottest CPU zone read during it, each cluster's frequency now, the
    battery's mean draw."""
    reading = recording.stop()
    return SustainedWindow(
        start_s=round(start_s, 2),
        seconds=round(seconds, 3),
        tokens=tokens,
        tokens_per_s=round(tokens / seconds, 3) if seconds else 0.0,
        temp_c=reading.temp_max_c,
        freq_mhz=cluster_freqs(root, groups),
        watts=reading.watts,
    )
