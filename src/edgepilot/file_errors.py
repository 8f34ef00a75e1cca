"""One line for a file operation the system refused: the path, why, and what to do.

Our users are never root (Termux runs every app as a uid of its own, a Pi user is `pi`): a folder they cannot
write or a file they cannot read is an everyday answer, said as `cannot write PATH (permission denied): FIX`
(exit 2), never a traceback. Long work checks its output folder first (check_writable_folder), and still
turns a refusal at the write itself into the same line.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from edgepilot.errors import UserError

PathLike = str | os.PathLike[str]
TMPDIR_FIX = "set TMPDIR to a folder you can write"


def refused(exc: OSError) -> bool:
    """The system refused the operation (permissions, a read-only filesystem): not a missing or bad file."""
    return isinstance(exc, PermissionError) or exc.errno == errno.EROFS


def reason(exc: OSError | str) -> str:
    """Why, in a few words: "permission denied", "read-only file system", "no space left on the device"."""
    if isinstance(exc, str):
        return exc
    if exc.errno == errno.EROFS:
        return "read-only file system"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if exc.errno == errno.ENOSPC:
        return "no space left on the device"
    text = exc.strerror or str(exc)
    return text[:1].lower() + text[1:]


def _named(what: str, path: PathLike) -> str:
    return f"{what} {path}" if what else str(path)


def cannot_write(path: PathLike, exc: OSError | str, fix: str, *, what: str = "") -> UserError:
    """`cannot write [WHAT] PATH (WHY): FIX`."""
    return UserError(f"cannot write {_named(what, path)} ({reason(exc)}): {fix}")


def cannot_read(path: PathLike, exc: OSError | str, fix: str, *, what: str = "") -> UserError:
    """`cannot read [WHAT] PATH (WHY): FIX`."""
    return UserError(f"cannot read {_named(what, path)} ({reason(exc)}): {fix}")


def file_in_the_way(path: PathLike) -> Path | None:
    """The nearest of `path` and its ancestors that exists and is not a directory (a file where a folder
    should be), or None."""
    for candidate in (Path(path).absolute(), *Path(path).absolute().parents):
        try:
            mode = os.stat(candidate).st_mode
        except OSError:
            continue
        return None if stat.S_ISDIR(mode) else candidate
    return None


def no_temporary_folder() -> UserError:
    """tempfile found no folder this user can write ($TMPDIR, /tmp, /var/tmp, the working folder)."""
    where = os.environ.get("TMPDIR") or "/tmp"
    return cannot_write(where, "no temporary folder is writable", TMPDIR_FIX, what="a temporary file in")


def _read_only_fs(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def check_writable_folder(folder: PathLike, fix: str, *, what: str = "", make: bool = False) -> Path:
    """`folder` as a directory this user can create files in (made with its parents when `make`), or the
    one line naming it and `fix`: called before long work, so a refusal comes before minutes of it."""
    path = Path(folder)
    try:
        if make:
            path.mkdir(parents=True, exist_ok=True)
        mode = os.stat(path).st_mode
    except (FileExistsError, NotADirectoryError):
        blocker = file_in_the_way(path) or path
        raise UserError(f"cannot make {_named(what, path)}: {blocker} is not a directory") from None
    except FileNotFoundError:
        raise UserError(f"{_named(what, path)} does not exist: {fix}") from None
    except OSError as exc:
        raise cannot_write(path, exc, fix, what=what) from None
    if not stat.S_ISDIR(mode):
        raise UserError(f"{_named(what, path)} is not a directory: {fix}")
    if not os.access(path, os.W_OK | os.X_OK):
        why = "read-only file system" if _read_only_fs(path) else "permission denied"
        raise cannot_write(path, why, fix, what=what)
    return path
