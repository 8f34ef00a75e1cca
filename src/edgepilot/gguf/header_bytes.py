"""How the header parser reads the file: a window sliding over it, and runs of short strings stepped over.

A GGUF string is a little-endian u64 length and that many bytes. Walking 150k of them one Python step at a
time takes most of a 7B model's `fit`; the regular expression below steps over RUN strings per call. Each
alternative is one length under SHORT (its first byte, seven zero bytes, then exactly that many bytes), so a
string matches exactly one alternative and the pattern never backtracks far: linear time on any input. A run
that does not match (a longer string, a hostile length, the end of the bytes given) is left to the caller's
checked step, which reports the defect as it always has.
"""

from __future__ import annotations

import functools
import re
import sys
from typing import Any

SHORT = 128  # strings shorter than this are stepped over in runs: all but a few hundred of a vocabulary
RUN = 64  # strings per match
RUN_SPAN = RUN * (8 + SHORT - 1)  # the most bytes one run can cover


class Window:
    """A sliding window over the file: memory stays at about CHUNK bytes whatever the header claims."""

    CHUNK = 1 << 20

    def __init__(self, f: Any):
        self.f = f
        self.base = 0
        self.win = b""

    def at(self, pos: int, n: int) -> int:
        """Make bytes [pos, pos+n) available; return their offset in self.win."""
        off = pos - self.base
        if off >= 0 and off + n <= len(self.win):
            return off
        self.f.seek(pos)
        self.win = self.f.read(max(n, self.CHUNK))
        self.base = pos
        if len(self.win) < n:
            raise OSError(f"the file became shorter while being read (at byte {pos})")
        return 0


@functools.cache
def _run() -> re.Pattern[bytes]:
    # the length byte and its seven zero bytes as themselves, not as escapes: parsed and matched faster
    item = b"|".join(re.escape(bytes([k])) + b"\x00" * 7 + (b".{%d}" % k if k else b"") for k in range(SHORT))
    possessive = b"+" if sys.version_info >= (3, 11) else b""  # skips keeping backtrack state (3.11+)
    return re.compile(b"(?s)(?:" + item + b"){%d}" % RUN + possessive)


def step_runs(buf: bytes, off: int, end: int, runs: int) -> tuple[int, int]:
    """Step over at most `runs` runs of RUN short strings in buf[off:end]: (the offset after the last whole
    run, the strings stepped over). It stops at a run that holds a longer string or does not end by `end`."""
    match = _run().match
    done = 0
    while done < runs:
        found = match(buf, off, end)
        if found is None:
            break
        off = found.end()
        done += 1
    return off, done * RUN
