"""`tune --sustained --speculation`: speculation judged on its steady speed, not its burst.

A verify batch of several tokens is more work than one token; a device that throttles after minutes pays for
that work at its hot clock, and a gain measured in a burst can be gone once it is hot. So after the burst
trial (bench/spec_trial.py), each kind of text that kept a candidate generates with it and without it in
windows, taken in turns (a b, b a, ...) on the in-process engine with the tuned settings, back to back with no
cool-down, for half the --sustained time. The steady speed of each is the median of its last third of
windows (as `bench --sustained` reports it); the candidate stays kept only where its steady speed is at least
KEEP_GAIN over plain's, and the profile keeps that steady gain.

    hold_speculation(model, settings, trial, candidates, duration_s, window_s, progress, cpus) -> SpecHold
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgepilot.bench.monitor import Recording, Sensors
from edgepilot.bench.spec_trial import KEEP_GAIN, SpecTrial, candidate_label, prompt_tokens
from edgepilot.bench.sustained import SustainedWindow, summarize, window_of
from edgepilot.device import fs
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.engine.speculation import Speculation
from edgepilot.plan.settings import EngineSettings

MIN_ROUNDS = 3  # a first and a last third


@dataclass
class HeldRun:
    """One kind of text with one candidate ("plain": none), in windows."""

    kind: str
    name: str
    windows: list[SustainedWindow] = field(default_factory=list)
    first_ts: float | None = None
    steady_ts: float | None = None
    fell_at_s: float | None = None
    drop_pct: float | None = None


@dataclass
class SpecHold:
    duration_s: float  # all runs together, as planned
    window_s: float
    rounds: int  # windows per run
    runs: list[HeldRun] = field(default_factory=list)
    seconds: float = 0.0

    def steady(self, kind: str, name: str) -> float | None:
        run = next((r for r in self.runs if r.kind == kind and r.name == name), None)
        return None if run is None else run.steady_ts


def hold_speculation(
    model: Path,
    settings: EngineSettings,
    trial: SpecTrial,
    candidates: dict[str, Speculation],
    duration_s: float,
    window_s: float,
    progress: Callable[[str], None] | None = None,
    cpus: list[int] | None = None,
    root: Path = fs.LIVE_ROOT,
) -> SpecHold | None:
    """Each kind that kept a candidate, with it and plain, in windows taken in turns; then judge_steady
    decides. None when the burst kept nothing (nothing to hold)."""
    from edgepilot.engine.inprocess import LlamaEngine
    from edgepilot.tuned.pinning import pinned

    kept = {kind: k.kept for kind, k in trial.kinds.items() if k.kept}
    if not kept:
        return None
    runs = [HeldRun(kind, name) for kind, name in kept.items() for name in ("plain", name)]
    rounds = max(MIN_ROUNDS, round(duration_s / (window_s * len(runs))))
    hold = SpecHold(duration_s, window_s, rounds, runs)
    say = progress or (lambda _msg: None)
    sensors = Sensors.find(root)
    t0 = time.perf_counter()
    with pinned(cpus), LlamaEngine(model, settings) as engine:
        drafter = _drafter(candidates, kept, settings)
        try:
            prompts = {kind: prompt_tokens(engine, kind) for kind in kept}
            total = rounds * len(runs)
            for r in range(rounds):
                order = runs if r % 2 == 0 else runs[::-1]
                for i, run in enumerate(order):
                    done = r * len(runs) + i + 1
                    say(f"speculation held · {run.kind}, {run.name} · window {done}/{total}")
                    spec = candidates.get(run.name)
                    engine.speculation = spec
                    engine.drafter = drafter if spec is not None and spec.draft is not None else None
                    recording = Recording(sensors).start()
                    start = time.perf_counter()
                    tokens, seconds = _generate_until(
                        engine, prompts[run.kind], trial.n_gen, start + window_s
                    )
                    # no cluster frequencies: the windows compare speeds on one setting's CPUs
                    run.windows.append(window_of(start - t0, tokens, seconds, recording, root, []))
        finally:
            engine.speculation, engine.drafter = None, None
            if drafter is not None:
                drafter.close()
    for run in runs:
        summarize(run)
    hold.seconds = round(time.perf_counter() - t0, 1)
    return hold


def _drafter(candidates: dict[str, Speculation], kept: dict[str, str], settings: EngineSettings) -> Any:
    draft = candidates.get("draft")
    if draft is None or draft.draft is None or "draft" not in kept.values():
        return None
    from edgepilot.engine.draft_decoding import DraftModel

    return DraftModel(draft.draft, settings)


def _generate_until(engine: Any, tokens: list[int], n_gen: int, end: float) -> tuple[int, float]:
    """The kind's answer generated greedily, again and again until `end` (at least once): (tokens, seconds
    generating, the prompt's processing left out). The same answers as the burst trial's."""
    from edgepilot.engine import interrupts

    greedy = SamplerSettings(temperature=0.0)
    n, seconds = 0, 0.0
    while True:
        interrupts.raise_pending()
        gen = engine.generate(tokens, n_gen, sampler=greedy)
        n, seconds = n + gen.n_gen, seconds + gen.gen_seconds
        if time.perf_counter() >= end:
            return n, seconds


def judge_steady(trial: SpecTrial, hold: SpecHold) -> None:
    """Per kind that kept a candidate in the burst: kept still only where its steady speed is KEEP_GAIN over
    plain's (then its gain is the steady one), and why. The trial keeps the hold."""
    trial.hold = hold
    for kind, k in trial.kinds.items():
        if not k.kept:
            continue
        plain, held = hold.steady(kind, "plain"), hold.steady(kind, k.kept)
        if not plain or held is None:
            continue
        c = k.candidates[k.kept]
        label = candidate_label(k.kept, c)
        k.steady_speedup = round(held / plain, 3)
        if k.steady_speedup >= KEEP_GAIN:
            k.why = f"{label} held {k.steady_speedup:.2f}x plain ({c.speedup:.2f}x in a burst): kept"
        else:
            k.kept = None
            k.why = (
                f"{label} {c.speedup:.2f}x plain in a burst, held {k.steady_speedup:.2f}x: "
                "plain kept for the steady speed"
            )


def hold_kept(
    trial: SpecTrial,
    model: Path,
    settings: EngineSettings,
    candidates: dict[str, Speculation],
    sustained_s: float,
    window_s: float,
    say: Callable[[str], None] | None,
    cpus: list[int] | None,
    notes: list[str],
) -> None:
    """tune --sustained: the burst's kept candidates held for half the sustained time and judged on it (a
    note instead when the in-process engine cannot run them)."""
    from edgepilot.engine.base import EngineError
    from edgepilot.errors import UserError

    try:
        hold = hold_speculation(model, settings, trial, candidates, sustained_s / 2, window_s, say, cpus)
    except (EngineError, UserError, OSError) as exc:
        notes.append(f"speculation not held in windows: {exc}; kept on its burst")
        return
    if hold is not None:
        judge_steady(trial, hold)
