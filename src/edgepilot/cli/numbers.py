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


class NotFinite(click.ClickException):
    """`--temp nan`: one line and exit code 2, as every other bad value (not click's usage text)."""

    exit_code = 2

    def show(self, file: object = None) -> None:
        click.echo(f"edgepilot: error: {self.format_message()}", err=True)


def _float_convert(original):  # type: ignore[no-untyped-def]
    def convert(value: object, param: click.Parameter | None, ctx: click.Context | None) -> object:
        if isinstance(value, str) and value.strip().isascii():
            try:
                number = float(value)
            except ValueError:
                number = 0.0
            if not math.isfinite(number):
                name = param.opts[0] if param is not None and getattr(param, "opts", None) else "the value"
                raise NotFinite(f"{name} {value}: not a finite number")
        return original(value, param, ctx)

    return convert


def strict_numbers() -> None:
    """Every option of type int or float (given as such, or from an int or float default) reads a typed
    number as above: click's INT and FLOAT are the types those options share, so one place covers them all
    (a traceback or a NaN deep in a command before: `--window nan`)."""
    click.INT._number_class = _ascii_int  # type: ignore[attr-defined]
    click.FLOAT._number_class = _finite_float  # type: ignore[attr-defined]
    if not getattr(click.FLOAT.convert, "edgepilot_finite", False):
        click.FLOAT.convert = _float_convert(click.FLOAT.convert)  # type: ignore[method-assign]
        click.FLOAT.convert.edgepilot_finite = True  # type: ignore[attr-defined]
