"""Tolerant reading of device facts relative to a root directory.

Every reader takes `root` (a Path). With root `/` the live system is read: files directly, commands by running
them with a short timeout, the environment from os.environ. With any other root a device tree is replayed:
files under root, command outputs from `root/commands/NAME.txt`, the environment from `root/env.json`
(layout in design.md). Nothing here raises for a missing, unreadable or denied file: callers get
`(value, reason)` where exactly one is None.

A reason names the path as it is on the device ("missing: /proc/pressure/memory"), so a replayed tree gives
the same reasons as the live probe it was saved from. When a snapshot captures a failure it writes the reason
to a sidecar `PATH.error` file; replay returns that reason instead of a generic "missing".

While a `Recorder` is active (see `recording`), every read is also logged so `snapshot.save` can write exactly
what the probe saw.
"""

from __future__ import annotations

import contextlib
import errno as errno_mod
import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

LIVE_ROOT = Path("/")
MAX_READ_BYTES = 4 << 20
READ_CHUNK = 64 << 10
# Environment variables a probe looks at (design.md: env.json).
ENV_KEYS = (
    "PREFIX",
    "TERMUX_VERSION",
    "TERMUX_APK_RELEASE",
    "ANDROID_ROOT",
    "ANDROID_DATA",
    "HOME",
)


def is_live(root: Path) -> bool:
    try:
        return root == LIVE_ROOT or root.resolve() == LIVE_ROOT
    except OSError:
        return False


def device_path(path: str) -> str:
    """The absolute path on the device, whatever form the caller used ("proc/x" or "/proc/x")."""
    return "/" + path.strip("/")


def local_path(root: Path, path: str) -> Path:
    return root / path.strip("/")


def command_name(argv: Sequence[str]) -> str:
    """`uname -m` -> `uname-m`, `vulkaninfo --summary` -> `vulkaninfo-summary` (design.md naming)."""
    return "-".join(part.lstrip("-") for part in argv if part.lstrip("-"))


@dataclass
class Recorder:
    """What a probe read, so a snapshot can reproduce it byte for byte (value) or reason for reason."""

    files: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    dirs: dict[str, tuple[list[str], str | None]] = field(default_factory=dict)
    commands: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    env: dict[str, str] | None = None
    statvfs: dict[str, dict[str, int] | None] = field(default_factory=dict)
    realpaths: dict[str, str] = field(default_factory=dict)


_recorder: ContextVar[Recorder | None] = ContextVar("edgepilot_device_recorder", default=None)


@contextlib.contextmanager
def recording() -> Iterator[Recorder]:
    rec = Recorder()
    token = _recorder.set(rec)
    try:
        yield rec
    finally:
        _recorder.reset(token)


def _errno_reason(exc: OSError, dev: str) -> str:
    if exc.errno in (errno_mod.EACCES, errno_mod.EPERM):
        return f"permission denied: {dev}"
    if exc.errno == errno_mod.ENOENT:
        return f"missing: {dev}"
    if exc.errno == errno_mod.ENOTDIR:
        return f"not a directory: {dev}"
    if exc.errno == errno_mod.EISDIR:
        return f"is a directory: {dev}"
    name = errno_mod.errorcode.get(exc.errno or 0, "error")
    return f"unreadable ({name}): {dev}"


def _sidecar_reason(root: Path, path: str) -> str | None:
    if is_live(root):
        return None
    side = local_path(root, path.rstrip("/") + ".error")
    try:
        text = side.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    return text or None


def read_text(root: Path, path: str) -> tuple[str | None, str | None]:
    """File content, or None and the reason it could not be read."""
    dev = device_path(path)
    value: str | None = None
    reason: str | None = None
    try:
        chunks: list[bytes] = []
        size = 0
        with open(local_path(root, path), "rb", buffering=0) as fh:
            # Small reads: procfs sysctl files fail a huge read() with ENOMEM.
            while size < MAX_READ_BYTES:
                chunk = fh.read(READ_CHUNK)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        value = b"".join(chunks).decode("utf-8", errors="replace")
    except OSError as exc:
        reason = _sidecar_reason(root, path) or _errno_reason(exc, dev)
    rec = _recorder.get()
    if rec is not None:
        rec.files[dev] = (value, reason)
    return value, reason


def read_int(root: Path, path: str) -> tuple[int | None, str | None]:
    text, reason = read_text(root, path)
    if text is None:
        return None, reason
    try:
        return int(text.strip().split()[0]), None
    except (ValueError, IndexError):
        return None, f"not a number ({text.strip()[:40]!r}): {device_path(path)}"


def list_dir(root: Path, path: str) -> tuple[list[str], str | None]:
    """Sorted entry names of a directory, or [] and the reason."""
    dev = device_path(path)
    names: list[str] = []
    reason: str | None = None
    try:
        names = sorted(os.listdir(local_path(root, path)))
    except OSError as exc:
        reason = _sidecar_reason(root, path) or _errno_reason(exc, dev)
    rec = _recorder.get()
    if rec is not None:
        rec.dirs[dev] = (names, reason)
    return names, reason


def run_command(root: Path, argv: Sequence[str], timeout: float = 3.0) -> tuple[str | None, str | None]:
    """Live: run argv and return stdout. Replay: `commands/NAME.txt`. Never raises."""
    name = command_name(argv)
    value: str | None = None
    reason: str | None = None
    if is_live(root):
        value, reason = _run_live(argv, timeout)
    else:
        try:
            value = local_path(root, f"commands/{name}.txt").read_text(encoding="utf-8", errors="replace")
        except OSError:
            reason = _sidecar_reason(root, f"commands/{name}.txt") or f"not captured: commands/{name}.txt"
    rec = _recorder.get()
    if rec is not None:
        rec.commands[name] = (value, reason)
    return value, reason


def _run_live(argv: Sequence[str], timeout: float) -> tuple[str | None, str | None]:
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
        text, reason = run_command(root, ["uname", "-m"])
        return (text.strip() or None, reason) if text is not None else (None, reason)
    machine = os.uname().machine
    rec = _recorder.get()
    if rec is not None:
        rec.commands[command_name(["uname", "-m"])] = (machine + "\n", None)
    return machine, None


def read_env(root: Path) -> tuple[dict[str, str], str | None]:
    """The probe-relevant environment variables (ENV_KEYS)."""
    env: dict[str, str] = {}
    reason: str | None = None
    if is_live(root):
        env = {k: os.environ[k] for k in ENV_KEYS if k in os.environ}
    else:
        text, _ = read_text_quiet(local_path(root, "env.json"))
        if text is None:
            reason = "not captured: env.json"
        else:
            try:
                data = json.loads(text)
            except ValueError as exc:
                data, reason = None, f"env.json is not valid JSON: {exc}"
            if isinstance(data, dict):
                env = {str(k): str(v) for k, v in data.items() if v is not None}
            elif reason is None:
                reason = "env.json is not a JSON object"
    rec = _recorder.get()
    if rec is not None:
        rec.env = dict(env)
    return env, reason


def read_text_quiet(path: Path) -> tuple[str | None, str | None]:
    """Read a file of the snapshot itself (not a device path): not recorded."""
    try:
        return path.read_text(encoding="utf-8", errors="replace"), None
    except OSError as exc:
        return None, exc.strerror or str(exc)


def _replay_json(root: Path, name: str) -> dict:
    text, _ = read_text_quiet(local_path(root, name))
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def statvfs(root: Path, path: str) -> tuple[dict[str, int] | None, str | None]:
    """Total/free bytes of the filesystem holding `path` (live), or what a snapshot saved (statvfs.json)."""
    dev = device_path(path)
    result: dict[str, int] | None = None
    reason: str | None = None
    if is_live(root):
        try:
            st = os.statvfs(dev)
            result = {"total_bytes": st.f_blocks * st.f_frsize, "free_bytes": st.f_bavail * st.f_frsize}
        except OSError as exc:
            reason = _errno_reason(exc, dev)
    else:
        saved = _replay_json(root, "statvfs.json").get(dev)
        if isinstance(saved, dict):
            result = {k: int(v) for k, v in saved.items() if isinstance(v, int)}
        else:
            reason = f"not captured: statvfs of {dev}"
    rec = _recorder.get()
    if rec is not None:
        rec.statvfs[dev] = result
    return result, reason


def realpath(root: Path, path: str, aliases: Sequence[tuple[str, str]] = ()) -> str:
    """Symlink-resolved device path. Replay uses what the snapshot saved, else the given prefix aliases."""
    dev = device_path(path)
    if is_live(root):
        try:
            resolved = os.path.realpath(dev)
        except OSError:
            resolved = dev
    else:
        saved = _replay_json(root, "realpath.json").get(dev)
        resolved = saved if isinstance(saved, str) else _apply_aliases(dev, aliases)
    rec = _recorder.get()
    if rec is not None:
        rec.realpaths[dev] = resolved
    return resolved


def _apply_aliases(dev: str, aliases: Sequence[tuple[str, str]]) -> str:
    for _ in range(8):  # aliases may chain (/sdcard -> /storage/self/primary -> /storage/emulated/0)
        for prefix, target in aliases:
            if dev == prefix or dev.startswith(prefix.rstrip("/") + "/"):
                dev = target.rstrip("/") + dev[len(prefix.rstrip("/")) :]
                break
        else:
            return dev
    return dev
