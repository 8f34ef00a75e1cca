"""The Typer app and what every command shares: error handling and output (table or --json)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

from edgepilot.errors import UserError
from edgepilot.jsonable import dumps

app = typer.Typer(
    name="edgepilot",
    help="Run local LLMs well on phones and small ARM boards (llama.cpp underneath).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# Human output goes to stdout; progress and errors to stderr so `--json` stdout stays one object.
console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int = 2) -> typer.Exit:
    err_console.print(f"edgepilot: error: {message}", markup=False, soft_wrap=True)
    return typer.Exit(code)


def user_errors(func: F) -> F:
    """Turn UserError (and Ctrl-C) into one stderr line and an exit code instead of a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except UserError as exc:
            raise fail(str(exc)) from None
        except KeyboardInterrupt:
            raise fail("interrupted", 130) from None
        except BrokenPipeError:
            sys.stderr.close()
            raise typer.Exit(0) from None

    return wrapper  # type: ignore[return-value]


def emit(result: Any, as_json: bool, render: Callable[[Any, Console], None]) -> None:
    """Print a result dataclass: one JSON object on stdout, or the human rendering."""
    if as_json:
        sys.stdout.write(dumps(result) + "\n")
        sys.stdout.flush()
    else:
        render(result, console)
