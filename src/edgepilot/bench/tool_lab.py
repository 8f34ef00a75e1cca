"""The tuner's measuring bench on llama.cpp's llama-bench (the tools engine): search.Search's Lab.

Each measurement is one llama-bench run: the model loaded, llama-bench's warm-up (a full prompt, or one
generated token), then the repetitions, on the candidate's CPUs (the child inherits them). A load per
measurement is the price of not holding the model in this process; the page cache keeps reloads short.
A generation run that takes far longer than the best seen so far is stopped: on a phone, threads on
stalled little cores can be 100x slower, and a full run would teach nothing more than its first seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgepilot.bench.lab import SLOW_FACTOR, MeasuringLab
from edgepilot.bench.monitor import cool_down
from edgepilot.bench.search import Candidate
from edgepilot.engine.llama_bench import BenchJob, BenchRun, run_llama_bench
from edgepilot.engine.tool_flags import known_flags

MIN_TIMEOUT = 5.0  # seconds, on top of what a load and warm-up took before


class ToolLab(MeasuringLab):
    def __init__(self, path: Path, tool: Path, *args: Any, **kwargs: Any) -> None:
        super().__init__(path, *args, **kwargs)
        self.tool = tool
        self.best_tg = 0.0
        self.overhead = 0.0  # the longest load + warm-up seen (a run's time outside its repetitions)
        self.reps = 0  # repetitions measured
        self.loads = 0  # llama-bench runs (each loads the model)
        self.stopped = 0  # generation runs stopped for being far slower than the best
        self.state: tuple | None = None
        self.model_info: dict | None = None

    def job(self, cand: Candidate, test: str, reps: int, repack: bool | None = None) -> BenchJob:
        pp = test == "pp"
        return BenchJob(
            model=self.path,
            n_prompt=[self.n_prompt if pp else 0],
            n_gen=[0 if pp else self.n_gen],
            threads=[cand.n_threads],
            reps=reps,
            ubatch=[cand.n_ubatch],
            flash_attn=[cand.flash_attn],
            repack=[self.repack if repack is None else repack],
        )

    def run(self, cand: Candidate, test: str, reps: int, repack: bool | None = None) -> list[float]:
        """`reps` samples (t/s) of one llama-bench run; a stopped generation run gives one bound."""
        timeout = None
        if test == "tg" and self.best_tg:
            timeout = 2 * self.overhead + MIN_TIMEOUT + SLOW_FACTOR * reps * self.n_gen / self.best_tg
        run = run_llama_bench(
            self.tool,
            self.job(cand, test, reps, repack),
            cpus=cand.cpus,
            verbose=self.verbose,
            timeout=timeout,
        )
        self.loads += 1
        if run.timed_out and not run.records:
            self.stopped += 1
            # at most this fast: the repetitions had not finished after this long
            return [reps * self.n_gen / max(run.seconds - self.overhead, 1e-3)]
        rec = run.records[0]
        self._learn(run)
        if self.model_info is None:
            self.model_info = {"type": rec.model_type, "size": rec.model_size, "n_params": rec.model_n_params}
        if test == "tg":
            self.best_tg = max(self.best_tg, *rec.samples_ts)
        return list(rec.samples_ts)

    def _learn(self, run: BenchRun) -> None:
        measured = sum(sum(r.samples_ns) for r in run.records) / 1e9
        self.overhead = max(self.overhead, run.seconds - measured)

    def measure(self, cand: Candidate, test: str, reps: int) -> list[float]:
        if self.on_measure:
            self.on_measure(cand, test)
        state = (cand.n_ubatch, cand.flash_attn, cand.cpus, cand.n_threads)
        if self.state is not None and state != self.state and self.sensors is not None:
            cool_down(self.sensors, self.baseline, self.cooldown)
        self.state = state
        samples = self.run(cand, test, reps)
        self.reps += reps
        return samples

    def can_repack(self) -> bool:
        known = known_flags(self.tool)
        return known is None or "--repack" in known

    def repack_round(
        self, gen: Candidate, prompt: Candidate, reps: int, repack: bool
    ) -> tuple[list[float], list[float]]:
        """Prompt speed with the tuned prompt settings, generation speed with the tuned generation ones."""
        pp = self.run(prompt, "pp", reps, repack)
        tg = self.run(gen, "tg", reps, repack)
        return pp, tg

    def close(self) -> None:
        """Nothing stays loaded between runs."""

    def __enter__(self) -> ToolLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
