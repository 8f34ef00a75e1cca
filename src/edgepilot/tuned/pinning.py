"""Pin this process to a CPU set, the way that works on every Linux and Android kernel.

llama.cpp's own --cpu-mask was a silent no-op on Android until mid-2026, but a thread's affinity is inherited
by the threads it creates. sched_setaffinity(0, ...) only moves the calling thread, and llama-cpp-python's
ggml is built with OpenMP, whose worker pool outlives each decode: so every existing thread of the process is
moved (/proc/self/task) and the ones created later inherit the calling thread's set.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator

from edgepilot.device.cpusets import cpulist
from edgepilot.device.process import allowed_cpus
from edgepilot.errors import UserError

TASKS = "/proc/self/task"


def can_pin() -> bool:
    return hasattr(os, "sched_setaffinity")


def _thread_ids() -> list[int]:
    try:
        return [int(name) for name in os.listdir(TASKS) if name.isdigit()]
    except OSError:
        return []


def pin_process(cpus: Iterable[int]) -> list[int]:
    """Restrict the whole process (all its threads) to `cpus`; returns the previous set of the caller."""
    wanted = sorted(set(cpus))
    if not wanted:
        raise UserError("cannot pin to an empty CPU set")
    previous = allowed_cpus()
    if not can_pin():
        return previous
    try:
        os.sched_setaffinity(0, wanted)
    except OSError as exc:
        raise UserError(
            f"cannot pin to CPUs {cpulist(wanted)}: {exc.strerror or exc}; "
            f"this process may use {cpulist(previous)}"
        ) from None
    me = os.getpid()
    for tid in _thread_ids():
        if tid == me:
            continue
        # A thread that exited meanwhile is fine to skip.
        with contextlib.suppress(OSError):
            os.sched_setaffinity(tid, wanted)
    return previous


@contextlib.contextmanager
def pinned(cpus: Iterable[int] | None) -> Iterator[None]:
    """Pin for the duration of the block (None: leave the affinity alone), then restore it."""
    if cpus is None:
        yield
        return
    previous = pin_process(cpus)
    try:
        yield
    finally:
        with contextlib.suppress(UserError):
            pin_process(previous)


def thread_affinities() -> dict[int, list[int]]:
    """Each thread's CPU set (for tests and `--verbose` checks)."""
    result: dict[int, list[int]] = {}
    for tid in _thread_ids():
        with contextlib.suppress(OSError):
            result[tid] = sorted(os.sched_getaffinity(tid))
    return result


class PhasePinning:
    """Re-pins the process between prompt processing and generation when tune found a different best CPU set
    for each (prompt: compute-bound, slower clusters still add speed; generation: barrier-bound, they stall).
    Called by the engine with "prompt" and "generate"; a phase already on its set costs nothing."""

    def __init__(self, prompt_cpus: Iterable[int], gen_cpus: Iterable[int]) -> None:
        self.cpus = {"prompt": sorted(set(prompt_cpus)), "generate": sorted(set(gen_cpus))}
        self.current: list[int] | None = None

    def __call__(self, phase: str) -> None:
        wanted = self.cpus["prompt" if phase == "prompt" else "generate"]
        if wanted != self.current:
            pin_process(wanted)
            self.current = wanted
