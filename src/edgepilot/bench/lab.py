"""The real measuring bench for the tuner: the model loaded once, a fresh context when ubatch or flash
attention change, the process pinned per candidate, threads switched on the live context, a warm-up after
every change."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from edgepilot.bench.monitor import Sensors, cool_down
from edgepilot.bench.search import Candidate
from edgepilot.tuned.pinning import allowed_cpus, pin_process

WARMUP_PROMPT = 32
# A tg repetition may take at most this many times the best tg seen so far (phones: threads on stalled little
# cores can be 100x slower; a full repetition would take minutes and teach nothing more).
SLOW_FACTOR = 8.0
MIN_TG_SECONDS = 2.0
FIRST_TG_SECONDS = 8.0  # before any reference: enough tokens for a rate even on a slow phone


class MeasuringLab:
    """What every lab the tuner drives is set up with (the model, the test sizes, how to measure)."""

    def __init__(
        self,
        path: Path,
        n_prompt: int,
        n_gen: int,
        verbose: bool = False,
        cooldown: float = 0.0,
        on_measure: Callable[[Candidate, str], None] | None = None,
        repack: bool = True,
    ) -> None:
        self.path = path
        self.n_prompt = n_prompt
        self.n_gen = n_gen
        self.verbose = verbose
        self.cooldown = cooldown
        self.on_measure = on_measure
        self.repack = repack
        self.sensors = Sensors.find() if cooldown else None
        self.baseline = self.sensors.temperature() if self.sensors else None


class EngineLab(MeasuringLab):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.engine = None
        self.bencher = None
        self.loaded: tuple[int, bool] | None = None
        self.pinned_to: tuple[int, ...] | None = None
        self.state: tuple | None = None
        self.best_tg = 0.0
        self.reps = 0  # repetitions measured (warm-ups not counted)
        self.loads = 0  # model loads
        self.contexts = 0  # fresh contexts on the loaded model (ubatch / flash attention switches)
        self.cold = False  # the current context has not run a full-size batch yet
        self.original_cpus = allowed_cpus()
        self.model_info: dict | None = None

    def _ensure(self, cand: Candidate) -> None:
        from edgepilot.bench.measure import Bencher, bench_settings
        from edgepilot.engine.inprocess import LlamaEngine

        key = (cand.n_ubatch, cand.flash_attn)
        if key != self.loaded:
            settings = bench_settings(
                self.n_prompt, self.n_gen, cand.n_threads, cand.n_ubatch, cand.flash_attn, repack=self.repack
            )
            if self.engine is None:
                self.engine = LlamaEngine(self.path, settings, verbose=self.verbose)
                self.bencher = Bencher(self.engine)
                self.loads += 1
                self.cold = True
            else:
                # the previous context stays parked: flash attention on/off is compared back and forth
                self.cold = self.engine.reconfigure(settings, park=True)
                self.contexts += int(self.cold)
            self.bencher.threads = cand.n_threads
            self.loaded = key
            if self.model_info is None:
                load = self.engine.load
                self.model_info = {
                    "type": load.description,
                    "size": load.model_bytes,
                    "n_params": load.n_params,
                }
        if cand.cpus != self.pinned_to:
            pin_process(cand.cpus)
            self.pinned_to = cand.cpus
        self.bencher.set_threads(cand.n_threads)
        state = (key, cand.cpus, cand.n_threads)
        if state != self.state:
            if self.state is not None and self.sensors is not None:
                cool_down(self.sensors, self.baseline, self.cooldown)
            # A new context's compute buffer is untouched memory: the first full-size prompt pays its page
            # faults (5-15 % of a pp512 here), enough to get a good setting rejected after one repetition.
            short = min(WARMUP_PROMPT, self.n_prompt) or WARMUP_PROMPT
            self.bencher.pp(self.n_prompt if self.cold else short)
            self.bencher.tg(1)
            self.cold = False
            self.state = state

    def ready(self, cand: Candidate) -> None:
        """The model loaded, the process pinned and the threads set for cand, warmed up: as measure() does
        before its repetitions (tune --sustained decodes its own windows after this)."""
        self._ensure(cand)

    def measure(self, cand: Candidate, test: str, reps: int) -> list[float]:
        if self.on_measure:
            self.on_measure(cand, test)
        self._ensure(cand)
        samples = []
        for _ in range(reps):
            if test == "pp":
                samples.append(self.bencher.pp(self.n_prompt).ts)
            else:
                limit = FIRST_TG_SECONDS
                if self.best_tg:
                    limit = max(MIN_TG_SECONDS, SLOW_FACTOR * self.n_gen / self.best_tg)
                ts = self.bencher.tg(self.n_gen, max_seconds=limit).ts
                self.best_tg = max(self.best_tg, ts)
                samples.append(ts)
            self.reps += 1
        return samples

    def close_engine(self) -> None:
        if self.engine is not None:
            self.engine.close()
        self.engine = self.bencher = None
        self.loaded = self.state = None

    def close(self) -> None:
        self.close_engine()
        if self.pinned_to is not None:
            pin_process(self.original_cpus)
            self.pinned_to = None

    def __enter__(self) -> EngineLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
