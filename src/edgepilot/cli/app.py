"""The click command group and what every command shares: error handling and output (table or --json).

Start-up is part of the interface on a phone, where Python runs 3-5x slower than on a laptop: the command
modules import only click at the top and their library modules inside the command, so `--help` loads no
command's machinery, and a `--json` reply never imports rich (the consoles are made on first use).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from edgepilot.cli.commands import COMMANDS, LazyGroup
from edgepilot.cli.numbers import strict_numbers
from edgepilot.errors import UserError

strict_numbers()

if TYPE_CHECKING:
    from rich.console import Console


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """edgepilot's version and the llama.cpp the engine would run (`auto`: as run would choose it)."""
    if not value or ctx.resilient_parsing:
        return
    from edgepilot import __version__
    from edgepilot.engine.choice import describe_engine
    from edgepilot.shown import shown

    click.echo(f"edgepilot {__version__}")
    info, problem = describe_engine(load=False)
    if info is None:
        click.echo(f"llama.cpp: none found ({shown(problem)})")
    else:
        engine = "in-process" if info.kind == "inprocess" else f"tools, {info.path}"
        click.echo(f"llama.cpp: {shown(info.llama_cpp or 'version unknown')} ({shown(engine)})")
    ctx.exit()


# Inherited by every command: -h as well as --help, and each option's default shown in its help. The group's
# classes make each command's help wrap without splitting a word (help_format.py); a command's module is
# imported when the command runs (commands.py).
CONTEXT = {"help_option_names": ["-h", "--help"], "show_default": True}

app = LazyGroup(
    name="edgepilot",
    table=COMMANDS,
    help="Run local LLMs well on phones and small ARM boards (llama.cpp underneath).",
    no_args_is_help=True,
    context_settings=CONTEXT,
    params=[
        click.Option(
            ["--version", "-V"],
            is_flag=True,
            expose_value=False,
            is_eager=True,
            callback=_print_version,
            help="Show edgepilot's version and the llama.cpp it runs.",
        )
    ],
)

F = TypeVar("F", bound=Callable[..., Any])


def console() -> Console:
    """Human output on stdout (progress and errors go to stderr so `--json` stdout stays one object)."""
    return _console(False, os.environ.get("COLUMNS"))


def err_console() -> Console:
    return _console(True, os.environ.get("COLUMNS"))


@functools.cache
def _console(stderr: bool, columns: str | None) -> Console:
    """One console per stream and $COLUMNS: rich reads $COLUMNS once, when a console is made, so a process
    that runs several commands (a test's CliRunner) gets a console of each command's width."""
    from edgepilot.cli.safe_console import SafeConsole

    return SafeConsole(stderr=stderr, highlight=False)


def fail(message: str, code: int = 2) -> click.exceptions.Exit:
    """One line on stderr (a name quoted in it escaped); raise the result to end the command with `code`."""
    from edgepilot.shown import shown

    sys.stderr.write(f"edgepilot: error: {shown(message)}\n")
    sys.stderr.flush()
    return click.exceptions.Exit(code)


def user_errors(func: F) -> F:
    """Turn UserError (and Ctrl-C) into one stderr line and an exit code instead of a traceback; so is a file
    the permissions refuse that no module turned into its own message (the backstop: file_errors.py)."""

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
            raise click.exceptions.Exit(0) from None
        except OSError as exc:
            from edgepilot.file_errors import denied_message, is_denied

            if not is_denied(exc):
                raise
            ctx = click.get_current_context(silent=True)
            raise fail(denied_message(exc, ctx.command_path if ctx else None)) from None

    return wrapper  # type: ignore[return-value]


def emit(result: Any, as_json: bool, render: Callable[[Any, Console], None]) -> None:
    """Print a result dataclass: one JSON object on stdout, or the human rendering."""
    if as_json:
        from edgepilot.jsonable import dumps

        sys.stdout.write(dumps(result) + "\n")
        sys.stdout.flush()
    else:
        render(result, console())
