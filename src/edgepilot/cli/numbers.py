"""Numbers typed on the command line: ASCII digits and finite values only.

click's int and float take what Python's int() and float() take: "٣" is 3, "nan" and "inf" are floats, and
"²".isdigit() is True while int("²") fails. Every option of type int or float (given as such, or from an int
or float default) shares click's INT and FLOAT, so the CLI's group (app.py) makes those strict once.
"""

from __future__ import annotations

import math

import click


def _ascii_int(value: object) -> int:
    """click's int for a typed number: ASCII digits only (int() takes "٣" as 3; "²".isdigit() is True)."""
    if isinstance(value, str) and not value.strip().isascii():
        raise ValueError(value)
    return int(value)  # type: ignore[call-overload]


def _finite_float(value: object) -> float:
    """click's float for a typed number: finite, ASCII (float() takes "nan", "inf" and "٣")."""
    if isinstance(value, str) and not value.strip().isascii():
        raise ValueError(value)
    number = float(value)  # type: ignore[arg-type]
    if not math.isfinite(number):
        raise ValueError(value)
    return number


def strict_numbers() -> None:
    """Every option of type int or float (given as such, or from an int or float default) reads a typed
    number as above: click's INT and FLOAT are the types those options share, so one place covers them all
    (a traceback or a NaN deep in a command before: `--window nan`)."""
    click.INT._number_class = _ascii_int  # type: ignore[attr-defined]
    click.FLOAT._number_class = _finite_float  # type: ignore[attr-defined]
