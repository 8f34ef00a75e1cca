"""Device commands read over a root: run live (short timeout, bounded output) or replayed from
`root/commands/NAME.txt`; never raises (see fs.py for the (value, reason) convention)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from edgepilot import untrusted
from edgepilot.device.fs import (
    SMALL_FILE,
    TABLE_FILE,
    _errno_reason,
    _recorder,
    _sidecar_reason,
    command_name,
    is_live,
    read_bytes,
)
from edgepilot.program_path import which

CHUNK = 64 << 10
STDERR_KEPT = 4 << 10  # the last lines of stderr: the reason a command failed
REAP_SECONDS = 5.0  # a child stuck in a GPU driver's kernel call may not die at once
READER_SECONDS = 2.0


def run_command(
    root: Path,
    argv: Sequence[str],
    timeout: float = 3.0,
    limit: int = TABLE_FILE,
    name: str | None = None,
) -> tuple[str | None, str | None]:
    """Live: run argv and return stdout. Replay: `commands/NAME.txt`. Never raises.
    `name`: the snapshot name when design.md fixes another one than command_name(argv) gives (a program
    run by its full path, `llama-server---list-devices`)."""
    name = name or command_name(argv)
    value: str | None = None
    reason: str | None = None
    if is_live(root):
        value, reason = _run_live(argv, timeout, limit)
    else:
        path = f"commands/{name}.txt"
        try:
            value = read_bytes(root, path, limit).decode("utf-8", errors="replace")
        except FileNotFoundError:
            reason = _sidecar_reason(root, path) or f"not captured: {path}"
        except OSError as exc:
            reason = _sidecar_reason(root, path) or _errno_reason(exc, path)
    rec = _recorder.get()
    if rec is not None:
        rec.commands[name] = (value, reason)
    return value, reason


def _run_live(argv: Sequence[str], timeout: float, limit: int) -> tuple[str | None, str | None]:
    """argv run for its output (run_output: killed with everything it started at the deadline or once its
    output passes `limit`: a hung or flooding driver is a reason, never a stall or a memory blow-up here);
    a crash is named by its signal."""
    exe = which(argv[0])
    shown = " ".join(argv)
    if exe is None:
        return None, f"command not found: {argv[0]}"
    got = run_output([exe, *argv[1:]], timeout, limit, stderr_limit=STDERR_KEPT, shown=shown)
    if got.reason is not None:
        return None, got.reason
    assert got.returncode is not None
    if got.returncode < 0:
        return None, f"{shown} crashed: {_signal_name(-got.returncode)}"
    if got.returncode != 0:
        lines = got.stderr.strip().splitlines()
        last = lines[-1].strip() if lines else ""
        detail = f": {last[:200]}" if last else ""
        return None, f"{shown} exited with status {got.returncode}{detail}"
    return got.stdout, None


@dataclass
class Output:
    """What a program printed, read bounded (run_output)."""

    stdout: str
    stderr: str  # its last `limit` bytes
    returncode: int | None  # None: it did not end by itself (killed at the deadline or past the cap)
    reason: str | None = None  # why the output is not all there: timed out, too large, could not run
    started: bool = True  # False: it could not be run at all (reason says why)


def run_output(
    argv: Sequence[str],
    timeout: float,
    limit: int,
    env: dict[str, str] | None = None,
    stderr_limit: int | None = None,
    shown: str | None = None,
    input: bytes | None = None,
) -> Output:
    """Run a program for its output: in a session of its own, stdin closed, stdout read up to `limit` bytes
    (past it the program and all it started are killed), stderr's last `limit` bytes kept, everything killed
    at the deadline; a grandchild that keeps the pipes open is killed with the group, and one that left the
    group holds us no longer than READER_SECONDS. Never raises. stderr_limit: stderr's bytes kept (`limit`);
    shown: the command as reasons name it; input: written to its stdin (closed otherwise)."""
    import subprocess

    shown = shown or " ".join(argv)
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=env,
        )
    except (OSError, ValueError) as exc:
        why = f"could not run {shown}: {getattr(exc, 'strerror', None) or exc}"
        return Output("", "", None, why, started=False)
    assert proc.stdout is not None and proc.stderr is not None
    out = _Drain(proc.stdout, limit, proc.pid)
    err = _Drain(proc.stderr, limit if stderr_limit is None else stderr_limit, None)
    if (
        input is not None
    ):  # from a thread: a child that never reads its stdin cannot hold us past the deadline
        threading.Thread(target=_feed, args=(proc.stdin, input), daemon=True).start()
    # Popen.wait(timeout) polls with sleeps that double up to 50 ms, so a 30 ms program costs up to 60:
    # a thread blocked in waitpid ends the moment the program does.
    waiter = threading.Thread(target=proc.wait, daemon=True)
    waiter.start()
    try:
        waiter.join(timeout)
        hung = waiter.is_alive()
    finally:
        _kill_group(proc.pid)
        waiter.join(REAP_SECONDS)
    out.join(READER_SECONDS)
    err.join(READER_SECONDS)
    reason = None
    if out.over:
        reason = f"output larger than {untrusted.human_size(limit)}: {shown}"
    elif hung or proc.returncode is None:
        reason = f"timed out after {timeout:g}s: {shown}"
    return Output(out.text(), err.text(), None if reason else proc.returncode, reason)


def _feed(stream: IO[bytes] | None, data: bytes) -> None:
    if stream is None:
        return
    with contextlib.suppress(OSError, ValueError):
        stream.write(data)
    with contextlib.suppress(OSError, ValueError):
        stream.close()


class _Drain(threading.Thread):
    """Reads a child's pipe to its end: keeps the first `limit` bytes of stdout (killing the child's
    group once it writes more), or the last `limit` bytes of stderr (`pid` None)."""

    def __init__(self, stream: IO[bytes], limit: int, pid: int | None) -> None:
        super().__init__(daemon=True)
        self.stream, self.limit, self.pid = stream, limit, pid
        self.data = bytearray()
        self.over = False
        self.start()

    def run(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := self.stream.read1(CHUNK):  # type: ignore[attr-defined]
                self.data += chunk
                if len(self.data) <= self.limit:
                    continue
                if self.pid is None:
                    del self.data[: len(self.data) - self.limit]
                    continue
                self.over = True
                self.data.clear()
                _kill_group(self.pid)
                break
        with contextlib.suppress(OSError):
            self.stream.close()

    def text(self) -> str:
        return bytes(self.data).decode("utf-8", errors="replace")


def _kill_group(pid: int) -> None:
    import signal

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def uname_machine(root: Path) -> tuple[str | None, str | None]:
    """`uname -m` of this process's userland (armv8l under a 32-bit Termux on a 64-bit kernel)."""
    if not is_live(root):
        text, reason = run_command(root, ["uname", "-m"], limit=SMALL_FILE)
        return (text.strip() or None, reason) if text is not None else (None, reason)
    machine = os.uname().machine
    rec = _recorder.get()
    if rec is not None:
        rec.commands[command_name(["uname", "-m"])] = (machine + "\n", None)
    return machine, None
