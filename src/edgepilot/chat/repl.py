"""The interactive loop of `edgepilot chat`: read a line (readline editing on a terminal), answer it
streaming, print a status line; slash commands; Ctrl-C stops an answer, Ctrl-D (or the end of piped input)
ends.

With stdin not a terminal it reads one message per line, so a conversation can be scripted. Lines are read
with a cap (`line_limit`: more bytes than any context holds) and never whole when longer: such a line is
skipped with one "error:" line and the chat goes on with the next, as for any message too long for the
context. Invalid UTF-8 becomes U+FFFD, in any locale. Ctrl-C ends a piped chat (exit status 130); on a
terminal it gives a fresh prompt.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TextIO

from edgepilot.chat.session import ChatResult, ChatSession, ChatTurn
from edgepilot.errors import UserError
from edgepilot.records import LineTooLong, decode, read_line
from edgepilot.shown import shown_lines
from edgepilot.sizes import show_size
from edgepilot.untrusted import valid_text
from edgepilot.words import count

PROMPT = "> "
HELP = (
    "commands: /reset (forget the conversation), /save FILE, /load FILE (~ is your home folder), /stats, "
    "/exit (also Ctrl-D); Ctrl-C stops an answer"
)
MIB = 1 << 20


def status_line(t: ChatTurn) -> str:
    """One line per answer; tests and the benchmark read its first fields."""
    return (
        f"[prompt {t.n_prompt_new} new + {t.n_reused} reused · ttft {t.ttft_ms:.0f} ms · "
        f"{t.n_gen} tok @ {t.gen_tps:.1f} t/s{_kept(t)} · rss {t.rss_bytes / MIB:.0f} MiB]"
    )


def _kept(t: ChatTurn) -> str:
    """--lookup / --draft: the drafted tokens the model kept this turn."""
    spec = t.speculation
    return f" · {spec['accepted']}/{spec['drafted']} drafted kept" if spec else ""


@dataclass
class Terminal:
    out: TextIO
    err: TextIO
    interactive: bool  # stdin is a terminal: prompt, readline
    stream: bool = True  # False with --json: answers only in the JSON at the end
    # how the CLI wraps a sentence for the screen (cli/narrow.py's say); None: one line, as say() prints
    wrap: Callable[[str], None] | None = None

    def say(self, text: str) -> None:
        """A line of ours; a file name or an error in it is shown escaped (edgepilot.shown)."""
        self.err.write(shown_lines(text) + "\n")
        self.err.flush()

    def prose(self, text: str) -> None:
        """A sentence of ours wrapped at spaces for the screen's width ($COLUMNS when not a terminal), as
        the other commands' notes are: a word wider than the screen (a path) is printed whole."""
        if self.wrap is None:
            self.say(text)
            return
        self.wrap(text)
        self.err.flush()


def _readline_ready() -> None:
    with contextlib.suppress(ImportError):  # importing it gives input() line editing and history
        import readline  # noqa: F401


def line_limit(n_ctx: int) -> int:
    """The longest message read, in bytes: 8 per token of context (a token is rarely more than 4), at least
    1 MiB. A longer line could never fit, and is skipped without being held in memory."""
    return max(MIB, 8 * n_ctx)


def _lines(term: Terminal, read: Callable[[str], str]) -> Iterator[str]:
    """Lines the user types; Ctrl-C on an empty prompt gives a fresh one, Ctrl-D (EOF) ends."""
    while True:
        try:
            line = read(PROMPT if term.interactive else "")
        except EOFError:
            if term.interactive:
                term.err.write("\n")
            return
        except KeyboardInterrupt:
            if not term.interactive:  # a script or a pipe: Ctrl-C ends the chat
                raise
            term.err.write("\n")
            continue
        except LineTooLong as exc:
            term.say(
                f"error: a message of {show_size(exc.size)} was skipped: longer than {show_size(exc.limit)}, "
                "more than the context can hold"
            )
            continue
        yield valid_text(line)


@contextlib.contextmanager
def _ctrl_c_stops() -> Iterator[Callable[[], bool]]:
    """While answering, Ctrl-C sets a flag the generation checks at the next token (no exception that could
    leave llama.cpp's cache half-written)."""
    hit = [False]

    def handler(_sig: int, _frame: object) -> None:
        hit[0] = True

    try:
        old = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: no Ctrl-C handling
        yield lambda: False
        return
    try:
        yield lambda: hit[0]
    finally:
        signal.signal(signal.SIGINT, old)


def _command(chat: ChatSession, term: Terminal, line: str) -> bool:
    """Run a slash command; False to end the chat."""
    name, _, arg = line.strip().partition(" ")
    arg = arg.strip()
    if name in ("/exit", "/quit", "/bye"):
        return False
    if name == "/reset":
        chat.reset()
        term.say("conversation cleared")
    elif name == "/stats":
        s = chat.status()
        term.say(
            f"{count(s['turns'], 'turn')} · {count(s['messages'], 'message')} · "
            f"{s['cached_tokens']} of {s['n_ctx']} context tokens cached · prompt tokens processed "
            f"{s['prompt_tokens_processed']}, reused {s['prompt_tokens_reused']} · "
            f"rss {s['rss_bytes'] / MIB:.0f} MiB"
        )
    elif name in ("/save", "/load") and not arg:
        term.say(f"usage: {name} FILE")
    elif name == "/save":
        path = os.path.expanduser(arg)  # the same file /load FILE reads
        size = chat.save(path)
        term.say(
            f"saved {count(len(chat.messages), 'message')} and "
            f"{count(len(chat.kv.cached), 'cached token')} to {path} ({size / MIB:.1f} MiB)"
        )
    elif name == "/load":
        path = os.path.expanduser(arg)
        n = chat.load(path)
        term.say(f"loaded {count(n, 'message')} and {count(len(chat.kv.cached), 'cached token')} from {path}")
    elif name in ("/help", "/?"):
        term.prose(HELP)
    else:
        term.prose(f"unknown command {name}; {HELP}")
    return True


def _answer(chat: ChatSession, term: Terminal, text: str) -> None:
    def show(piece: str) -> None:
        term.out.write(piece)
        term.out.flush()

    with _ctrl_c_stops() as stopped:
        turn = chat.turn(text, on_text=show if term.stream else None, stop=stopped)
        interrupted = stopped()
    if term.stream:
        term.out.write("\n")
        term.out.flush()
    if interrupted:
        term.say("(stopped)")
    for note in turn.notes:
        term.prose(f"note: {note}")
    keeper = chat.keeper
    if keeper is not None:  # the status line says the turn is kept: a kill from here on loses nothing
        keeper.wait()
        if keeper.error:  # said once: the chat goes on unsaved
            term.say(f"warning: the chat is not being saved: {keeper.error}")
            chat.keeper = None
    term.say(status_line(turn))


def _resumed(chat: ChatSession, term: Terminal) -> None:
    """A resumed chat: the transcript so far (the last turns), the unanswered question, what was restored."""
    r = chat.resumed
    if r is None:
        return
    shown = [m for m in chat.messages if m[0] != "system"][-SHOWN_ON_RESUME:]
    if term.interactive:
        for role, text in shown:
            term.prose(f"{'you' if role == 'user' else 'model'}: {text}")
    if r.unanswered is not None:
        term.prose(f"unanswered: {r.unanswered}")
    cache = f", {count(r.cached_tokens, 'cached token')}" if r.cached_tokens else ""
    term.say(f"resumed {count(r.messages, 'message')}{cache} from {r.path}")
    for note in r.notes:
        term.prose(f"note: {note}")


SHOWN_ON_RESUME = 6  # messages of the transcript shown when a chat resumes in a terminal


def chat_loop(chat: ChatSession, term: Terminal, read: Callable[[str], str] | None = None) -> ChatResult:
    """Talk until /exit or the end of input; returns every turn's figures."""
    limit = line_limit(chat.n_ctx)
    if term.interactive:
        _readline_ready()
        term.prose(f"chatting with {chat.path.name} (ctx {chat.n_ctx}); /help for commands")
    if chat.plan.profile:
        term.prose(chat.plan.profile)
    for warning in chat.plan.warnings:
        term.prose(f"warning: {warning}")
    if chat.template_note:
        term.prose(f"note: {chat.template_note}")
    _resumed(chat, term)
    if chat.save_note:
        term.prose(f"note: {chat.save_note}")
    if read is None:
        read = _terminal_reader(limit) if term.interactive else _stdin_reader(limit)
    for line in _lines(term, read):
        text = line.strip()
        if not text:
            continue
        try:
            if text.startswith("/"):
                if not _command(chat, term, text):
                    break
                continue
            _answer(chat, term, text)
        except UserError as exc:  # a bad file, a message too long: one line, the chat goes on
            term.say(f"error: {exc}")
    return chat.result


def _stdin_reader(limit: int) -> Callable[[str], str]:
    """Lines of piped stdin as bytes, at most `limit` each (LineTooLong for a longer one, skipped)."""
    stream = sys.stdin.buffer

    def read(_prompt: str) -> str:
        line = read_line(stream, limit)
        if line is None:
            raise EOFError
        return decode(line)

    return read


def _terminal_reader(limit: int) -> Callable[[str], str]:
    """input() with line editing; bytes that are not valid text come back as surrogates (made U+FFFD by
    _lines) instead of failing the read."""
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdin.reconfigure(errors="surrogateescape")  # type: ignore[union-attr]

    def read(prompt: str) -> str:
        line = input(prompt)
        size = len(line.encode("utf-8", "surrogateescape"))
        if size > limit:  # a terminal hands the line over whole: refuse it all the same
            raise LineTooLong(size, limit)
        return line

    return read
