"""Sizes and counts from people (flags) and from files we did not write (manifests, listings, meminfo): one
parser, with bounds.

`float("1e400")` is inf and `int(inf)` raises OverflowError; "0.5B" is zero bytes; "1 2 3" is not 123. Each of
these is one clear line (UserError) here instead of a traceback or a silent misreading further on.
"""

from __future__ import annotations

import math
import re

from edgepilot.errors import UserError

KIB, MIB, GIB, TIB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
MAX_SIZE = 1 << 50  # 1 PiB: more than any device edgepilot will meet, small enough for every sum we make

_UNITS = {
    "": 1,
    "b": 1,
    "k": KIB,
    "kb": 1000,
    "kib": KIB,
    "m": MIB,
    "mb": 1000**2,
    "mib": MIB,
    "g": GIB,
    "gb": 1000**3,
    "gib": GIB,
    "t": TIB,
    "tb": 1000**4,
    "tib": TIB,
}
# one number (digits, optional fraction, optional exponent), optional space, optional unit; nothing else
_SIZE = r"(\d{1,30}(?:\.\d{1,30})?(?:e[+-]?\d{1,4})?) ?([a-z]{0,3})"  # compiled on first use (re's cache)


def show_size(n: int) -> str:
    for unit, scale in (("PiB", 1 << 50), ("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def parse_size(text: str, *, what: str = "size", minimum: int = 1, maximum: int = MAX_SIZE) -> int:
    """Bytes from '123', '512MiB', '2 GiB', '2G', '1.5GB' (K/M/G alone are binary, as in llama.cpp).

    Refused with one line: anything but one number and one unit, a value that rounds below `minimum` bytes or
    lies above `maximum`.
    """
    raw = str(text).strip().lower()
    match = re.fullmatch(_SIZE, raw, re.ASCII)
    if match is None:
        if len(raw) > 40:
            raise UserError(f"cannot read {what}: {len(raw)} characters; use e.g. 512MiB, 2GiB, 2G")
        raise UserError(f"cannot read {what} '{text}': use bytes or a unit, e.g. 512MiB, 2GiB, 2G")
    number, unit = match.groups()
    if unit not in _UNITS:
        raise UserError(f"unknown unit in {what} '{text}': use B, KiB, MiB, GiB, TiB (or K, M, G, T)")
    value = float(number) * _UNITS[unit]
    if not math.isfinite(value) or value > maximum:
        raise UserError(f"{what} '{text}' is too large: at most {show_size(maximum)}")
    if int(value) < minimum:
        raise UserError(f"{what} '{text}' is too small: at least {show_size(minimum)}")
    return int(value)


def read_count(value: object, *, what: str, minimum: int = 0, maximum: int = MAX_SIZE) -> int:
    """An integer field from a file or the network (a manifest's size, a listing's byte count, a meminfo
    figure): an int (not a bool, float or string) within [minimum, maximum], else ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} is not a whole number: {str(value)[:40]!r}")
    if not minimum <= value <= maximum:
        raise ValueError(f"{what} {value} is out of range ({minimum} to {maximum})")
    return value


_DURATION = r"(\d{1,9}(?:\.\d{1,6})?) ?(s|sec|m|min|h)?"
_SECONDS = {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}


def parse_duration(text: str, *, what: str = "duration", minimum: float = 1.0) -> float:
    """Seconds from '90', '90s', '5m', '1.5h'; one clear line (UserError) for anything else."""
    match = re.fullmatch(_DURATION, str(text).strip().lower(), re.ASCII)
    if match is None:
        raise UserError(f"cannot read {what} '{str(text)[:40]}': use seconds or a unit, e.g. 90s, 5m, 1h")
    seconds = float(match.group(1)) * _SECONDS[match.group(2)]
    if seconds < minimum:
        raise UserError(f"{what} '{text}' is too short: at least {minimum:g} s")
    return seconds
