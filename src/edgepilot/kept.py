"""Files edgepilot keeps for itself (calibrations, profiles, the bandwidth figure, build stamps), read as the
input they are: another process, a full disk, a sync tool or a stranger may have written them.

A kept file is read through untrusted.py (a regular file only, never a FIFO or a device; at most the size
its writer keeps it under; JSON nested at most JSON_MAX_DEPTH deep), and every value in it is checked for
type and range before it is used: a bool is no count, NaN, infinity and strings are no figure. What does not
pass is left out, and said once per file (`Dropped.note`), naming the file; a file that cannot be read at all
is a note too, except when it is only missing.

A kept file whose values move a plan (the memory calibrations) is also sealed (`sealed`, `unsealed`): a digest
of its content written with it. A value can be damaged inside its valid range (a flipped digit, a truncated
sample, an edit by hand or by a sync tool); such a file no longer matches its seal and is not used at all.
The seal is no secret: whoever can write the data folder on purpose can write a seal too (and could replace
edgepilot itself), so every value is still checked for type and range.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

from edgepilot.file_errors import escaped, is_denied, note_once
from edgepilot.untrusted import FileTooLarge, NotRegularFile, loads_json, read_capped

# Bytes no term of a memory plan on a phone or a board can reach (a 1 TiB process): beyond it a value is
# damage, not a measurement.
MAX_BYTES = 1 << 40
MAX_COUNT = 1 << 24  # layers, ubatch tokens, weight types, vocabulary entries


SEAL_KEY = "seal"


def _digest(content: dict[str, Any]) -> str:
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def sealed(content: dict[str, Any]) -> dict[str, Any]:
    """content with its seal, as its writer keeps it."""
    return {**{k: v for k, v in content.items() if k != SEAL_KEY}, SEAL_KEY: _digest(content)}


def unsealed(data: Any) -> dict[str, Any] | None:
    """The content of a sealed file's JSON; None when it has no seal or does not match it."""
    if not isinstance(data, dict) or not isinstance(data.get(SEAL_KEY), str):
        return None
    content = {k: v for k, v in data.items() if k != SEAL_KEY}
    return content if data[SEAL_KEY] == _digest(content) else None


def is_int(value: Any, low: int, high: int) -> bool:
    """An integer (not a bool) in [low, high]."""
    return type(value) is int and low <= value <= high


def is_number(value: Any, low: float, high: float) -> bool:
    """A finite int or float (not a bool) in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) and low <= value <= high


def shown_value(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class Dropped:
    """What was left out of one kept file, said in one note."""

    def __init__(self, path: str | os.PathLike[str], what: str, then: str) -> None:
        self.path, self.what, self.then = Path(path), what, then
        self.items: list[str] = []

    def drop(self, where: str, value: Any) -> None:
        self.items.append(f"{where} = {shown_value(value)}")

    def note(self) -> None:
        if not self.items:
            return
        more = f" (and {len(self.items) - 1} more)" if len(self.items) > 1 else ""
        note_once(
            f"left out of {self.what} {escaped(self.path)} (not of its type or range): "
            f"{self.items[0]}{more}; {self.then}"
        )


def read_json(path: str | os.PathLike[str], limit: int, what: str, then: str) -> Any:
    """A kept file's JSON, or None when it is missing or cannot be used (noted once, naming the file, unless
    it is only missing). Permission errors are raised (PermissionError): each store says them its way."""
    try:
        return loads_json(read_capped(path, limit))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (NotRegularFile, FileTooLarge) as exc:
        why = exc.strerror
    except IsADirectoryError:
        why = "is a directory"
    except OSError as exc:
        if is_denied(exc):  # each store says a refusal its own way
            raise
        why = f"cannot be read ({exc.strerror or exc})"
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        why = f"is damaged ({str(exc)[:80]})"
    note_once(f"{what} {escaped(path)} {why}: {then}")
    return None
