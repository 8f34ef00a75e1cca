"""A child program that goes when edgepilot goes: the kernel's parent-death signal (PR_SET_PDEATHSIG, Linux
and Android), asked for in the child before it runs the program. A SIGKILLed edgepilot (the low-memory
killer, `kill -9`, a closed Termux session) would otherwise leave its llama-server running, holding the
model's memory in the background.

    die_with_parent(sig) -> a preexec_fn for subprocess.Popen

The signal is sent when the thread that started the child ends, not the process: start children from a
thread that lives as long as they should (the main thread, a worker pool's thread)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL(None, use_errno=True).prctl
    return None


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A preexec_fn: the child gets `sig` when this process (the thread starting it) ends; a child whose
    parent already went before it asked ends at once. Where prctl is missing it does nothing."""
    parent = os.getpid()
    prctl = _prctl()  # looked up before the fork: the child only calls it

    def preexec() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec
