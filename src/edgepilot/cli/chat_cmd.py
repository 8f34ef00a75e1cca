"""`edgepilot chat`: thin CLI over edgepilot.chat (a ChatSession driven by chat_loop)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from edgepilot.cli import flags
from edgepilot.cli.app import app, emit, err_console, user_errors

if TYPE_CHECKING:
    from rich.console import Console

    from edgepilot.chat.keeper import SessionList
    from edgepilot.chat.session import ChatResult
    from edgepilot.plan.requested import RequestedSettings


def render_end(result: ChatResult, out: Console) -> None:
    turns = result.turns
    if turns:
        new = sum(t.n_prompt_new for t in turns)
        reused = sum(t.n_reused for t in turns)
        out.print(
            f"{len(turns)} turn{'s' if len(turns) != 1 else ''}: {new} prompt tokens processed, "
            f"{reused} reused from the cache",
            style="dim",
            soft_wrap=True,
        )


@app.command()
@flags.DEFAULT_MODEL
@click.option(
    "--system", help="System prompt (kept when old turns are dropped to fit the context)", metavar="TEXT"
)
@click.option(
    "-n", "--n-predict", default=512, show_default=True, help="Tokens per answer at most", metavar="N"
)
@flags.settings_flags
@flags.speculation_flags
@click.option("--temp", default=0.8, help="Sampling temperature (0 = greedy)", metavar="N")
@click.option("--seed", type=int, help="Sampling seed (default: random)", metavar="N")
@flags.NO_CACHE_REUSE
@click.option(
    "--resume",
    is_flag=False,
    flag_value="",
    default=None,
    help="Go on with the newest saved chat of this model (or with FILE): its messages and KV cache",
    metavar="[FILE]",
)
@click.option("--no-save", is_flag=True, help="Do not keep this chat in the data folder's sessions/")
@click.option(
    "--sessions", "list_kept", is_flag=True, help="List the kept chats (of MODEL when given) and exit"
)
@click.option("--forget-sessions", is_flag=True, help="Remove the kept chats (of MODEL when given) and exit")
@flags.FORCE
@flags.BUDGET
@flags.VERBOSE
@flags.ENGINE
@flags.MAX_TEMP
@flags.WATCH_ROOT
@click.option(
    "--json", "as_json", is_flag=True, help="Answers and per-turn figures as one JSON object at the end"
)
@user_errors
def chat(
    model: str | None,
    system: str | None,
    n_predict: int,
    requested: RequestedSettings,
    speculation: Any,
    temp: float,
    seed: int | None,
    no_cache_reuse: bool,
    resume: str | None,
    no_save: bool,
    list_kept: bool,
    forget_sessions: bool,
    force: bool,
    budget: str | None,
    verbose: bool,
    engine: str | None,
    max_temp: str | None,
    watch_root: str,
    as_json: bool,
) -> None:
    """Talk with a model in the terminal: each turn processes only its new tokens (the KV cache stays).

    Commands: /reset, /save FILE, /load FILE (~ expands), /stats, /exit. Ctrl-C stops an answer, Ctrl-D
    ends.
    With stdin not a terminal, each line is a message (or a command)."""
    from edgepilot.chat.repl import Terminal, chat_loop
    from edgepilot.chat.session import ChatSession
    from edgepilot.cli.doctor_cmd import report_engine_failure
    from edgepilot.cli.fit_render import render_fit
    from edgepilot.engine.base import EngineError
    from edgepilot.engine.sampling import SamplerSettings
    from edgepilot.engine.thermal_guard import guarding, thermal_limit
    from edgepilot.plan.settings import MAX_TOKENS_SETTING
    from edgepilot.plan.types import DoesNotFit

    if list_kept or forget_sessions:
        _kept_sessions(model, forget_sessions, as_json)
        return
    thermal = thermal_limit(max_temp, watch_root)
    flags.check_range("--temp", temp, 0.0, 100.0)
    flags.check_range("--seed", seed, 0, 2**32 - 1)
    flags.check_range("-n", n_predict, 1, MAX_TOKENS_SETTING)
    sampler = SamplerSettings(temperature=temp, **({} if seed is None else {"seed": seed}))
    try:
        session = ChatSession(
            model,
            requested,
            system=system,
            n_predict=n_predict,
            sampler=sampler,
            cache_reuse=not no_cache_reuse,
            verbose=verbose,
            force=force,
            budget_bytes=flags.size_or_none(budget),
            engine=engine,
            save=not no_save,
            resume=resume,
            speculation=speculation,
        )
    except DoesNotFit as refusal:
        render_fit(refusal.plan, err_console())
        raise
    except EngineError as failure:
        raise report_engine_failure(failure, model, requested) from None
    from edgepilot.device.background_watch import BackgroundWatch

    term = Terminal(
        out=sys.stdout, err=sys.stderr, interactive=sys.stdin.isatty(), stream=not as_json, wrap=_wrapped
    )
    with (
        session,
        BackgroundWatch(term.say),  # Android moving it to a class it kills first: said once
        guarding(thermal, [session.engine], term.prose) as guard,  # --max-temp: fewer threads while hot
    ):
        result = chat_loop(session, term)
        result.thermal = guard.report() if guard is not None else None
    if as_json or term.interactive:
        emit(result, as_json, render_end)


def _kept_sessions(model: str | None, forget: bool, as_json: bool) -> None:
    from pathlib import Path

    from edgepilot.chat.keeper import forget_chats, kept_chats
    from edgepilot.gguf.resolve import resolve_model

    path: Path | None = resolve_model(model) if model else None
    if forget:
        gone = forget_chats(path)
        words = f"{gone.forgotten} kept chat{'s' if gone.forgotten != 1 else ''}"
        emit(gone, as_json, lambda r, out: out.print(f"removed {words} from {r.folder}", soft_wrap=True))
        return
    emit(kept_chats(path), as_json, _render_sessions)


def _render_sessions(result: SessionList, out: Console) -> None:
    import time

    from edgepilot.sizes import show_size

    if not result.sessions:
        out.print(f"no kept chats in {result.folder}", soft_wrap=True)
        return
    for s in result.sessions:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.modified))
        # one fact per line: a phone's screen
        out.print(s.model_file, style="bold", soft_wrap=True, highlight=False)
        out.print(f"  {when} · {show_size(s.size)}", highlight=False)
        out.print(f"  {s.path}", style="dim", soft_wrap=True, highlight=False)
    out.print("go on with one: edgepilot chat MODEL --resume [FILE]", style="dim", soft_wrap=True)


def _wrapped(text: str) -> None:
    """chat's notes wrapped at spaces for the screen, a path whole (cli/narrow.py)."""
    from edgepilot.cli.narrow import say
    from edgepilot.cli.safe_console import SafeConsole

    say(SafeConsole(file=sys.stderr, highlight=False), text)
