"""Capture llama.cpp's own log (ggml + llama) instead of letting it spill onto the terminal.

The lines are kept: the doctor and the memory model read them (buffer sizes, allocation failures).
"""

from __future__ import annotations

import ctypes
import sys
import threading

import llama_cpp

_lock = threading.Lock()
_lines: list[str] = []
_partial: list[str] = []
_echo = False
_MAX_LINES = 20_000


@llama_cpp.llama_log_callback
def _callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    piece = text.decode("utf-8", errors="replace")
    with _lock:
        _partial.append(piece)
        if piece.endswith("\n"):
            line = "".join(_partial)
            _partial.clear()
            if len(_lines) < _MAX_LINES:
                _lines.append(line)
    if _echo:
        sys.stderr.write(piece)


def install(echo: bool = False) -> None:
    """Route llama.cpp's log through our callback; `echo` also prints it to stderr (--verbose)."""
    global _echo
    _echo = echo
    llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))


def mark() -> int:
    with _lock:
        return len(_lines)


def lines_since(start: int = 0) -> list[str]:
    with _lock:
        return list(_lines[start:])
