"""Text from outside (file names, repository ids, a model's metadata, log lines) made safe to print, as `ls`
shows a file name: a character a terminal would act on or that reorders the text around it is written as its
escape (ESC as `\\x1b`, a right-to-left override as `\\u202e`).

A name is a stranger's data: `\\x1b[2J` in it would clear the user's screen, an OSC sequence could set the
window title or a clipboard, and a bidi override makes `exe.gguf` read as `fuug.exe`. Escaped are the
characters Python calls unprintable (control, format, surrogate, private-use, unassigned, line and paragraph
separators) except spaces; a lone surrogate that stands for an undecodable byte of a file name
(surrogateescape) is shown as that byte. JSON output is left raw: it is data, and json escapes controls.
"""

from __future__ import annotations

import shlex
import unicodedata
from collections.abc import Iterable

_LAYOUT = frozenset("\n\t")  # what shown_lines keeps: newlines and tabs of a block of text


def _escape(ch: str) -> str:
    n = ord(ch)
    if 0xDC80 <= n <= 0xDCFF:  # os.fsdecode's stand-in for the byte n - 0xDC00
        return f"\\x{n - 0xDC00:02x}"
    if n <= 0xFF:
        return f"\\x{n:02x}"
    if n <= 0xFFFF:
        return f"\\u{n:04x}"
    return f"\\U{n:08x}"


def _keeps(ch: str, keep: Iterable[str] = ()) -> bool:
    return ch.isprintable() or ch in keep or unicodedata.category(ch) == "Zs"


def shown(text: object) -> str:
    """`text` (str() of it) on one line with every unsafe character escaped: for a name or a quoted line."""
    s = str(text)
    if s.isprintable():  # the usual case, at C speed
        return s
    return "".join(ch if _keeps(ch) else _escape(ch) for ch in s)


def shown_lines(text: str) -> str:
    """Like shown(), but newlines and tabs stay: for a block of text whose lines are ours to lay out."""
    if text.isprintable():
        return text
    return "".join(ch if _keeps(ch, _LAYOUT) else _escape(ch) for ch in text)


def is_safe(text: str) -> bool:
    """Whether shown_lines(text) is text itself."""
    return text.isprintable() or all(_keeps(ch, _LAYOUT) for ch in text)


def shell_word(arg: str) -> str:
    """`arg` quoted for a shell command line we print (copy-pasteable): shlex.quote, or bash's $'...' with
    escapes when it holds a character shown() would escape (so the line is safe and still names the file)."""
    if shown(arg) == arg:
        return shlex.quote(arg)
    body = "".join("\\" + ch if ch in "\\'" else ch if _keeps(ch) else _escape(ch) for ch in arg)
    return f"$'{body}'"
