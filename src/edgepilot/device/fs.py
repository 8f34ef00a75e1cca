"""Tolerant reading of device facts relative to a root directory.

Every reader takes `root` (a Path). With root `/` the live system is read: files directly, commands by running
them with a short timeout, the environment from os.environ. With any other root a device tree is replayed:
files under root, command outputs from `root/commands/NAME.txt`, the environment from `root/env.json`
(layout in design.md). Nothing here raises for a missing, unreadable or denied file: callers get
`(value, reason)` where exactly one is None.

A device tree or snapshot archive is untrusted input: every read has a size cap (per kind of file), FIFOs and
devices are refused without blocking, JSON is depth-limited, and no path (including one built from file
content, like a cgroup path) leaves the root, neither by `..` nor through a symlink.

A reason names the path as it is on the device ("missing: /proc/pressure/memory"), so a replayed tree gives
the same reasons as the live probe it was saved from. When a snapshot captures a failure it writes the reason
to a sidecar `PATH.error` file; replay returns that reason instead of a generic "missing".

While a `Recorder` is active (see `recording`), every read is also logged so `snapshot.save` can write exactly
what the probe saw.
"""

from __future__ import annotations

import contextlib
import errno as errno_mod
import functools
import os
import posixpath
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot import untrusted

LIVE_ROOT = Path("/")
# Read caps per kind of file: generous for real devices (a sysfs attribute is at most one page, the largest
# /proc/cpuinfo of a 512-thread server is under 1 MiB), small enough that a hostile tree costs nothing.
VALUE_FILE = 4 << 10  # one sysfs or /proc/sys value (a page at most; real ones are a few bytes)
SMALL_FILE = 64 << 10  # /proc/meminfo, /proc/self/cgroup, CPU lists, cgroup files, env.json
TABLE_FILE = 1 << 20  # /proc/mounts, command outputs (getprop, vulkaninfo)
CPUINFO_FILE = 2 << 20
SIDECAR_FILE = 4 << 10  # PATH.error: one line of reason
REASON_CHARS = 300
MAX_DIR_ENTRIES = 4096  # /sys/class/thermal of a big phone holds ~200
# Environment variables a probe looks at (design.md: env.json).
ENV_KEYS = (
    "PREFIX",
    "TERMUX_VERSION",
    "TERMUX_APK_RELEASE",
    "ANDROID_ROOT",
    "ANDROID_DATA",
    "HOME",
)


class TooManyEntries(OSError):
    def __init__(self, path: str) -> None:
        super().__init__(errno_mod.E2BIG, f"more than {MAX_DIR_ENTRIES} entries", path)


class OutsideRoot(OSError):
    """A path in a device tree that resolves (through a symlink) to somewhere outside the tree."""

    def __init__(self, path: str) -> None:
        super().__init__(errno_mod.EXDEV, "outside the device tree", path)


@functools.lru_cache(maxsize=64)
def _real_root(root: Path) -> str:
    return os.path.realpath(root)


def is_live(root: Path) -> bool:
    try:
        return root == LIVE_ROOT or _real_root(root) == "/"
    except (OSError, ValueError):
        return False


def device_path(path: str) -> str:
    """The absolute, normalised path on the device, whatever form the caller used ("proc/x", "/proc/x").

    `..` cannot climb above the device's `/` (as the kernel treats `/..`), so a path built from file content
    (a cgroup path, a mount point) always stays inside the root it is read from.
    """
    return posixpath.normpath("/" + path.strip("/"))


def local_path(root: Path, path: str) -> Path:
    return root / device_path(path).lstrip("/")


def command_name(argv: Sequence[str]) -> str:
    """`uname -m` -> `uname-m`, `vulkaninfo --summary` -> `vulkaninfo-summary` (design.md naming)."""
    return "-".join(part.lstrip("-") for part in argv if part.lstrip("-"))


def _opened_path(fd: int, fallback: Path) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(fallback)


def _check_inside(root: Path, fd: int, local: Path) -> None:
    """In a replayed tree a symlink must not lead outside it (a live root is all of `/` anyway)."""
    if is_live(root):
        return
    base = _real_root(root)
    real = _opened_path(fd, local)
    if real != base and not real.startswith(base.rstrip("/") + "/"):
        raise OutsideRoot(str(local))


def read_bytes(root: Path, path: str, limit: int = SMALL_FILE) -> bytes:
    """A file under root of at most `limit` bytes; OSError (see _errno_reason) otherwise."""
    local = local_path(root, path)
    with untrusted.open_regular(local) as f:
        _check_inside(root, f.fileno(), local)
        return untrusted.read_open(f, limit, local)


def confined(root: Path, path: str) -> Path | None:
    """The local path of a device path when it exists inside the tree (for a path named by a log or file)."""
    local = local_path(root, path)
    try:
        fd = os.open(local, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        _check_inside(root, fd, local)
    except OSError:
        return None
    finally:
        os.close(fd)
    return local


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
    if isinstance(exc, untrusted.FileTooLarge):
        return f"larger than {untrusted.human_size(exc.limit)}: {dev}"
    if isinstance(exc, untrusted.NotRegularFile):
        return f"{exc.kind}, not a regular file: {dev}"
    if isinstance(exc, OutsideRoot):
        return f"outside the device tree: {dev}"
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
    try:
        data = read_bytes(root, device_path(path) + ".error", SIDECAR_FILE)
    except OSError:
        return None
    lines = data.decode("utf-8", errors="replace").strip().splitlines()
    if not lines:
        return None
    return lines[0].strip()[:REASON_CHARS] or None


def read_text(root: Path, path: str, limit: int = SMALL_FILE) -> tuple[str | None, str | None]:
    """File content (at most `limit` bytes), or None and the reason it could not be read."""
    dev = device_path(path)
    value: str | None = None
    reason: str | None = None
    try:
        value = read_bytes(root, dev, limit).decode("utf-8", errors="replace")
    except OSError as exc:
        reason = _sidecar_reason(root, dev) or _errno_reason(exc, dev)
    rec = _recorder.get()
    if rec is not None:
        rec.files[dev] = (value, reason)
    return value, reason


def read_int(root: Path, path: str) -> tuple[int | None, str | None]:
    text, reason = read_text(root, path, VALUE_FILE)
    if text is None:
        return None, reason
    word = (text.split() or [""])[0]
    digits = word[1:] if word[:1] in "+-" else word
    # ASCII digits that fit the kernel's 64-bit integers: int() alone also reads "٣", "1_0" and 5000 digits
    if digits.isascii() and digits.isdigit() and len(digits) <= 19:
        value = int(word)
        if -(1 << 63) <= value < 1 << 63:
            return value, None
    return None, f"not a number ({text.strip()[:40]!r}): {device_path(path)}"


def _entries(root: Path, local: Path) -> list[str]:
    fd = os.open(local, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        _check_inside(root, fd, local)
        names: list[str] = []
        with os.scandir(fd) as it:
            for entry in it:
                if len(names) >= MAX_DIR_ENTRIES:
                    raise TooManyEntries(str(local))
                try:
                    entry.name.encode("utf-8")
                except UnicodeEncodeError:
                    continue  # not a name a kernel gives a sysfs or procfs entry
                names.append(entry.name)
        return sorted(names)
    finally:
        os.close(fd)


def list_dir(root: Path, path: str) -> tuple[list[str], str | None]:
    """Sorted entry names of a directory, or [] and the reason."""
    dev = device_path(path)
    names: list[str] = []
    reason: str | None = None
    try:
        names = _entries(root, local_path(root, dev))
    except TooManyEntries:
        reason = f"more than {MAX_DIR_ENTRIES} entries: {dev}"
    except OSError as exc:
        reason = _sidecar_reason(root, dev) or _errno_reason(exc, dev)
    rec = _recorder.get()
    if rec is not None:
        rec.dirs[dev] = (names, reason)
    return names, reason


def read_env(root: Path) -> tuple[dict[str, str], str | None]:
    """The probe-relevant environment variables (ENV_KEYS)."""
    env: dict[str, str] = {}
    reason: str | None = None
    if is_live(root):
        env = {k: os.environ[k] for k in ENV_KEYS if k in os.environ}
    else:
        data, reason = _replay_json(root, "env.json")
        if isinstance(data, dict):
            env = {
                untrusted.valid_text(k): untrusted.valid_text(str(v))
                for k, v in data.items()
                if isinstance(v, (str, int, float, bool))
            }
        elif reason is None:
            reason = "env.json is not a JSON object"
    rec = _recorder.get()
    if rec is not None:
        rec.env = dict(env)
    return env, reason


def _replay_json(root: Path, name: str) -> tuple[object, str | None]:
    """A JSON file of the snapshot itself (not a device path, so not recorded): (data, reason)."""
    try:
        text = read_bytes(root, name, SMALL_FILE)
    except FileNotFoundError:
        return None, f"not captured: {name}"
    except OSError as exc:
        return None, f"{name} unreadable ({_errno_reason(exc, name)})"
    try:
        return untrusted.loads_json(text), None
    except ValueError as exc:
        return None, f"{name} is not valid JSON: {str(exc)[:REASON_CHARS]}"


def _replay_dict(root: Path, name: str) -> dict:
    data, _ = _replay_json(root, name)
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
        saved = _replay_dict(root, "statvfs.json").get(dev)
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
        saved = _replay_dict(root, "realpath.json").get(dev)
        resolved = untrusted.valid_text(saved) if isinstance(saved, str) else _apply_aliases(dev, aliases)
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
