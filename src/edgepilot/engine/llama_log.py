"""Capture llama.cpp's own log (ggml + llama) instead of letting it spill onto the terminal.

The lines are kept: the doctor and the memory model read them (buffer sizes, allocation failures).
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections import deque

from edgepilot.engine import interrupts
from edgepilot.engine.llama_binding import llama_cpp
from edgepilot.shown import shown_lines

_lock = threading.Lock()
_MAX_LINES = 20_000  # a long-running server keeps the most recent lines only
_lines: deque[str] = deque(maxlen=_MAX_LINES)
_total = 0  # lines ever captured: marks stay valid after old lines are dropped
_partial: list[str] = []
_echo = False


def _capture(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    global _total
    piece = text.decode("utf-8", errors="replace")
    with _lock:
        _partial.append(piece)
        if piece.endswith("\n"):
            _lines.append("".join(_partial))
            _partial.clear()
            _total += 1
    if _echo:  # it quotes the model's metadata (general.name, ...): escaped for the terminal
        sys.stderr.write(shown_lines(piece))


# guarded: a Ctrl-C landing in here is recorded and raised once llama.cpp returns (engine/interrupts.py)
_callback = llama_cpp.llama_log_callback(interrupts.guard_callback(_capture, None))


def install(echo: bool = False) -> None:
    """Route llama.cpp's log through our callback; `echo` also prints it to stderr (--verbose)."""
    global _echo
    _echo = echo
    llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))


def mark() -> int:
    with _lock:
        return _total


def lines_since(start: int = 0) -> list[str]:
    """Lines captured since mark() returned `start` (those still kept)."""
    with _lock:
        first_kept = _total - len(_lines)
        skip = max(0, start - first_kept)
        return list(_lines)[skip:]
