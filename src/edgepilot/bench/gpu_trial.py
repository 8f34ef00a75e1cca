"""tune's GPU trial: the tuned CPU settings against a GPU at several layer counts, per phase.

Each layer count is one llama-bench run (`-dev DEVICE -ngl N`) on the CPU set tune chose, prompt processing
and generation both; `-ngl 0` keeps the weights on the CPU while llama.cpp still sends large batches to the
device (op offload), which is how a GPU can win the prompt and lose the generation. Every layer is tried
first: a GPU slower than the CPU there, in both phases, by more than SLOWER, is not measured further (on a
phone, and on a software driver, one run can take minutes). The whole trial has a deadline.

The choice is the setting that answers a turn of tune's sizes soonest (n_prompt / pp + n_gen / tg): a
process has one device setting for both phases.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot.engine.base import EngineError
from edgepilot.engine.llama_bench import BenchJob, run_llama_bench

SLOWER = 2.0  # a GPU this many times slower than the CPU in both phases at every layer is not pursued
DEFAULT_DEADLINE_S = 600.0


@dataclass
class GpuPoint:
    device: str  # "none": the CPU as tune tuned it
    n_gpu_layers: int
    pp_ts: float | None
    tg_ts: float | None
    note: str = ""

    def turn_seconds(self, n_prompt: int, n_gen: int) -> float:
        if not self.pp_ts or not self.tg_ts:
            return float("inf")
        return n_prompt / self.pp_ts + n_gen / self.tg_ts


@dataclass
class GpuTrial:
    device: str
    points: list[GpuPoint]  # the CPU first, then each layer count measured
    chosen: GpuPoint
    best_prompt: GpuPoint
    best_gen: GpuPoint
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def gpu_chosen(self) -> bool:
        return self.chosen.device != "none"


def layer_counts(n_layer: int) -> list[int]:
    """Every layer first (the quickest verdict), then none (op offload only), then a third and two thirds,
    as the field report swept 0, 10, 20, all."""
    every = n_layer + 1
    counts = [every, 0, round(every / 3), round(2 * every / 3)]
    out: list[int] = []
    for c in counts:
        if c not in out:
            out.append(c)
    return out


def _measure(tool: Path, job: BenchJob, cpus: list[int], timeout: float) -> tuple[float | None, float | None]:
    run = run_llama_bench(tool, job, cpus=cpus or None, timeout=max(timeout, 1.0))
    pp = next((r.avg_ts for r in run.records if r.n_prompt and not r.n_gen), None)
    tg = next((r.avg_ts for r in run.records if r.n_gen and not r.n_prompt), None)
    return pp, tg


def trial_gpu(
    path: Path,
    tool: Path,
    device: str,
    n_layer: int,
    cpu: GpuPoint,
    base: BenchJob,
    cpus: list[int],
    n_prompt: int,
    n_gen: int,
    deadline_s: float = DEFAULT_DEADLINE_S,
    on_step: object = None,
) -> GpuTrial:
    """cpu: the tuned CPU settings' figures; base: their llama-bench job (threads, ubatch, flash
    attention)."""
    t0 = time.monotonic()
    points = [cpu]
    notes: list[str] = []
    for ngl in layer_counts(n_layer):
        left = deadline_s - (time.monotonic() - t0)
        if left <= 0:
            notes.append(f"GPU trial stopped at its deadline ({deadline_s:.0f} s); -ngl {ngl} not measured")
            break
        if callable(on_step):
            on_step(f"{device} · -ngl {ngl}")
        job = BenchJob(
            model=path,
            n_prompt=[n_prompt],
            n_gen=[n_gen],
            threads=base.threads[:1],
            reps=base.reps,
            ubatch=base.ubatch[:1],
            flash_attn=base.flash_attn[:1],
            repack=base.repack[:1],
            n_batch=base.n_batch,
            device=device,
            gpu_layers=[ngl],
        )
        try:
            pp, tg = _measure(tool, job, cpus, left)
        except EngineError as exc:
            points.append(GpuPoint(device, ngl, None, None, f"failed: {exc}"))
            notes.append(f"{device} at -ngl {ngl} failed: {exc}")
            break
        points.append(GpuPoint(device, ngl, pp, tg, "" if pp and tg else "stopped at the deadline"))
        if len(points) == 2 and _far_slower(points[1], cpu):
            notes.append(
                f"{device} with every layer is over {SLOWER:g}x slower than the CPU in both phases: "
                "fewer layers were not measured"
            )
            break
    measured = [p for p in points if p.pp_ts and p.tg_ts]
    chosen = min(measured, key=lambda p: p.turn_seconds(n_prompt, n_gen)) if measured else cpu
    best_prompt = max(measured, key=lambda p: p.pp_ts or 0.0) if measured else cpu
    best_gen = max(measured, key=lambda p: p.tg_ts or 0.0) if measured else cpu
    return GpuTrial(device, points, chosen, best_prompt, best_gen, round(time.monotonic() - t0, 1), notes)


def _far_slower(gpu: GpuPoint, cpu: GpuPoint) -> bool:
    if not (gpu.pp_ts and gpu.tg_ts and cpu.pp_ts and cpu.tg_ts):
        return gpu.pp_ts is None and gpu.tg_ts is None
    return gpu.pp_ts * SLOWER < cpu.pp_ts and gpu.tg_ts * SLOWER < cpu.tg_ts


def trial_note(trial: GpuTrial, n_prompt: int, n_gen: int) -> str:
    """One line: what was chosen and why."""
    c = trial.chosen
    cpu_s = trial.points[0].turn_seconds(n_prompt, n_gen)
    turn = f"a turn of {n_prompt}+{n_gen} tokens"
    if not trial.gpu_chosen:
        best = min(trial.points[1:], key=lambda p: p.turn_seconds(n_prompt, n_gen), default=None)
        if best is None or best.turn_seconds(n_prompt, n_gen) == float("inf"):
            return f"{trial.device} tried, nothing measured: the CPU stays"
        gpu_s = best.turn_seconds(n_prompt, n_gen)
        return (
            f"the CPU stays: {turn} takes {cpu_s:.1f} s on it, {gpu_s:.1f} s on {trial.device} at its best "
            f"(-ngl {best.n_gpu_layers})"
        )
    gpu_s = c.turn_seconds(n_prompt, n_gen)
    return f"{trial.device} at -ngl {c.n_gpu_layers}: {turn} in {gpu_s:.1f} s, on the CPU {cpu_s:.1f} s"
