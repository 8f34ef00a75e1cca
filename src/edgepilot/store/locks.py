"""Locks that let several `edgepilot pull`/`rm` processes share one model store (fcntl.flock, advisory).

- The store lock (`<store>/.lock`) guards every read-modify-write of the manifest: without it, pulls that
  finish together each write back the manifest they read and the others' entries are lost.
- A download claims its `NAME.part` with an exclusive lock on the part itself: a second pull of the same file
  waits for the first, then finds the file finished (or resumes the part the first one left).

Lock files are opened with safe_write.open_partial (no symlink followed, never a FIFO or a directory).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from edgepilot import safe_write
from edgepilot.file_errors import writable_folder

LOCK_NAME = ".lock"
STORE_FIX = "choose a folder you can write with --store (or EDGEPILOT_MODELS_DIR)"


def make_folder(folder: Path, what: str) -> None:
    """folder and its parents, made when missing and writable by this user, or one line saying why not
    (`what`: the thing to be written there, as in "cannot write the model store in FOLDER")."""
    writable_folder(folder, what, STORE_FIX)


def _lock(f: BinaryIO, on_wait: Callable[[], None] | None) -> None:
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if on_wait is not None:
            on_wait()
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)


@contextlib.contextmanager
def store_lock(store: Path) -> Iterator[None]:
    """The store's lock held for the duration of the block (the store is created when absent, and must be
    writable: the manifest is written beside the lock)."""
    make_folder(store, "the model store")
    with safe_write.open_partial(store / LOCK_NAME, what="the model store's lock file", fix=STORE_FIX) as f:
        _lock(f, None)
        yield


def _same_file(f: BinaryIO, path: Path) -> bool:
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(f.fileno())
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


@contextlib.contextmanager
def claim_part(part: Path, on_wait: Callable[[], None] | None = None) -> Iterator[BinaryIO]:
    """`part` opened for reading and writing, exclusively locked for the block.

    The holder before us may have renamed the part to the finished file (or deleted it) while we waited:
    the lock we got is then on a file that is no longer the part, so the part is opened and locked afresh.
    """
    while True:
        f = safe_write.open_partial(part, fix=STORE_FIX)
        try:
            _lock(f, on_wait)
            if _same_file(f, part):
                break
        except BaseException:
            f.close()
            raise
        f.close()
    with f:
        yield f


def remove_unclaimed(part: Path) -> None:
    """Delete an unfinished download unless a pull is filling it now (its lock is held)."""
    try:
        fd = os.open(part, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # absent, a symlink, or unreadable: left alone
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.path.samestat(os.fstat(fd), os.stat(part, follow_symlinks=False)):
            os.unlink(part)
    except OSError:
        return  # held by a running pull, or gone meanwhile
    finally:
        os.close(fd)
