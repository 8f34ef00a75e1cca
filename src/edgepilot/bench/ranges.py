"""Command-line value lists, llama-bench style: `2,4`, `1-4`, `1-8+2`, `1-16*2`; booleans."""

from __future__ import annotations

import re

from edgepilot.errors import UserError

# first[-last[(+|*)step]], as llama-bench's parse_int_range
_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?:([+*])(\d+))?)?$", re.ASCII)  # no other script's digits
MAX_ITEMS = 4096
_TRUE = {"1", "on", "true", "yes"}
_FALSE = {"0", "off", "false", "no"}


def parse_int_list(text: str, option: str, minimum: int = 0) -> list[int]:
    """`2,4` -> [2, 4]; `1-4` -> [1, 2, 3, 4]; `1-8+2` -> [1, 3, 5, 7]; `1-16*2` -> [1, 2, 4, 8, 16]."""
    values: list[int] = []
    for part in text.split(","):
        part = part.strip()
        m = _RANGE.match(part)
        if not m:
            raise UserError(
                f"{option}: {part or text!r} is not a number or range (examples: 2,4  1-4  1-8+2)"
            )
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) is not None else first
        op, step = m.group(3) or "+", int(m.group(4) or 1)
        if last < first:
            raise UserError(f"{option}: range {part} runs backwards; write it as {last}-{first}")
        if (op == "+" and step < 1) or (op == "*" and (step < 2 or first < 1)):
            raise UserError(f"{option}: range {part} never advances")
        value = first
        while value <= last:
            values.append(value)
            if len(values) > MAX_ITEMS:
                raise UserError(f"{option}: more than {MAX_ITEMS} values")
            value = value + step if op == "+" else value * step
    bad = [v for v in values if v < minimum]
    if bad:
        raise UserError(f"{option}: {bad[0]} is too small (at least {minimum})")
    return _unique(values)


def parse_bool_list(text: str, option: str) -> list[bool]:
    """`0,1` / `on,off` / `true` -> booleans, in the given order."""
    values: list[bool] = []
    for part in text.split(","):
        word = part.strip().lower()
        if word in _TRUE:
            values.append(True)
        elif word in _FALSE:
            values.append(False)
        else:
            raise UserError(f"{option}: {part.strip()!r} is not one of 0, 1, on, off")
    return _unique(values)


def _unique(values: list) -> list:
    seen: set = set()
    return [v for v in values if not (v in seen or seen.add(v))]
