"""One line for a file or folder edgepilot may not read or write: the path, what refused (permissions, a
read-only file system) and what to do. Our users are never root (Termux runs each app as its own uid), so a
folder a `sudo edgepilot ...` left behind, another user's folder or a read-only mount is what they meet.

A store edgepilot can do without (a calibration, a check cache) is skipped with one note per process
instead (note_once).
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

from edgepilot.errors import UserError

DENIED_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)
_noted: set[str] = set()


def is_denied(exc: BaseException) -> bool:
    """A refusal by permissions or a read-only file system (not a missing file, not a full disk)."""
    return isinstance(exc, OSError) and (isinstance(exc, PermissionError) or exc.errno in DENIED_ERRNOS)


def escaped(path: str | bytes | os.PathLike[str] | int) -> str:
    """A path for a one-line message: control characters (a newline, an escape sequence) and undecodable
    bytes shown escaped as Python writes them, so a hostile name cannot forge or hide output."""
    text = os.fsdecode(path) if isinstance(path, (bytes, os.PathLike)) else str(path)
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def refusal(exc: OSError) -> str:
    return "read-only file system" if exc.errno == errno.EROFS else "permission denied"


def nearest_folder(path: str | os.PathLike[str]) -> Path:
    """The nearest folder above (or at) `path` that this process can see: the one that refused to make it."""
    folder = Path(path)
    while not os.path.isdir(folder) and folder.parent != folder:
        folder = folder.parent
    return folder


def folder_refusal(folder: str | os.PathLike[str]) -> OSError | None:
    """Why this process may not create files in an existing `folder` (None: it may)."""
    if os.access(folder, os.W_OK | os.X_OK):
        return None
    try:
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    code = errno.EROFS if read_only else errno.EACCES
    return OSError(code, os.strerror(code), os.fspath(folder))


def cannot_write_in(folder: str | os.PathLike[str], what: str, exc: OSError, fix: str) -> UserError:
    return UserError(f"cannot write {what} in {escaped(folder)}: {refusal(exc)}; {fix}")


def cannot_read(path: str | os.PathLike[str], what: str, exc: OSError, fix: str) -> UserError:
    return UserError(f"cannot read {what} {escaped(path)}: {refused_where(path, exc)}; {fix}")


def refused_where(path: str | os.PathLike[str], exc: OSError) -> str:
    """"permission denied", naming the folder on the way to `path` that may not be entered, if one is."""
    if exc.errno == errno.EROFS:
        return refusal(exc)
    for folder in reversed(Path(os.path.abspath(path)).parents):
        if os.path.isdir(folder) and not os.access(folder, os.X_OK):
            return f"{refusal(exc)} in {escaped(folder)}"
    return refusal(exc)


def nearest_file(path: Path) -> Path:
    """The part of `path` that exists and is not a folder (what made a mkdir fail with ENOTDIR)."""
    for part in [path, *path.parents]:
        if os.path.lexists(part) and not os.path.isdir(part):
            return part
    return path


def writable_folder(
    folder: str | os.PathLike[str], what: str, fix: str, elsewhere: str | None = None
) -> Path:
    """`folder` made (with its parents) when missing and writable by this process, or a UserError naming the
    folder that refuses and what to do: `fix` for a refusal, `elsewhere` (default `fix`) for a folder that
    cannot be one (a file in the way)."""
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        in_the_way = escaped(nearest_file(path))
        raise UserError(f"cannot write {what}: {in_the_way} is not a directory; {elsewhere or fix}") from None
    except OSError as exc:
        if is_denied(exc):
            raise cannot_write_in(nearest_folder(path.parent), what, exc, fix) from None
        detail = exc.strerror or exc
        raise UserError(f"cannot write {what} in {escaped(path)}: {detail}; {elsewhere or fix}") from None
    refused = folder_refusal(path)
    if refused is not None:
        raise cannot_write_in(path, what, refused, fix)
    return path


def note_once(message: str) -> None:
    """One `edgepilot: note:` line on stderr, the first time this process has it to say."""
    if message in _noted:
        return
    _noted.add(message)
    sys.stderr.write(f"edgepilot: note: {message}\n")
    sys.stderr.flush()


def denied_message(exc: OSError, doing: str | None) -> str:
    """The line for a refusal no module foresaw (cli/app.py's user_errors); `doing`: the command."""
    names = [n for n in (exc.filename, exc.filename2) if n is not None]
    where = " -> ".join(escaped(n) for n in names) or "(no path given)"
    context = f" (during {doing})" if doing else ""
    if exc.errno == errno.EROFS:
        return f"permission denied: {where}{context}: a read-only file system; choose another path"
    return (
        f"permission denied: {where}{context}: give yourself access to it (ls -ld shows its owner) "
        "or choose another path"
    )
