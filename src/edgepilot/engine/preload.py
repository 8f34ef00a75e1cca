"""Warm the page cache with a model file before the first request: the first token need not wait on storage.

llama.cpp maps the model (mmap): the first prompt faults every weight page in from storage, which on a phone's
flash or an SD card makes the first token seconds late. Reading the file once beforehand (after a
posix_fadvise(WILLNEED) hint that starts the kernel's readahead) puts it in the page cache, where the mapping
finds it. Only worth it when the model fits memory: a file larger than what stays free evicts its own first
pages while the last ones are read. Bounded in time and interruptible (Ctrl-C raises as usual).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CHUNK = 4 << 20
MAX_SECONDS = 120.0  # past this the rest is left to the mapping's own page faults


@dataclass
class Preload:
    bytes_read: int
    file_bytes: int
    seconds: float
    complete: bool  # False: stopped at the time limit


def skip_reason(fits: bool, use_mmap: bool) -> str | None:
    """Why a preload would not help, or None when it should run."""
    if not fits:
        return "the model does not fit the memory budget: a preload would evict its own pages"
    if not use_mmap:
        return "--no-mmap: llama.cpp reads the file into its own memory anyway"
    return None


def preload(
    path: str | os.PathLike[str],
    on_progress: Callable[[int, int], None] | None = None,
    max_seconds: float = MAX_SECONDS,
) -> Preload:
    """Read the whole file once (sequentially, into one reused buffer) so its pages are cached."""
    t0 = time.perf_counter()
    fd = os.open(Path(path), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        if hasattr(os, "posix_fadvise"):
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            except OSError:
                pass  # a filesystem without fadvise (some FUSE ones): the reads below still warm it
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        done = 0
        while done < size:
            n = os.preadv(fd, [view], done)
            if n <= 0:
                break
            done += n
            if on_progress is not None:
                on_progress(done, size)
            if time.perf_counter() - t0 > max_seconds:
                break
        return Preload(done, size, round(time.perf_counter() - t0, 4), done >= size)
    finally:
        os.close(fd)
