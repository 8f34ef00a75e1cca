"""Termux's wake lock: without it Android may suspend the CPU (and the server) once the screen goes off.

`termux-wake-lock` / `termux-wake-unlock` come with Termux; they are only run when they exist.
"""

from __future__ import annotations

from edgepilot.device.commands import run_output
from edgepilot.program_path import which

OUTPUT_LIMIT = 64 << 10
TIMEOUT = 15.0  # the command asks the Termux app over `am`: seconds on a busy phone


class WakeLock:
    def __init__(self) -> None:
        self.held = False
        self.note: str | None = None

    def _run(self, name: str) -> bool:
        exe = which(name)
        if exe is None:
            return False
        done = run_output([exe], TIMEOUT, OUTPUT_LIMIT)  # bounded: `am` may leave a child on the pipe
        if done.reason is not None:
            self.note = f"{name} failed: {done.reason}"
            return False
        if done.returncode != 0:
            self.note = f"{name} exited with status {done.returncode}"
            return False
        return True

    def acquire(self) -> bool:
        self.held = self._run("termux-wake-lock")
        return self.held

    def release(self) -> None:
        if self.held:
            self._run("termux-wake-unlock")
            self.held = False
