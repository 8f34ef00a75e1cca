"""`snapshot save`: capture what the probe reads into the design.md tree layout (directory or .tar.gz).

The probe runs once with a recorder (fs.recording); every file, directory listing and command output it saw is
written back at the same relative path, and every failure that replay would not reproduce by itself (a denied
file, a command that is not installed) is written as a `PATH.error` sidecar holding the reason. Replaying the
snapshot with `--root` therefore gives the same probe JSON as the probe taken while saving.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from edgepilot import __version__
from edgepilot.device import commands, fs
from edgepilot.device.probe import Probe, _probe_dir, is_archive, open_root
from edgepilot.errors import UserError
from edgepilot.safe_write import atomic_write


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
    """`llama_tool`: the llama.cpp program whose `--list-devices` is saved (default llama-server on PATH)."""
    out = Path(out)
    archive = is_archive(out)
    if out.exists() and not (out.is_dir() and not any(out.iterdir()) and not archive):
        raise UserError(f"{out} already exists; give a new directory or .tar.gz path")
    blocker = _file_above(out)
    if blocker is not None:
        raise UserError(f"cannot write {out}: {blocker} is a file, not a directory")
    if archive and not out.parent.is_dir():
        raise UserError(f"{out.parent}: no such directory")
    with open_root(Path(root)) as base, fs.recording() as rec:
        result = _probe_dir(base, llama_tool)
        if fs.is_live(base) and shutil.which("clinfo"):  # OpenCL devices (Adreno): for the doctor, not probe
            commands.run_command(base, ["clinfo"], timeout=10.0)
    if archive:
        with tempfile.TemporaryDirectory(prefix="edgepilot-snapshot-") as tmp:
            try:
                counts = write_tree(rec, Path(tmp))
            except OSError as exc:
                raise UserError(f"cannot write a snapshot in {tmp}: {exc.strerror or exc}") from None
            _write_archive(Path(tmp), out)
    else:
        try:
            out.mkdir(parents=True, exist_ok=True)
            counts = write_tree(rec, out)
        except OSError as exc:
            raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
    return SnapshotResult(str(out), archive, counts[0], counts[1], counts[2], result)


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
    with atomic_write(out, what="snapshot") as f, tarfile.open(fileobj=f, mode=mode) as tar:
        for entry in sorted(tree.iterdir()):
            tar.add(entry, arcname=entry.name, recursive=True)


def _file_above(out: Path) -> Path | None:
    """The nearest existing ancestor of `out` when it is not a directory (a file where a folder should be)."""
    for parent in out.absolute().parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None
