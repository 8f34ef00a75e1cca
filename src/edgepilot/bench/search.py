"""The tuning search, independent of how a setting is measured (a real engine, or a speed model in tests).

Order of work, cheapest knowledge first:
1. scan: one repetition of generation speed per thread count, cores filled fastest cluster first (the fastest
   cluster's cores, then the next cluster's ...); stop at the knee: once speed clearly falls (threads now wait
   on slower cores) at a cluster boundary or twice in a row;
2. confirm: the thread counts the scan could not tell from the best get their remaining repetitions,
   interleaved, and the best median wins (a re-check of the winner against its runner-up);
3. prompt threads and cores, where there is a choice: the generation set with its thread count and with all
   its CPUs, then each wider set (the next slower cluster added) while prompt speed still grows: prompt
   processing is compute-bound and ggml hands out matrix chunks dynamically, so slower cores can still add
   speed there (run and serve re-pin the process between the two phases);
4. flash attention on/off and 5. ubatch (prompt only: it does not change single-token decoding), each
   measured in turns against the alternative (drift over a few seconds is as large as their effect).
After the scan a measurement starts with one repetition, and a setting already clearly behind the best is
not repeated further. Thresholds widen with the noise seen so far, so a noisy device is not misread.
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
CLAIM_REPS = 3  # a speed-up is claimed from medians of at least this many repetitions on both sides


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
        """The mean of the faster half of the repetitions: other load and hiccups only ever slow a run down,
        so the slow ones say least about the setting itself."""
        if not self.samples:
            return 0.0
        fast = sorted(self.samples, reverse=True)[: (len(self.samples) + 1) // 2]
        return statistics.fmean(fast)


class Lab(Protocol):
    def measure(self, cand: Candidate, test: str, reps: int) -> list[float]:
        """`reps` samples (tokens per second) of test "pp" or "tg" with this candidate's settings."""


@dataclass
class SearchConfig:
    reps: int = 3
    ubatches: tuple[int, ...] = UBATCH_CANDIDATES  # largest first; only those <= n_prompt matter
    knee: float = 0.05  # the scan stops once speed falls this much below the best (at least `reject`)
    reject: float = 0.10  # one repetition this much below the best: no more repetitions
    tie: float = 0.02  # differences below this are noise: prefer the cheaper/smaller setting


@dataclass
class SearchResult:
    gen: Candidate
    gen_tps: float
    prompt: Candidate
    prompt_tps: float
    trials: list[Trial]
    sets: list[tuple[int, ...]]
    knee_at: int | None  # index into sets of the core set in which the scan stopped at the knee
    default_tg: float | None  # all cores, all threads (llama.cpp's default on ARM): its median, if measured
    notes: list[str] = field(default_factory=list)
    default_reps: int = 0  # the repetitions of the default behind default_tg
    speedup: float | None = None  # the chosen generation settings over the default (speedup_over)


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
        self._record(trial)
        self.cache[(cand, test)] = trial
        return trial.value

    def cand(
        self, t: int, fa: bool = False, ub: int | None = None, cpus: tuple[int, ...] | None = None
    ) -> Candidate:
        return Candidate(t, cpus or set_for_threads(self.sets, t), ub or self.base_ub, fa)

    # -- the search -----------------------------------------------------------------------------------------
    def run(self) -> SearchResult:
        scan, knee_at = self._scan()
        t_gen = self._confirm(scan)
        gen_set = set_for_threads(self.sets, t_gen)
        t_batch, prompt_set = self._prompt_threads(t_gen, gen_set, fa=False)
        fa, gen_tps = self._flash_attn(t_gen, t_batch, prompt_set)
        ubatch = self._ubatch(t_batch, fa, prompt_set)
        prompt = Candidate(t_batch, prompt_set, ubatch, fa)
        default = self.cache.get((self.cand(len(self.sets[-1])), "tg"))  # llama.cpp's default on ARM
        chosen = self.cache.get((self.cand(t_gen, fa), "tg"))
        measured = default.samples if default is not None else []
        return SearchResult(
            gen=Candidate(t_gen, gen_set, ubatch, fa),
            gen_tps=gen_tps,
            prompt=prompt,
            prompt_tps=self.eval(prompt, "pp", "final"),
            trials=self.trials,
            sets=self.sets,
            knee_at=knee_at,
            default_tg=statistics.median(measured) if measured else None,
            default_reps=len(measured),
            speedup=speedup_over(chosen, default),
        )

    def _scan(self) -> tuple[dict[int, float], int | None]:
        """1. One tg repetition per thread count, fastest cores first, until the knee.

        Returns the speeds and, if the scan stopped early, the index of the core set it stopped in."""
        bounds = {len(cpus) for cpus in self.sets}
        drop = max(self.cfg.reject, 2 * self.cfg.knee)  # one repetition: only a clear fall counts
        speeds: dict[int, float] = {}
        falls = 0
        for t in range(1, len(self.sets[-1]) + 1):
            cand = self.cand(t)
            speeds[t] = self.lab.measure(cand, "tg", 1)[0]
            self._record(Trial(cand, "tg", [speeds[t]], "scan"))
            falls = falls + 1 if speeds[t] < max(speeds.values()) * (1 - drop) else 0
            if falls >= 2 or (falls and t in bounds and t < len(self.sets[-1])):
                return speeds, self.sets.index(set_for_threads(self.sets, t))
        return speeds, None

    def _confirm(self, scan: dict[int, float]) -> int:
        """2. Complete the repetitions of every thread count the scan could not tell from the best
        (interleaved, so drift hits all alike); the best median wins."""
        top = max(scan.values())
        contenders = sorted((t for t, v in scan.items() if v >= top * (1 - self.cfg.reject)), key=scan.get)
        contenders = contenders[-3:]  # the three fastest at most
        for trial in self.trials:  # the others stay at their one repetition: clearly behind
            if trial.phase == "scan":
                trial.rejected = trial.candidate.n_threads not in contenders
                self.cache[(trial.candidate, "tg")] = trial
        if len(contenders) == 1:  # nothing to tell apart
            return contenders[0]
        samples = {t: [scan[t]] for t in contenders}
        for i in range(self.cfg.reps - 1):
            for t in contenders if i % 2 == 0 else reversed(contenders):
                samples[t] += self.lab.measure(self.cand(t), "tg", 1)
        for t in contenders:
            trial = Trial(self.cand(t), "tg", samples[t], "confirm")
            self._record(trial)
            self.cache[(trial.candidate, "tg")] = trial
        trials = {t: self.cache[(self.cand(t), "tg")] for t in contenders}
        return max(contenders, key=lambda t: trials[t].value)

    def _record(self, trial: Trial) -> None:
        self.trials.append(trial)
        if self.on_trial:
            self.on_trial(trial)

    def _flash_attn(self, t_gen: int, t_batch: int, cpus: tuple[int, ...]) -> tuple[bool, float]:
        """4. Flash attention on or off. Its effect, a few per cent either way, is the size of what a busy or
        throttling device drifts over a few seconds: so on and off are measured alternately (the lab keeps
        both contexts) and compared on those samples alone. Generation decides beyond `tie`. In a tie it is
        on unless prompt speed, measured the same way, clearly suffers: flash attention never materializes
        the context x heads score matrix (less compute memory at long contexts) and allows a quantized V."""
        tg_on, tg_off = self._alternate(self.cand(t_gen, True), self.cand(t_gen), "tg")
        d_tg = tg_on / tg_off - 1
        if abs(d_tg) > self.cfg.tie:
            on = d_tg > 0
        else:
            pp_on, pp_off = self._alternate(
                self.cand(t_batch, True, cpus=cpus), self.cand(t_batch, cpus=cpus), "pp", rounds=2
            )
            on = pp_on >= pp_off * (1 - self.margin(self.cfg.tie))
        return on, (tg_on if on else tg_off)

    def _alternate(
        self, a: Candidate, b: Candidate, test: str, phase: str = "flash-attn", rounds: int | None = None
    ) -> tuple[float, float]:
        """Repetitions of a and b in turns (a b, b a, a b ...): drift hits both alike."""
        samples: dict[Candidate, list[float]] = {a: [], b: []}
        for i in range(rounds or self.cfg.reps):
            for cand in (a, b) if i % 2 == 0 else (b, a):
                samples[cand] += self.lab.measure(cand, test, 1)
        trials = [Trial(cand, test, samples[cand], phase) for cand in (a, b)]
        for trial in trials:
            self._record(trial)
            self.cache[(trial.candidate, test)] = trial
        return trials[0].value, trials[1].value

    def _ubatch(self, t_batch: int, fa: bool, cpus: tuple[int, ...]) -> int:
        """5. ubatch, largest first: each smaller one against the best so far, measured in turns (the lab
        keeps both contexts) so drift cannot pick one; smaller ones that fall behind end it. A smaller one
        within 1 % is preferred (less compute memory; the planner shrinks it further if memory is short)."""
        best = self.base_ub
        for ub in self.cfg.ubatches[1:]:
            new, old = self._alternate(
                self.cand(t_batch, fa, ub, cpus), self.cand(t_batch, fa, best, cpus), "pp", "ubatch", rounds=2
            )
            if new >= old * 0.99:
                best = ub
            elif new < old * (1 - self.margin(self.cfg.tie)):
                break
        return best

    def _prompt_threads(self, t_gen: int, gen_set: tuple[int, ...], fa: bool) -> tuple[int, tuple[int, ...]]:
        """3. Prompt threads and cores, when there is a choice. The generation thread count is measured first
        (a hopeless full set is then stopped after one repetition); a wider set must beat the best so far by
        more than noise (fewer cores: less heat), and the first one that does not ends the walk."""
        tries = [(len(gen_set), gen_set)] if t_gen < len(gen_set) else []
        tries += [(len(s), s) for s in self.sets[self.sets.index(gen_set) + 1 :]]
        if not tries:
            return t_gen, gen_set
        best = (t_gen, gen_set, self.eval(self.cand(t_gen, fa, cpus=gen_set), "pp", "prompt-threads"))
        for t, cpus in tries:
            v = self.eval(self.cand(t, fa, cpus=cpus), "pp", "prompt-threads", best[2])
            wider, margin = cpus != gen_set, self.margin(self.cfg.tie)
            if v > best[2] * (1 + margin if wider else 1):
                best = (t, cpus, v)
            elif wider or v < best[2] * (1 - margin):
                break
        return best[0], best[1]


def speedup_over(chosen: Trial | None, default: Trial | None) -> float | None:
    """The chosen settings' generation speed over the default's, as a ratio of medians, or None when either
    has fewer than CLAIM_REPS repetitions: the scan measures the default once, and one run slowed by another
    job (0.33 t/s where the others make 100) would make a ratio of hundreds out of nothing."""
    if chosen is None or default is None or min(len(chosen.samples), len(default.samples)) < CLAIM_REPS:
        return None
    base = statistics.median(default.samples)
    return statistics.median(chosen.samples) / base if base > 0 else None


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
