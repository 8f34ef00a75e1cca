"""`tune --sustained`: the best few settings of the burst search compared over sustained windows.

A burst lasts seconds; a phone that throttles after minutes can hold more with fewer threads than with every
big core. So after the search, the burst winner and its closest rivals (always one with fewer threads, when
one was measured) generate back to back in windows, taken in turns (a b, b a, ...) so that heat and other
load hit all of them alike, and the setting with the best steady speed (the median of its last third of
windows, as `bench --sustained` reports it) is kept. Within TIE of the best, fewer threads win: the same speed
for less heat and power.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.bench.coresets import set_for_threads
from edgepilot.bench.monitor import Recording, Sensors
from edgepilot.bench.search import Candidate, Search, SearchResult, speedup_over
from edgepilot.bench.sustained import N_CTX, SustainedWindow, decode_until, summarize, window_of
from edgepilot.device import fs
from edgepilot.device.cpusets import cpulist
from edgepilot.words import count

if TYPE_CHECKING:
    from edgepilot.bench.lab import EngineLab
    from edgepilot.bench.request import Progress

MAX_CANDIDATES = 3
TIE = 0.03  # steady speeds this close are one speed: the fewer threads are kept
MAX_WINDOW = 10.0


def default_window(duration: float) -> float:
    """Seconds per window when none is given: about ten windows per setting of three, 2 to 10 s each."""
    return min(MAX_WINDOW, max(2.0, duration / 30))


@dataclass
class SustainedCandidate:
    n_threads: int
    cores: str
    flash_attn: bool
    burst_ts: float  # what the burst search measured for it (tokens/s, generation)
    burst_pick: bool = False  # the burst search's winner
    chosen: bool = False  # kept for its steady speed
    windows: list[SustainedWindow] = field(default_factory=list)
    first_ts: float | None = None  # median of its first third of windows
    steady_ts: float | None = None  # median of its last third
    fell_at_s: float | None = None  # when it fell >10 % below first_ts and stayed there (None: it did not)
    drop_pct: float | None = None  # how far steady_ts is below first_ts


@dataclass
class SustainedTune:
    duration_s: float  # all settings together
    window_s: float
    rounds: int  # windows per setting
    clusters: list[str]  # the CPUs of each cluster, as windows' freq_mhz lists them
    candidates: list[SustainedCandidate] = field(default_factory=list)  # the burst pick first
    why: str | None = None  # one line, when the setting kept is not the burst pick
    partial: bool = False  # stopped by Ctrl-C: the windows measured, nothing chosen
    seconds: float = 0.0

    @property
    def kept(self) -> SustainedCandidate | None:
        return next((c for c in self.candidates if c.chosen), None)


def pick_candidates(search: Search, result: SearchResult) -> list[tuple[Candidate, float]]:
    """The burst winner (with the flash attention chosen), then the fastest other thread counts the search
    measured for generation, at most MAX_CANDIDATES in all; one with fewer threads than the winner is always
    among them when one was measured, even one the scan left behind after one repetition: fewer threads are
    what a hot device may hold better."""
    gen = result.gen
    burst: dict[int, tuple[float, bool]] = {}  # thread count -> (speed, left behind after one repetition)
    for (cand, test), trial in search.cache.items():
        t = cand.n_threads
        if test != "tg" or t == gen.n_threads or cand != search.cand(t):  # the thread sweep's settings only
            continue
        burst[t] = (trial.value, trial.rejected)
    ranked = sorted(burst, key=lambda t: (burst[t][1], -burst[t][0]))
    others = ranked[: MAX_CANDIDATES - 1]
    fewer = [t for t in ranked if t < gen.n_threads]
    if fewer and not any(t < gen.n_threads for t in others):
        others = [*others[: MAX_CANDIDATES - 2], max(fewer, key=lambda t: burst[t][0])]
    picks = [(gen, result.gen_tps)]
    for t in others:
        cand = Candidate(t, set_for_threads(search.sets, t), gen.n_ubatch, gen.flash_attn)
        picks.append((cand, burst[t][0]))
    return picks


def run_sustained_tune(
    lab: EngineLab,
    picks: list[tuple[Candidate, float]],
    phase: SustainedTune,
    progress: Progress,
    root: Path = fs.LIVE_ROOT,
) -> None:
    """Windows of each pick in turns, appended to `phase` as they finish (a Ctrl-C keeps them); the choice is
    made by choose() once all rounds are done."""
    from edgepilot.device.cpu import read_cpu

    groups = [c.cpus for c in read_cpu(root).clusters]
    phase.clusters = [cpulist(g) for g in groups]
    for i, (cand, ts) in enumerate(picks):
        entry = SustainedCandidate(cand.n_threads, cpulist(cand.cpus), cand.flash_attn, round(ts, 2), i == 0)
        phase.candidates.append(entry)
    sensors = Sensors.find(root)
    lab.sensors = None  # no cool-down between windows: the heat is what is measured
    n_ctx = min(N_CTX, max(16, lab.n_prompt, lab.n_gen + 1))  # the lab's context (bench_settings)
    total, done = phase.rounds * len(picks), 0
    t0 = time.perf_counter()
    for r in range(phase.rounds):
        order = list(range(len(picks))) if r % 2 == 0 else list(reversed(range(len(picks))))
        for i in order:
            entry = phase.candidates[i]
            lab.ready(picks[i][0])
            assert lab.engine is not None and lab.bencher is not None
            start = time.perf_counter()
            recording = Recording(sensors).start()
            what = f"{count(entry.n_threads, 'thread')} on {entry.cores} · window {done + 1}/{total}"

            def tick(tokens: int, seconds: float, what: str = what, done: int = done) -> None:
                speed = f" {tokens / seconds:.1f} t/s" if seconds else ""
                progress(f"sustained · {what}{speed}", done, total)

            # each window from an empty context: every setting decodes at the same context lengths
            tokens, seconds, _ = decode_until(
                lab.engine, lab.bencher, start + phase.window_s, n_ctx, n_ctx, tick
            )
            entry.windows.append(window_of(start - t0, tokens, seconds, recording, root, groups))
            done += 1
    phase.seconds = round(time.perf_counter() - t0, 1)


def choose(phase: SustainedTune) -> None:
    """The best steady speed kept (fewer threads within TIE), and why when it is not the burst pick."""
    for c in phase.candidates:
        summarize(c)
    if phase.partial or any(c.steady_ts is None for c in phase.candidates):
        return
    best = max(c.steady_ts or 0.0 for c in phase.candidates)
    close = [c for c in phase.candidates if (c.steady_ts or 0.0) >= best * (1 - TIE)]
    kept = min(close, key=lambda c: (c.n_threads, -(c.steady_ts or 0.0)))
    kept.chosen = True
    pick = phase.candidates[0]
    if kept is pick:
        return
    held = f"{count(kept.n_threads, 'thread')} on {kept.cores} held {kept.steady_ts:.1f} t/s"
    theirs = f"the burst pick, {count(pick.n_threads, 'thread')}, {pick.steady_ts:.1f}"
    if (kept.steady_ts or 0.0) > (pick.steady_ts or 0.0) * (1 + TIE):
        below = 100 * (1 - (pick.steady_ts or 0.0) / pick.burst_ts) if pick.burst_ts else 0.0
        phase.why = f"{held}; {theirs} ({below:.0f} % below its burst): kept for the steady speed"
    else:
        phase.why = f"{held}, within {TIE:.0%} of {theirs}: the same speed with fewer threads"


def apply_choice(
    search: Search, result: SearchResult, phase: SustainedTune, picks: list[tuple[Candidate, float]]
) -> SearchResult:
    """The search's result with the setting kept for generation (the prompt's settings stay the burst's:
    a prompt is processed in seconds, not held for minutes)."""
    kept = phase.kept
    if kept is None or kept.burst_pick:
        return result
    cand = next(p for p, c in zip(picks, phase.candidates, strict=True) if c is kept)[0]
    default = search.cache.get((search.cand(len(search.sets[-1])), "tg"))
    trial = search.cache.get((search.cand(cand.n_threads, cand.flash_attn), "tg")) or search.cache.get(
        (search.cand(cand.n_threads), "tg")
    )
    return replace(result, gen=cand, gen_tps=kept.burst_ts, speedup=speedup_over(trial, default))
