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
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from edgepilot.errors import UserError

PathLike = str | os.PathLike[str]
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


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


def check_target(target: PathLike, *, inputs: Iterable[PathLike] = (), what: str = "output") -> Path:
    """The target as a Path, or UserError: it is one of `inputs`, or it exists and is not a regular file."""
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
    except OSError as exc:
        raise UserError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise UserError(f"{what} {path} is a directory; give the path of a file")
    if not stat.S_ISREG(mode):
        raise UserError(f"{what} {path} is {_kind(mode)}, not a regular file; refusing to replace it")
    return path


def write_failure(exc: OSError, what: str, path: PathLike) -> UserError:
    """One line for an OSError met while writing `what` at `path`."""
    if isinstance(exc, PermissionError) or exc.errno == errno.EROFS:
        return UserError(f"cannot write {what} in {Path(path).parent or '.'}: not writable ({exc.strerror})")
    if exc.errno == errno.ENOSPC:
        return UserError(f"cannot write {what} {path}: no space left on the device")
    if isinstance(exc, NotADirectoryError) or exc.errno == errno.ENOTDIR:
        return UserError(f"cannot write {what} {path}: a part of the path is not a directory")
    if isinstance(exc, FileNotFoundError):
        return UserError(f"cannot write {what} {path}: its folder does not exist")
    return UserError(f"cannot write {what} {path}: {exc.strerror or exc}")


def fresh_temp(directory: PathLike, prefix: str, suffix: str = ".tmp") -> tuple[int, Path]:
    """A new, empty file in `directory` under a random name (mkstemp: O_EXCL|O_NOFOLLOW): (fd, path)."""
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=os.fspath(directory))
    os.fchmod(fd, 0o644)
    return fd, Path(name)


@contextlib.contextmanager
def atomic_write(
    target: PathLike, *, inputs: Iterable[PathLike] = (), what: str = "output", mode: str = "wb"
) -> Iterator[BinaryIO]:
    """Write `target` through a fresh temporary file beside it, replaced in one step when the block ends
    without an exception (the temporary file is removed otherwise). OSErrors become one-line UserErrors."""
    path, fd, tmp = _fresh_beside(target, inputs, what, ".tmp")
    with _replace_when_done(path, tmp, inputs, what), os.fdopen(fd, mode) as f:
        yield f  # type: ignore[misc]
        f.flush()
        os.fsync(f.fileno())


@contextlib.contextmanager
def atomic_path(
    target: PathLike, *, inputs: Iterable[PathLike] = (), what: str = "output", suffix: str = ".tmp"
) -> Iterator[Path]:
    """atomic_write for a writer that opens a file by name (llama.cpp's quantizer, a child process): the
    name of a fresh, empty temporary file beside the target (created exclusively: nothing it could follow),
    moved onto the target when the block ends without an exception and removed otherwise."""
    path, fd, tmp = _fresh_beside(target, inputs, what, suffix)
    os.close(fd)
    with _replace_when_done(path, tmp, inputs, what):
        yield tmp


def _fresh_beside(
    target: PathLike, inputs: Iterable[PathLike], what: str, suffix: str
) -> tuple[Path, int, Path]:
    """The checked target, and a fresh temporary file beside it: (target, fd, temporary path)."""
    path = check_target(target, inputs=inputs, what=what)
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = fresh_temp(directory, f".{path.name}.", suffix)
    except OSError as exc:
        raise write_failure(exc, what, path) from None
    return path, fd, tmp


@contextlib.contextmanager
def _replace_when_done(path: Path, tmp: Path, inputs: Iterable[PathLike], what: str) -> Iterator[None]:
    """Move tmp onto path when the block ends without an exception (the target checked again: it may have
    changed while we wrote); remove tmp otherwise. OSErrors become one-line UserErrors."""
    try:
        yield
        check_target(path, inputs=inputs, what=what)
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        raise write_failure(exc, what, path) from None
    except BaseException:
        _discard(tmp)
        raise


def ensure_dir(path: PathLike, *, what: str = "folder") -> Path:
    """`path` as a directory edgepilot can write in (made with its parents when missing), or UserError."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UserError(f"{what} {folder} is not a directory") from None
    except OSError as exc:
        raise write_failure(exc, what, folder) from None
    if not folder.is_dir():
        raise UserError(f"{what} {folder} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"cannot write in {what} {folder}: not writable")
    return folder


def write_bytes(
    target: PathLike, data: bytes, *, inputs: Iterable[PathLike] = (), what: str = "output"
) -> None:
    with atomic_write(target, inputs=inputs, what=what) as f:
        f.write(data)


def write_text(target: PathLike, text: str, *, inputs: Iterable[PathLike] = (), what: str = "output") -> None:
    write_bytes(target, text.encode("utf-8"), inputs=inputs, what=what)


def open_partial(path: PathLike, *, what: str = "partial download") -> BinaryIO:
    """A resumable partial file (kept between runs under a fixed name), opened for reading and appending:
    never through a symlink, never a FIFO, device or directory (O_NONBLOCK: a FIFO cannot block the open)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise UserError(f"{what} {path} is a symbolic link; remove it and try again") from None
        if exc.errno == errno.EISDIR:
            raise UserError(f"{what} {path} is a directory; remove it and try again") from None
        if exc.errno == errno.ENXIO:
            raise UserError(f"{what} {path} is a FIFO or socket; remove it and try again") from None
        raise write_failure(exc, what, path) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UserError(f"{what} {path} is {_kind(mode)}, not a regular file; remove it and try again")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "r+b")


def _discard(tmp: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)
