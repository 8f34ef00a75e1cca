"""Bounded line readers for streams we do not control: chat's stdin, doctor's logs, a supervised command's
output.

A line is never read whole before its length is known: `read_line` stops at a cap and skips the rest of an
overlong line chunk by chunk. A log is kept as its head and its tail (the start says what was loaded, the
end how it failed), each bounded in bytes and in lines, and every line is cut at a cap, so the cost of
scanning it does not grow with the file. Bytes become text with U+FFFD for invalid UTF-8: no lone
surrogates that would crash when printed.
"""

from __future__ import annotations

import os
from typing import BinaryIO

READ_CHUNK = 64 << 10


class LineTooLong(ValueError):
    """A line longer than the cap; it was skipped (`size` bytes, newline included)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"line of {size} bytes is longer than {limit}")
        self.size = size
        self.limit = limit


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def read_line(stream: BinaryIO, limit: int) -> bytes | None:
    """The next line of `stream` without its line ending, at most `limit` bytes; None at the end.

    A longer line is consumed to its end without being kept, then LineTooLong is raised: the next call
    reads the line after it."""
    line = stream.readline(limit + 1)
    if not line:
        return None
    if line.endswith(b"\n"):
        return line[:-1].removesuffix(b"\r")
    if len(line) <= limit:  # the last line, without a newline
        return line
    size = len(line)
    while True:
        chunk = stream.readline(READ_CHUNK)
        size += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            raise LineTooLong(size, limit)


class HeadTail:
    """The first `head` and the last `tail` bytes of a stream fed in chunks, and how much fell between."""

    def __init__(self, head: int, tail: int) -> None:
        self.head_limit, self.tail_limit = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        if len(self.tail) > 2 * self.tail_limit:  # trim in batches: del of a prefix moves the rest
            self._trim()

    def _trim(self) -> None:
        cut = len(self.tail) - self.tail_limit
        if cut > 0:
            self.dropped += cut
            del self.tail[:cut]

    def read_from(self, f: BinaryIO) -> HeadTail:
        """Everything `f` holds; a seekable regular file is not read in the middle."""
        try:
            seekable = f.seekable() and os.fstat(f.fileno()).st_size > 0
        except (OSError, ValueError):
            seekable = False
        if seekable:
            self.feed(f.read(self.head_limit))
            end = f.seek(0, os.SEEK_END)
            start = max(len(self.head), end - self.tail_limit)
            self.dropped += start - len(self.head)
            f.seek(start)
        while chunk := f.read(READ_CHUNK):
            self.feed(chunk)
        self._trim()
        return self

    def lines(self, head_lines: int, tail_lines: int, max_chars: int) -> list[str]:
        """The kept text as lines: at most `head_lines` from the start and `tail_lines` from the end, each
        cut at `max_chars`; a marker line where something was left out."""
        self._trim()
        if self.dropped:
            head, tail = bytes(self.head), bytes(self.tail)
        else:  # one piece of text: split it after its first head_lines lines
            head, tail = bytes(self.head + self.tail), b""
            cut = _nth_newline(head, head_lines)
            if cut is not None:
                head, tail = head[: cut + 1], head[cut + 1 :]
        skipped = self.dropped
        cut = _nth_newline(head, head_lines)
        if cut is not None:
            skipped += len(head) - cut - 1
            head = head[: cut + 1]
        start = _nth_newline_from_end(tail, tail_lines)
        if start is not None:
            skipped += start + 1
            tail = tail[start + 1 :]
        if not skipped:
            return _split(head + tail, max_chars)
        marker = f"[... {skipped} bytes of the log not read ...]"
        return [*_split(head, max_chars), marker, *_split(tail, max_chars)]


def _nth_newline(data: bytes, n: int) -> int | None:
    """The index of the n-th newline; None when there are fewer."""
    at = -1
    for _ in range(n):
        at = data.find(b"\n", at + 1)
        if at < 0:
            return None
    return at


def _nth_newline_from_end(data: bytes, n: int) -> int | None:
    """The index of the newline before the last n lines; None when there are not more than n."""
    at = len(data) - 1 if data.endswith(b"\n") else len(data)
    for _ in range(n):
        at = data.rfind(b"\n", 0, at)
        if at < 0:
            return None
    return at


def _split(data: bytes, max_chars: int) -> list[str]:
    return [ln if len(ln) <= max_chars else ln[:max_chars] + "…" for ln in decode(data).splitlines()]
