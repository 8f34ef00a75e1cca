"""`snapshot save`: capture what the probe reads into the design.md tree layout (directory or .tar.gz).

The probe runs once with a recorder (fs.recording); every file, directory listing and command output it saw is
written back at the same relative path, and every failure that replay would not reproduce by itself (a denied
file, a command that is not installed) is written as a `PATH.error` sidecar holding the reason. Replaying the
snapshot with `--root` therefore gives the same probe JSON as the probe taken while saving.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from edgepilot import __version__
from edgepilot.device import fs
from edgepilot.device.probe import Probe, _probe_dir
from edgepilot.device.root_archive import is_archive, open_root
from edgepilot.errors import UserError
from edgepilot.file_errors import cannot_write, is_denied, writable_folder
from edgepilot.safe_write import atomic_write

OUT_FIX = "give a path in a folder you can write"


@dataclass
class SnapshotResult:
    path: str
    archive: bool
    files: int
    commands: int
    missing: int  # reads that failed (kept as absent files or .error sidecars)
    probe: Probe


def save(
    out: Path | str, root: Path | str = fs.LIVE_ROOT, llama_tool: Path | str | None = None
) -> SnapshotResult:
    """`llama_tool`: the llama.cpp program whose `--list-devices` is saved (default llama-server on PATH).
    Where it goes is checked before the probe runs; the snapshot appears whole or not at all."""
    out = Path(out)
    archive = is_archive(out)
    into_empty = _check_out(out, archive)
    with open_root(Path(root)) as base, fs.recording() as rec:
        result = _probe_dir(base, llama_tool)  # clinfo (OpenCL devices) included
    if into_empty:
        counts = _write_into_empty(rec, out)
    else:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        except OSError as exc:
            raise _cannot_write(out, exc) from None
        try:
            counts = write_tree(rec, scratch)
            if archive:
                _write_archive(scratch, out)
            else:
                scratch.chmod(0o755)  # mkdtemp's 0700 is for a temporary folder, not the snapshot
                os.rename(scratch, out)
        except OSError as exc:
            raise _cannot_write(out, exc) from None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return SnapshotResult(str(out), archive, counts[0], counts[1], counts[2], result)


def _cannot_write(out: Path, exc: OSError) -> UserError:
    if is_denied(exc):
        return cannot_write(out, exc, OUT_FIX)
    return UserError(f"cannot write {out}: {exc.strerror or exc}")


def _check_out(out: Path, archive: bool) -> bool:
    """Refuse, before the probe, an output that exists or lies where this user cannot write; True when it is
    an empty directory to fill (else it is made beside, in its parent)."""
    try:
        mode: int | None = os.stat(out).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    except OSError as exc:
        raise _cannot_write(out, exc) from None
    into_empty = not archive and mode is not None and stat.S_ISDIR(mode) and _empty(out)
    if mode is not None and not into_empty:
        raise UserError(f"{out} already exists; give a new directory or .tar.gz path")
    # a file in the way, a missing folder (an archive's folder is not made), a folder this user may not write
    folder = out if into_empty else out.parent if archive else _nearest_folder(out.parent)
    writable_folder(folder, "the snapshot", OUT_FIX, make=False)
    return into_empty


def _empty(folder: Path) -> bool:
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is None
    except OSError as exc:
        raise _cannot_write(folder, exc) from None


def _nearest_folder(path: Path) -> Path:
    """`path` or its nearest ancestor that exists: where the missing folders would be made."""
    for candidate in (path.absolute(), *path.absolute().parents):
        if os.path.lexists(candidate):
            return candidate
    return Path("/")


def _write_into_empty(rec: fs.Recorder, out: Path) -> tuple[int, int, int]:
    """The tree written into the empty directory `out`, emptied again if that fails."""
    try:
        return write_tree(rec, out)
    except OSError as exc:
        with contextlib.suppress(OSError):
            for entry in list(out.iterdir()):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
        raise _cannot_write(out, exc) from None


def _target(tree: Path, dev: str) -> Path:
    rel = dev.strip("/")
    if not rel or ".." in Path(rel).parts:
        raise UserError(f"refusing to save unsafe path {dev!r}")
    return tree / rel


def _needs_sidecar(reason: str | None, dev: str) -> bool:
    # Replay of an absent file already says "missing: PATH"; other reasons are saved to replay identically.
    return reason is not None and reason != f"missing: {dev}"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def write_tree(rec: fs.Recorder, tree: Path) -> tuple[int, int, int]:
    """Write a recorder's content under `tree`. Returns (files, commands, failed reads)."""
    files = commands = failed = 0
    for dev, (value, reason) in sorted(rec.files.items()):
        target = _target(tree, dev)
        if value is not None:
            _write(target, value)
            files += 1
        else:
            failed += 1
            if _needs_sidecar(reason, dev):
                _write(target.with_name(target.name + ".error"), reason or "")
    for dev, (names, reason) in sorted(rec.dirs.items()):
        target = _target(tree, dev)
        if reason is not None:
            failed += 1
            if _needs_sidecar(reason, dev):
                _write(target.with_name(target.name + ".error"), reason)
            continue
        target.mkdir(parents=True, exist_ok=True)
        for name in names:
            entry = target / name
            if not entry.exists():
                entry.mkdir(parents=True, exist_ok=True)
    for name, (value, reason) in sorted(rec.commands.items()):
        base = _target(tree, f"commands/{name}.txt")
        if value is not None:
            _write(base, value)
            commands += 1
        else:
            failed += 1
            _write(base.with_name(base.name + ".error"), reason or "")
    _write(tree / "env.json", json.dumps(rec.env or {}, indent=2, sort_keys=True) + "\n")
    saved_space = {k: v for k, v in rec.statvfs.items() if v is not None}
    if saved_space:
        _write(tree / "statvfs.json", json.dumps(saved_space, indent=2, sort_keys=True) + "\n")
    if rec.realpaths:
        _write(tree / "realpath.json", json.dumps(rec.realpaths, indent=2, sort_keys=True) + "\n")
    meta = {"edgepilot": __version__, "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    _write(tree / "snapshot.json", json.dumps(meta, indent=2) + "\n")
    return files, commands, failed


def _write_archive(tree: Path, out: Path) -> None:
    """The archive through a fresh temporary file beside `out` (a stale link there is never followed)."""
    mode = "w:gz" if out.name.endswith((".tar.gz", ".tgz")) else "w"
    with atomic_write(out, what="snapshot", fix=OUT_FIX) as f, tarfile.open(fileobj=f, mode=mode) as tar:
        for entry in sorted(tree.iterdir()):
            tar.add(entry, arcname=entry.name, recursive=True)
