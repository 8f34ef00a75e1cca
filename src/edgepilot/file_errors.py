"""One line for a file operation the system refused: the path, why, and what to do.

Our users are never root (Termux runs every app as a uid of its own, a Pi user is `pi`): a folder they cannot
write, a file they cannot read, a folder a `sudo edgepilot ...` left behind or a read-only mount is an
everyday answer, said in one line (exit 2), never a traceback. Long work checks its output folder first
(writable_folder: `cannot write WHAT in FOLDER: WHY; FIX`), and still turns a refusal at the write itself into
one line.
A store edgepilot can do without (a calibration, a check cache) is skipped with one note per process
instead (note_once).
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

from edgepilot.errors import UserError
from edgepilot.shown import shell_word, shown

PathLike = str | os.PathLike[str]
TMPDIR_FIX = "set TMPDIR to a folder you can write"
DENIED_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)
_noted: set[str] = set()


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


def not_a_directory(path: PathLike, fix: str, *, what: str = "") -> UserError:
    """`[WHAT] PATH is not a directory: FIX`, or `FILE is not a directory (on the way to [WHAT] PATH): FIX`
    when a file higher up stands where a folder should be."""
    named = _named(what, escaped(path))
    blocker = file_in_the_way(path)
    if blocker is None or blocker == Path(path).absolute():
        return UserError(f"{named} is not a directory: {fix}")
    return UserError(f"{escaped(blocker)} is not a directory (on the way to {named}): {fix}")


def read_only_file_fix(path: PathLike, elsewhere: str) -> str:
    """What to do about a file this user may not write: `chmod u+w` on a file of its own, else `elsewhere`
    (a file of another user is not its to change)."""
    try:
        own = os.stat(path).st_uid == os.geteuid()
    except OSError:
        own = False
    return f"chmod u+w {escaped(path)}" if own else elsewhere


def no_temporary_folder() -> UserError:
    """tempfile found no folder this user can write ($TMPDIR, /tmp, /var/tmp, the working folder)."""
    where = os.environ.get("TMPDIR") or "/tmp"
    return cannot_write(where, "no temporary folder is writable", TMPDIR_FIX, what="a temporary file in")


def is_denied(exc: BaseException) -> bool:
    """A refusal by permissions or a read-only file system (not a missing file, not a full disk)."""
    return isinstance(exc, OSError) and (isinstance(exc, PermissionError) or exc.errno in DENIED_ERRNOS)


def escaped(path: str | bytes | os.PathLike[str] | int) -> str:
    """A path for a one-line message, escaped as edgepilot.shown escapes names from outside."""
    return shown(os.fsdecode(path) if isinstance(path, (bytes, os.PathLike)) else str(path))


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


def cannot_read(path: PathLike, exc: OSError | str, fix: str, *, what: str = "") -> UserError:
    """`cannot read [WHAT] PATH: WHY; FIX`, WHY naming a folder on the way that may not be entered."""
    why = exc if isinstance(exc, str) else refused_where(path, exc)
    return UserError(f"cannot read {_named(what, escaped(path))}: {why}; {fix}")


def refused_where(path: str | os.PathLike[str], exc: OSError) -> str:
    """ "permission denied", naming the folder on the way to `path` that may not be entered, if one is."""
    if exc.errno == errno.EROFS:
        return reason(exc)
    folder = closed_folder(path)
    return reason(exc) if folder is None else f"{reason(exc)} in {escaped(folder)}"


def closed_folder(path: str | os.PathLike[str]) -> Path | None:
    """The outermost folder on the way to `path` that this user may not enter, or None."""
    for folder in reversed(Path(os.path.abspath(os.path.expanduser(path))).parents):
        if os.path.isdir(folder) and not os.access(folder, os.X_OK):
            return folder
    return None


def closed_folder_refusal(path: str | os.PathLike[str], what: str) -> UserError | None:
    """The line for a file this user may not read because a folder on the way is not open to it (the
    file's own mode is not the cause, so "check its mode" would mislead), or None when no folder is."""
    folder = closed_folder(path)
    if folder is None:
        return None
    return UserError(
        f"cannot read {_named(what, escaped(path))}: permission denied in {escaped(folder)}: that folder "
        f"is not open to you; move the file or ask its owner (ls -ld {shell_word(os.fspath(folder))})"
    )


def writable_folder(
    folder: PathLike, what: str, fix: str, elsewhere: str | None = None, *, make: bool = True
) -> Path:
    """`folder` as a directory this process can create files in (made with its parents when `make`), or
    `cannot write WHAT in FOLDER: WHY; FIX`, FOLDER the one that refuses: the nearest existing folder when
    making it was denied, the file in the way when one stands where a folder should be (then `elsewhere`,
    default `fix`: no chmod makes a file a folder). Called before long work, so a refusal comes first."""
    path = Path(folder)
    try:
        if make:
            path.mkdir(parents=True, exist_ok=True)
        mode = os.stat(path).st_mode
    except (FileExistsError, NotADirectoryError):
        in_the_way = file_in_the_way(path) or path
        raise cannot_write_in(what, in_the_way, "not a directory", elsewhere or fix) from None
    except FileNotFoundError:
        raise cannot_write_in(what, path, "no such folder", fix) from None
    except OSError as exc:
        if is_denied(exc):
            raise cannot_write_in(what, nearest_folder(path.parent), reason(exc), fix) from None
        raise cannot_write_in(what, path, reason(exc), elsewhere or fix) from None
    if not stat.S_ISDIR(mode):
        raise cannot_write_in(what, path, "not a directory", elsewhere or fix)
    refused = folder_refusal(path)
    if refused is not None:
        raise cannot_write_in(what, path, reason(refused), fix)
    return path


def cannot_write_in(what: str, folder: PathLike, why: str, fix: str) -> UserError:
    """`cannot write WHAT in FOLDER: WHY; FIX`: the one wording of a folder that refuses a write."""
    return UserError(f"cannot write {what} in {escaped(folder)}: {why}; {fix}")


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
