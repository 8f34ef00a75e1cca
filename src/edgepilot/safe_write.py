"""Writing files without losing data: every file edgepilot writes goes through here.

- The target may not be an input of the same command (quantize's output named like its source, chat's /save
  over the model being chatted with): refused before any byte is written.
- The target must be a regular file or absent: never replace a device node, a FIFO or a directory.
- Temporary names are created fresh and exclusively (O_CREAT|O_EXCL|O_NOFOLLOW): a stale symlink at a
  temporary name is never followed, so no file elsewhere is written or truncated.
- A resumable partial file (pull's NAME.part) is opened with O_NOFOLLOW and must be a regular file.
- The finished file replaces the target atomically (os.replace, same directory).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from edgepilot.errors import UserError
from edgepilot.file_errors import cannot_write, is_denied, refused_where

PathLike = str | os.PathLike[str]
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
PARTIAL_FIX = "remove it (or make it writable to you) and try again"


def name_part(name: str, limit: int = 80) -> str:
    """A name from outside (a model's file name) made safe as part of a file name we write."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:limit]


def _kind(mode: int) -> str:
    from edgepilot.untrusted import file_kind

    return file_kind(mode)


def same_file(a: PathLike, b: PathLike) -> bool:
    """Both names reach one file (hard link, symlink or the same path); False when either is absent."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def check_target(
    target: PathLike, *, inputs: Iterable[PathLike] = (), what: str = "output", fix: str = ""
) -> Path:
    """The target as a Path, or UserError: it is one of `inputs`, or it exists and is not a regular file, or
    this user may not replace it (`fix`: what to do then)."""
    path = Path(target)
    if "\0" in str(path):
        raise UserError(f"{what} path contains a NUL character")
    for source in inputs:
        if same_file(path, source):
            raise UserError(f"{what} {path} is an input file itself; give another name (nothing was written)")
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return path
    except OSError as exc:  # a folder on the way that this user may not enter, a name too long
        then = f"; {fix}" if fix else ""
        why = refused_where(path, exc) if is_denied(exc) else exc.strerror or exc
        raise UserError(f"cannot write {what} {path}: {why}{then}") from None
    if stat.S_ISDIR(mode):
        raise UserError(f"{what} {path} is a directory; give the path of a file")
    if not stat.S_ISREG(mode):
        raise UserError(f"{what} {path} is {_kind(mode)}, not a regular file; refusing to replace it")
    if _kept_by_sticky_folder(path):
        raise cannot_write(
            path, "another user's file in a shared folder", fix or "remove it or give another name", what=what
        )
    return path


def _kept_by_sticky_folder(path: Path) -> bool:
    """A folder with the sticky bit (/tmp, a shared folder) lets only the owner of a file (or of the folder)
    replace it: os.replace would fail after the whole output was written."""
    try:
        mine, folder = os.lstat(path), os.stat(path.parent if str(path.parent) else ".")
    except OSError:
        return False
    uid = os.geteuid()
    return bool(folder.st_mode & stat.S_ISVTX) and uid not in (0, mine.st_uid, folder.st_uid)


def write_failure(exc: OSError, what: str, path: PathLike, fix: str = "") -> UserError:
    """One line for an OSError met while writing `what` at `path`; `fix` says what to do about a folder that
    is not writable (e.g. "choose a folder you can write with --out")."""
    if isinstance(exc, PermissionError) or exc.errno == errno.EROFS:
        then = f": {fix}" if fix else ""
        return UserError(
            f"cannot write {what} in {Path(path).parent or '.'}: not writable ({exc.strerror}){then}"
        )
    if exc.errno == errno.ENOSPC:
        return UserError(f"cannot write {what} {path}: no space left on the device")
    if isinstance(exc, NotADirectoryError) or exc.errno == errno.ENOTDIR:
        return UserError(f"cannot write {what} {path}: a part of the path is not a directory")
    if isinstance(exc, FileNotFoundError):
        return UserError(f"cannot write {what} {path}: its folder does not exist")
    return UserError(f"cannot write {what} {path}: {exc.strerror or exc}")


def fresh_temp(directory: PathLike, prefix: str, suffix: str = ".tmp") -> tuple[int, Path]:
    """A new, empty file in `directory` under a random name (mkstemp: O_EXCL|O_NOFOLLOW): (fd, path)."""
    import tempfile  # it loads shutil and random: only once something is written

    fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=os.fspath(directory))
    os.fchmod(fd, 0o644)
    return fd, Path(name)


@contextlib.contextmanager
def atomic_write(
    target: PathLike,
    *,
    inputs: Iterable[PathLike] = (),
    what: str = "output",
    mode: str = "wb",
    fix: str = "",
) -> Iterator[BinaryIO]:
    """Write `target` through a fresh temporary file beside it, replaced in one step when the block ends
    without an exception (the temporary file is removed otherwise). OSErrors become one-line UserErrors
    (`fix`: what to do when the folder is not writable, as write_failure says it)."""
    path, fd, tmp = _fresh_beside(target, inputs, what, ".tmp", fix)
    with _replace_when_done(path, tmp, inputs, what, fix), os.fdopen(fd, mode) as f:
        yield f  # type: ignore[misc]
        f.flush()
        os.fsync(f.fileno())


@contextlib.contextmanager
def atomic_path(
    target: PathLike,
    *,
    inputs: Iterable[PathLike] = (),
    what: str = "output",
    suffix: str = ".tmp",
    fix: str = "",
) -> Iterator[Path]:
    """atomic_write for a writer that opens a file by name (llama.cpp's quantizer, a child process): the
    name of a fresh, empty temporary file beside the target (created exclusively: nothing it could follow),
    moved onto the target when the block ends without an exception and removed otherwise."""
    path, fd, tmp = _fresh_beside(target, inputs, what, suffix, fix)
    os.close(fd)
    with _replace_when_done(path, tmp, inputs, what, fix):
        yield tmp


def _fresh_beside(
    target: PathLike, inputs: Iterable[PathLike], what: str, suffix: str, fix: str = ""
) -> tuple[Path, int, Path]:
    """The checked target, and a fresh temporary file beside it: (target, fd, temporary path)."""
    path = check_target(target, inputs=inputs, what=what, fix=fix)
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = fresh_temp(directory, f".{path.name}.", suffix)
    except OSError as exc:
        raise write_failure(exc, what, path, fix) from None
    return path, fd, tmp


@contextlib.contextmanager
def _replace_when_done(
    path: Path, tmp: Path, inputs: Iterable[PathLike], what: str, fix: str = ""
) -> Iterator[None]:
    """Move tmp onto path when the block ends without an exception (the target checked again: it may have
    changed while we wrote); remove tmp otherwise. OSErrors become one-line UserErrors."""
    try:
        yield
        check_target(path, inputs=inputs, what=what, fix=fix)
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        raise write_failure(exc, what, path, fix) from None
    except BaseException:
        _discard(tmp)
        raise


def write_bytes(
    target: PathLike, data: bytes, *, inputs: Iterable[PathLike] = (), what: str = "output", fix: str = ""
) -> None:
    with atomic_write(target, inputs=inputs, what=what, fix=fix) as f:
        f.write(data)


def write_text(
    target: PathLike, text: str, *, inputs: Iterable[PathLike] = (), what: str = "output", fix: str = ""
) -> None:
    write_bytes(target, text.encode("utf-8"), inputs=inputs, what=what, fix=fix)


def open_partial(path: PathLike, *, what: str = "partial download", fix: str = "") -> BinaryIO:
    """A resumable partial file (kept between runs under a fixed name), opened for reading and appending:
    never through a symlink, never a FIFO, device or directory (O_NONBLOCK: a FIFO cannot block the open).
    `fix`: what to do when its folder is not writable."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if isinstance(exc, PermissionError) and os.path.lexists(path):  # the file, not its folder
            raise cannot_write(path, exc, PARTIAL_FIX, what=what) from None
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise UserError(f"{what} {path} is a symbolic link; remove it and try again") from None
        if exc.errno == errno.EISDIR:
            raise UserError(f"{what} {path} is a directory; remove it and try again") from None
        if exc.errno == errno.ENXIO:
            raise UserError(f"{what} {path} is a FIFO or socket; remove it and try again") from None
        raise write_failure(exc, what, path, fix) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UserError(f"{what} {path} is {_kind(mode)}, not a regular file; remove it and try again")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "r+b")


def _discard(tmp: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)
