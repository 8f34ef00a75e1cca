"""Reading input we did not write (files a user or a stranger hands us, JSON inside them) with bounds.

`open()` on a FIFO blocks until a writer shows up, and `read()` on a FIFO or a character device may never end;
so a file is opened with O_NONBLOCK (which regular files ignore), checked with fstat, and refused unless it is
a regular file. /proc and /sys files are regular files to fstat too (with a size of 0 or one page), so reads
stop at a cap rather than trusting st_size. JSON is parsed with a nesting limit.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from edgepilot.errors import UserError
from edgepilot.file_errors import closed_folder_refusal

READ_CHUNK = 64 << 10  # small reads: procfs sysctl files fail a huge read() with ENOMEM
JSON_MAX_DEPTH = 32

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)


class NotRegularFile(OSError):
    """The path is a FIFO, socket or device: reading it could block forever or never end."""

    def __init__(self, path: str | os.PathLike[str], kind: str) -> None:
        super().__init__(errno.EINVAL, f"is {kind}, not a regular file", str(path))
        self.kind = kind


class FileTooLarge(OSError):
    def __init__(self, path: str | os.PathLike[str], limit: int) -> None:
        super().__init__(errno.EFBIG, f"is larger than {human_size(limit)}", str(path))
        self.limit = limit


def human_size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


def file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """A binary file object for a regular file; never blocks on a FIFO.

    Raises IsADirectoryError for a directory, NotRegularFile for anything else that is not a regular file,
    and the usual OSError subclasses (FileNotFoundError, PermissionError, ...).
    """
    fd = os.open(path, _OPEN_FLAGS)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise NotRegularFile(path, file_kind(mode))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_open(f: BinaryIO, limit: int, path: str | os.PathLike[str] = "") -> bytes:
    """At most `limit` bytes of an open file; FileTooLarge when there is more (st_size is checked first so a
    sparse 1 GiB file costs nothing)."""
    if os.fstat(f.fileno()).st_size > limit:
        raise FileTooLarge(path, limit)
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = f.read(min(READ_CHUNK, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise FileTooLarge(path, limit)
    return b"".join(chunks)


def read_capped(path: str | os.PathLike[str], limit: int) -> bytes:
    """The whole content of a regular file of at most `limit` bytes (OSError otherwise)."""
    with open_regular(path) as f:
        return read_open(f, limit, path)


def failure(exc: OSError, what: str, path: str | os.PathLike[str]) -> UserError:
    """One line saying why `what` (e.g. "prompt file") at `path` could not be read."""
    if isinstance(exc, FileNotFoundError):
        return UserError(f"{what} not found: {path}")
    if isinstance(exc, IsADirectoryError) or exc.errno == errno.EISDIR:
        return UserError(f"{what} {path} is a directory; give the path of a file")
    if isinstance(exc, PermissionError):
        blocked = closed_folder_refusal(path, what)
        return blocked or UserError(f"no permission to read {what} {path}; check its mode (ls -l)")
    if isinstance(exc, NotRegularFile):
        return UserError(f"{what} {path} is {exc.kind}, not a regular file; give the path of a file")
    if isinstance(exc, FileTooLarge):
        return UserError(f"{what} {path} is larger than {human_size(exc.limit)}")
    return UserError(f"cannot read {what} {path}: {exc.strerror or exc}")


def read_user_file(path: str | os.PathLike[str], what: str, limit: int) -> bytes:
    """A file named on the command line: its bytes, or a UserError with one clear line."""
    if "\0" in str(path):  # os.open would raise ValueError
        raise UserError(f"{what} path contains a NUL character")
    try:
        return read_capped(Path(path).expanduser(), limit)
    except OSError as exc:
        raise failure(exc, what, path) from None
    except ValueError as exc:  # a path that is no file name (lone surrogates): os.open refuses it
        raise UserError(f"{what} path {valid_text(str(path))[:200]!r} cannot be opened ({exc})") from None


def valid_text(text: str) -> str:
    """`text` with lone surrogates (legal in a JSON escape like "\\ud800", not encodable as UTF-8, so a crash
    when printed) replaced by U+FFFD."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


class JsonTooDeep(ValueError):
    pass


def loads_json(text: str | bytes, max_depth: int = JSON_MAX_DEPTH) -> Any:
    """json.loads that raises ValueError (never RecursionError) for input nested deeper than max_depth."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise JsonTooDeep(f"JSON nested deeper than {max_depth} levels") from None
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > max_depth:
            raise JsonTooDeep(f"JSON nested deeper than {max_depth} levels")
        stack.extend((child, depth + 1) for child in children)
    return data
