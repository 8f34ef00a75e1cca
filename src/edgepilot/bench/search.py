"""The tuning search, independent of how a setting is measured (a real engine, or a speed model in tests).

Order of work, cheapest knowledge first:
1. generation speed at each cluster boundary, fastest cluster first (its cores, then + the next cluster ...);
   stop at the knee: the first boundary clearly slower than the best so far (threads now wait on slow cores);
2. bracket search for the best thread count between the neighbouring boundaries (generation speed is taken
   as unimodal in the thread count when cores are filled fastest first);
3. prompt threads within the winning core set (one process affinity serves both phases);
4. flash attention on/off, 5. ubatch (prompt only: ubatch does not change single-token decoding);
6. re-check: if the runner-up came within a few percent, measure both again, interleaved.
A measurement starts with one repetition; a setting already clearly behind the best is not repeated further.
Thresholds widen with the noise seen so far (the spread of repetitions), so a noisy device is not misread.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from edgepilot.bench.coresets import set_for_threads

UBATCH_CANDIDATES = (512, 256, 128)  # largest first: 512 is llama.cpp's default
MAX_MARGIN = 0.15


@dataclass(frozen=True)
class Candidate:
    n_threads: int
    cpus: tuple[int, ...]
    n_ubatch: int = 512
    flash_attn: bool = False


@dataclass
class Trial:
    candidate: Candidate
    test: str  # "pp" | "tg"
    samples: list[float]  # tokens per second, one per repetition
    phase: str
    rejected: bool = False  # stopped after one repetition: clearly behind the best

    @property
    def value(self) -> float:
        return statistics.median(self.samples) if self.samples else 0.0


class Lab(Protocol):
    def measure(self, cand: Candidate, test: str, reps: int) -> list[float]:
        """`reps` samples (tokens per second) of test "pp" or "tg" with this candidate's settings."""


@dataclass
class SearchConfig:
    reps: int = 3
    ubatches: tuple[int, ...] = UBATCH_CANDIDATES  # largest first; only those <= n_prompt matter
    knee: float = 0.03  # a boundary this much below the best ends the boundary scan
    reject: float = 0.10  # one repetition this much below the best: no more repetitions
    tie: float = 0.02  # differences below this are noise: prefer the cheaper/smaller setting
    recheck: float = 0.03  # runner-up within this of the winner: measure both again


@dataclass
class SearchResult:
    gen: Candidate
    gen_tps: float
    prompt: Candidate
    prompt_tps: float
    trials: list[Trial]
    sets: list[tuple[int, ...]]
    knee_at: int | None  # index into sets of the boundary that ended the scan
    default_tg: float | None  # all cores, all threads (llama.cpp's default on ARM) if measured
    notes: list[str] = field(default_factory=list)


class Search:
    def __init__(
        self,
        sets: list[tuple[int, ...]],
        lab: Lab,
        config: SearchConfig | None = None,
        on_trial: Callable[[Trial], None] | None = None,
    ) -> None:
        if not sets:
            raise ValueError("no CPU set to tune over")
        self.sets = sets
        self.lab = lab
        self.cfg = config or SearchConfig()
        self.trials: list[Trial] = []
        self.cache: dict[tuple[Candidate, str], Trial] = {}
        self.on_trial = on_trial
        self.base_ub = self.cfg.ubatches[0]

    # -- measuring ------------------------------------------------------------------------------------------
    def noise(self) -> float:
        """Relative spread of one repetition (median over the trials measured in full so far)."""
        spreads = [
            statistics.stdev(t.samples) / statistics.fmean(t.samples)
            for t in self.trials
            if len(t.samples) > 1 and statistics.fmean(t.samples) > 0
        ]
        return statistics.median(spreads) if spreads else 0.0

    def margin(self, floor: float) -> float:
        """A difference between two medians of `reps` repetitions that noise alone is unlikely to make
        (capped: on a machine that noisy, a 15 % difference is still worth acting on)."""
        return min(max(floor, 2 * self.noise() / math.sqrt(self.cfg.reps)), MAX_MARGIN)

    def eval(
        self, cand: Candidate, test: str, phase: str, best: float | None = None, reps: int | None = None
    ) -> float:
        hit = self.cache.get((cand, test))
        if hit is not None and not hit.rejected:
            return hit.value
        reps = reps or self.cfg.reps
        samples = self.lab.measure(cand, test, 1)
        reject = min(max(self.cfg.reject, 3 * self.noise()), 2 * MAX_MARGIN)
        rejected = best is not None and statistics.median(samples) < best * (1 - reject)
        if not rejected and reps > 1:
            samples += self.lab.measure(cand, test, reps - 1)
        trial = Trial(cand, test, samples, phase, rejected)
        self.trials.append(trial)
        self.cache[(cand, test)] = trial
        if self.on_trial:
            self.on_trial(trial)
        return trial.value

    def cand(
        self, t: int, fa: bool = False, ub: int | None = None, cpus: tuple[int, ...] | None = None
    ) -> Candidate:
        return Candidate(t, cpus or set_for_threads(self.sets, t), ub or self.base_ub, fa)

    # -- the search -----------------------------------------------------------------------------------------
    def run(self) -> SearchResult:
        tg: dict[int, float] = {}  # generation t/s by thread count (cores filled fastest first)
        best_j, knee_at = self._boundaries(tg)
        t_gen = self._bracket(tg, best_j)
        others = sorted(((v, t) for t, v in tg.items() if t != t_gen), reverse=True)
        close = others and others[0][0] >= tg[t_gen] * (1 - self.margin(self.cfg.recheck))
        runner_up = others[0][1] if close else None

        gen_set = set_for_threads(self.sets, t_gen)
        t_batch, pp_best = self._prompt_threads(t_gen, gen_set, fa=False)
        fa, gen_tps, pp_best = self._flash_attn(t_gen, tg[t_gen], t_batch, pp_best, gen_set)
        ubatch = self._ubatch(t_batch, fa, gen_set, pp_best)

        if runner_up is not None:  # 6. a close runner-up: measure both again, interleaved
            a, b = self.cand(t_gen, fa), self.cand(runner_up, fa)
            va, vb = self._interleaved(a, b)
            gen_tps = max(va, vb)
            if vb > va:
                t_gen, gen_set = runner_up, b.cpus
                if set(b.cpus) != set(a.cpus):
                    t_batch, _ = self._prompt_threads(t_gen, gen_set, fa)

        prompt = Candidate(t_batch, gen_set, ubatch, fa)
        default = self.cache.get((self.cand(len(self.sets[-1])), "tg"))
        return SearchResult(
            gen=Candidate(t_gen, gen_set, ubatch, fa),
            gen_tps=gen_tps,
            prompt=prompt,
            prompt_tps=self.eval(prompt, "pp", "final"),
            trials=self.trials,
            sets=self.sets,
            knee_at=knee_at,
            default_tg=default.value if default is not None else None,
        )

    def _boundaries(self, tg: dict[int, float]) -> tuple[int, int | None]:
        """1. Each cluster boundary, fastest cluster first, until one is clearly slower than the best."""
        bounds = [len(s) for s in self.sets]
        best_j = 0
        for j, b in enumerate(bounds):
            best = tg[bounds[best_j]] if tg else None
            tg[b] = self.eval(self.cand(b), "tg", "boundary", best)
            if tg[b] > tg[bounds[best_j]]:
                best_j = j
            elif tg[b] < tg[bounds[best_j]] * (1 - self.margin(self.cfg.knee)):
                return best_j, j
        return best_j, None

    def _bracket(self, tg: dict[int, float], best_j: int) -> int:
        """2. The best thread count between the best boundary's neighbours (each probe halves a side)."""
        bounds = [len(s) for s in self.sets]
        lo = bounds[best_j - 1] if best_j > 0 else 0
        hi = bounds[best_j + 1] if best_j + 1 < len(bounds) else bounds[-1] + 1
        mid = bounds[best_j]
        while mid - lo > 1 or hi - mid > 1:
            x = (mid + hi) // 2 if hi - mid >= mid - lo else (lo + mid + 1) // 2
            tg[x] = self.eval(self.cand(x), "tg", "threads", tg[mid])
            if tg[x] > tg[mid]:
                lo, mid, hi = (mid, x, hi) if x > mid else (lo, x, mid)
            elif x > mid:
                hi = x
            else:
                lo = x
        return mid

    def _flash_attn(
        self, t_gen: int, tg_off: float, t_batch: int, pp_off: float, cpus: tuple[int, ...]
    ) -> tuple[bool, float, float]:
        """4. Flash attention on or off: generation decides; within noise, the sum with prompt speed does."""
        tg_on = self.eval(self.cand(t_gen, True), "tg", "flash-attn", tg_off)
        pp_on = self.eval(self.cand(t_batch, True, cpus=cpus), "pp", "flash-attn", pp_off)
        noise = self.margin(self.cfg.tie)
        d_tg, d_pp = tg_on / tg_off - 1, pp_on / pp_off - 1
        on = d_tg > noise or (d_tg >= -noise and d_tg + d_pp > 0)
        return on, (tg_on if on else tg_off), (pp_on if on else pp_off)

    def _ubatch(self, t_batch: int, fa: bool, cpus: tuple[int, ...], pp_base: float) -> int:
        """5. ubatch, largest first, until smaller ones fall behind. The fastest wins; a smaller one within
        1 % of it is preferred (less compute memory; the planner shrinks it further if memory is short)."""
        speed = {self.base_ub: pp_base}
        for ub in self.cfg.ubatches[1:]:
            speed[ub] = self.eval(self.cand(t_batch, fa, ub, cpus), "pp", "ubatch", max(speed.values()))
            if speed[ub] < max(speed.values()) * (1 - self.margin(self.cfg.tie)):
                break
        top = max(speed.values())
        return min(u for u, v in speed.items() if v >= top * 0.99)

    def _prompt_threads(self, t_gen: int, cpus: tuple[int, ...], fa: bool) -> tuple[int, float]:
        """Prompt processing is compute-bound: all CPUs of the set usually win; check the generation count."""
        full = len(cpus)
        v_full = self.eval(self.cand(full, fa, cpus=cpus), "pp", "prompt-threads")
        if t_gen == full:
            return full, v_full
        v_gen = self.eval(self.cand(t_gen, fa, cpus=cpus), "pp", "prompt-threads", v_full)
        return (t_gen, v_gen) if v_gen > v_full else (full, v_full)

    def _interleaved(self, a: Candidate, b: Candidate) -> tuple[float, float]:
        sa: list[float] = []
        sb: list[float] = []
        for i in range(self.cfg.reps):
            first, second = (a, b) if i % 2 == 0 else (b, a)
            for c in (first, second):
                (sa if c == a else sb).extend(self.lab.measure(c, "tg", 1))
        for c, s in ((a, sa), (b, sb)):
            trial = Trial(c, "tg", s, "re-check")
            self.trials.append(trial)
            if self.on_trial:
                self.on_trial(trial)
        return statistics.median(sa), statistics.median(sb)


def exhaustive(
    sets: list[tuple[int, ...]],
    lab: Lab,
    reps: int,
    ubatches: tuple[int, ...],
    on_trial: Callable[[Trial], None] | None = None,
) -> list[Trial]:
    """Every thread count on every core set, every ubatch, flash attention off and on: pp and tg each.

    The baseline tune is judged against; ordered so a real lab reloads the model once per (ubatch, fa).
    """
    trials: list[Trial] = []
    for ub in ubatches:
        for fa in (False, True):
            for cpus in sets:
                for t in range(1, len(cpus) + 1):
                    cand = Candidate(t, cpus, ub, fa)
                    for test in ("pp", "tg"):
                        trial = Trial(cand, test, lab.measure(cand, test, reps), "exhaustive")
                        trials.append(trial)
                        if on_trial:
                            on_trial(trial)
    return trials


def ubatch_candidates(n_prompt: int) -> tuple[int, ...]:
    """llama.cpp's default first, then the smaller ones a prompt of n_prompt tokens can tell apart."""
    default, *smaller = UBATCH_CANDIDATES
    return (default, *(u for u in smaller if u <= n_prompt))
