"""Does llama.cpp's weight repacking pay on this device? The tuned settings measured with and without it.

Repacking re-lays weights for the CPU's fast kernels (ARM dotprod/i8mm, x86 AVX2): usually faster prompt
processing, but a second copy of those weights in memory (next to the mapped file with mmap). When it buys no
speed here, the profile turns it off and the memory goes to the context instead.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot.bench.search import Candidate
from edgepilot.tuned.pinning import pin_process

ROUNDS = 2  # on/off alternated: this machine's speed drifts more within seconds than small effects
PAYS = 1.03  # repacking must be at least 3 % faster in prompt or generation speed to be worth its memory


@dataclass
class RepackTrial:
    repacked_bytes: int  # what the planner predicts llama.cpp repacks for this model on this CPU
    pp_ts: dict[str, float] = field(default_factory=dict)  # "on"/"off" -> median t/s
    tg_ts: dict[str, float] = field(default_factory=dict)
    pays: bool = True
    note: str = ""


def repacked_bytes(path: Path) -> int:
    from edgepilot.plan.requested import RequestedSettings
    from edgepilot.tuned.decide import decide

    plan = decide(path, RequestedSettings(n_ctx=512, repack=True), use_profile=False).plan
    return plan.memory.repack_bytes


# One round: (repack on?) -> (prompt samples, generation samples), t/s, with the tuned settings.
Round = Callable[[bool], tuple[list[float], list[float]]]


def trial_repack(
    path: Path,
    gen: Candidate,
    prompt: Candidate,
    n_prompt: int,
    n_gen: int,
    reps: int,
    verbose: bool = False,
    measure: Round | None = None,
) -> RepackTrial:
    """The tuned generation and prompt settings, one model load per round and setting (in-process unless
    `measure` measures a round another way: llama-bench's, ToolLab.repack_round)."""
    trial = RepackTrial(repacked_bytes(path))
    if trial.repacked_bytes == 0:
        trial.note = "repacking not measured: this CPU repacks none of this model's weights"
        return trial
    if measure is None:

        def measure(repack: bool) -> tuple[list[float], list[float]]:
            return _inprocess_round(path, gen, prompt, n_prompt, n_gen, reps, repack, verbose)

    pp: dict[str, list[float]] = {"on": [], "off": []}
    tg: dict[str, list[float]] = {"on": [], "off": []}
    for _ in range(ROUNDS):
        for label, repack in (("on", True), ("off", False)):
            pp_samples, tg_samples = measure(repack)
            pp[label] += pp_samples
            tg[label] += tg_samples
    trial.pp_ts = {k: round(statistics.median(v), 2) for k, v in pp.items()}
    trial.tg_ts = {k: round(statistics.median(v), 2) for k, v in tg.items()}
    faster = max(trial.pp_ts["on"] / trial.pp_ts["off"], trial.tg_ts["on"] / trial.tg_ts["off"])
    trial.pays = faster >= PAYS
    mib = trial.repacked_bytes / 2**20
    trial.note = (
        f"repacking {'pays' if trial.pays else 'does not pay'} here: pp {trial.pp_ts['on']:.1f} vs "
        f"{trial.pp_ts['off']:.1f} t/s, tg {trial.tg_ts['on']:.1f} vs {trial.tg_ts['off']:.1f} t/s with and "
        f"without it ({mib:.0f} MiB of repacked weights"
        + (")" if trial.pays else ": the profile turns it off and saves that memory)")
    )
    return trial


def _inprocess_round(
    path: Path,
    gen: Candidate,
    prompt: Candidate,
    n_prompt: int,
    n_gen: int,
    reps: int,
    repack: bool,
    verbose: bool,
) -> tuple[list[float], list[float]]:
    from edgepilot.bench.measure import Bencher, bench_settings
    from edgepilot.engine.inprocess import LlamaEngine

    settings = bench_settings(
        n_prompt, n_gen, prompt.n_threads, prompt.n_ubatch, gen.flash_attn, repack=repack
    )
    with LlamaEngine(path, settings, verbose=verbose) as engine:
        bencher = Bencher(engine)
        pin_process(prompt.cpus)
        bencher.set_threads(prompt.n_threads)
        bencher.pp(n_prompt)  # warm-up: the first full batch pays the compute buffer's page faults
        pp = [bencher.pp(n_prompt).ts for _ in range(reps)]
        pin_process(gen.cpus)
        bencher.set_threads(gen.n_threads)
        bencher.tg(1)
        tg = [bencher.tg(n_gen).ts for _ in range(reps)]
    return pp, tg
