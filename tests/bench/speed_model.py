"""A speed model of llama.cpp on a big.LITTLE CPU, standing in for real measurements in the search tests only.

Generation: the work of a token is split evenly over the threads and every thread waits at each barrier, so a
token takes as long as the slowest used core needs for its share (or as long as memory needs to stream the
weights, whichever is longer), plus a synchronisation cost per thread. Threads go to the fastest cores of the
allowed set; more threads than CPUs time-share. Prompt processing is compute-bound and chunked dynamically, so
every core adds its speed. Numbers are relative; only the shape matters.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from edgepilot.bench.search import Candidate
from edgepilot.device.cpu import CpuFacts

# The device trees with more than one core type.
BIG_LITTLE = [
    "sd8gen2-xiaomi13pro",
    "rk3588-orangepi5plus",
    "pixel6a-tensor-g1",
    "exynos990-galaxy-s20",
    "redmi-note8-termux32",
    "xperia10ii-sd665",
]
IPC = {"prime": 1.3, "performance": 1.0, "uniform": 1.0, "efficiency": 0.35}
PER_CORE_BW = {"prime": 9.0, "performance": 7.0, "uniform": 7.0, "efficiency": 2.5}  # GB/s


@dataclass
class SpeedModel:
    speed: dict[int, float]  # relative compute speed per CPU
    bw: dict[int, float]  # bandwidth one core can pull, GB/s
    total_bw: float = 25.0
    weights_gb: float = 0.6
    work: float = 0.25  # compute per token, in "speed x seconds"
    sync: float = 0.0006  # seconds per thread per token
    noise: float = 0.0
    seed: int = 0
    calls: list[tuple[Candidate, str, int]] = field(default_factory=list)

    @classmethod
    def for_cpu(cls, cpu: CpuFacts, **kw) -> SpeedModel:
        speed, bw = {}, {}
        for cl in cpu.clusters:
            for c in cl.cpus:
                speed[c] = (cl.max_mhz or 2000) / 1000 * IPC.get(cl.kind, 1.0)
                bw[c] = PER_CORE_BW.get(cl.kind, 5.0)
        return cls(speed, bw, **kw)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def _used(self, cand: Candidate) -> list[int]:
        return sorted(cand.cpus, key=lambda c: -self.speed[c])[: cand.n_threads]

    def true_tg(self, cand: Candidate) -> float:
        used = self._used(cand)
        share = max(1.0, cand.n_threads / len(cand.cpus))  # time-sharing when oversubscribed
        compute = self.work / (cand.n_threads * min(self.speed[c] for c in used)) * share * (share**0.5)
        memory = self.weights_gb / min(self.total_bw, sum(self.bw[c] for c in used))
        t = max(compute, memory) + self.sync * cand.n_threads
        return (1 / t) * (1.03 if cand.flash_attn else 1.0)

    def true_pp(self, cand: Candidate) -> float:
        used = self._used(cand)
        share = max(1.0, cand.n_threads / len(cand.cpus))
        rate = sum(self.speed[c] for c in used) * 40 / share - self.sync * 1e4 * cand.n_threads
        ub = cand.n_ubatch
        return rate * (ub / (ub + 48)) * (1.05 if cand.flash_attn else 1.0)

    def measure(self, cand: Candidate, test: str, reps: int) -> list[float]:
        self.calls.append((cand, test, reps))
        value = self.true_tg(cand) if test == "tg" else self.true_pp(cand)
        return [value * (1 + self.rng.gauss(0, self.noise)) for _ in range(reps)]

    @property
    def reps(self) -> int:
        return sum(r for _, _, r in self.calls)
