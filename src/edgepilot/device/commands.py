"""Device commands read over a root: run live (short timeout, bounded output) or replayed from
`root/commands/NAME.txt`; never raises (see fs.py for the (value, reason) convention)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

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
    exe = shutil.which(argv[0])
    if exe is None:
        return None, f"command not found: {argv[0]}"
    try:
        proc = subprocess.run(
            [exe, *argv[1:]],
            capture_output=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:g}s: {' '.join(argv)}"
    except OSError as exc:
        return None, f"could not run {' '.join(argv)}: {exc.strerror or exc}"
    if len(proc.stdout) > limit:
        return None, f"output larger than {untrusted.human_size(limit)}: {' '.join(argv)}"
    out = proc.stdout.decode("utf-8", errors="replace")
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", errors="replace").strip().splitlines()
        last = err[-1].strip() if err else ""
        detail = f": {last[:200]}" if last else ""
        return None, f"{' '.join(argv)} exited with status {proc.returncode}{detail}"
    return out, None


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
