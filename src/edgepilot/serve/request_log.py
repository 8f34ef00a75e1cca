"""serve's line per request on stderr: method, path, status, tokens generated and time taken.

The front relays the worker's reply without understanding it; for the log it reads the token count from
what passes: a reply's `usage.completion_tokens`, or in a stream its usage chunk (when the client asked for
one) or llama-server's final `timings.predicted_n`, else the chunks that carried text, shown as "~N tok".
Only the path is logged: no query string, no headers, no body (they may hold keys or private text).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

# Polled by the status page or a monitor: logged only with --verbose, so a page left open does not fill
# the log with a line a second.
POLLED = frozenset({"/", "/status.json", "/status.css", "/status.js", "/favicon.ico", "/health"})
MAX_PATH_SHOWN = 120  # a longer path (a client's probing) is cut in the log
MAX_EVENT_BYTES = 1 << 20  # an SSE event this long without its end is not counted (the relay goes on)


@dataclass
class Exchange:
    """What the log line of one request says beyond its status."""

    tokens: int | None = None  # generated, when the reply said (or its chunks showed)
    approximate: bool = False  # counted from the chunks that carried text
    drafts: tuple[int, int] | None = None  # llama-server speculating: (drafted, accepted) in its timings

    def reply(self, payload: bytes) -> None:
        """A whole JSON reply: its usage."""
        with contextlib.suppress(ValueError, RecursionError):
            obj = json.loads(payload)
            self.tokens = _completion_tokens(obj)
            self.drafts = _drafts(obj) or self.drafts


class StreamTokens:
    """Counts the tokens of a server-sent-event stream as its bytes pass, into an Exchange."""

    def __init__(self, seen: Exchange) -> None:
        self.seen = seen
        self.buffer = b""
        self.chunks = 0
        self.exact: int | None = None

    def feed(self, data: bytes) -> None:
        self.buffer += data
        *events, self.buffer = self.buffer.split(b"\n\n")
        if len(self.buffer) > MAX_EVENT_BYTES:
            self.buffer = b""
        for event in events:
            for line in event.splitlines():
                if line.startswith(b"data:"):
                    self._event(line[5:].strip())
        self.seen.tokens = self.exact if self.exact is not None else self.chunks
        self.seen.approximate = self.exact is None

    def _event(self, data: bytes) -> None:
        if not data.startswith(b"{"):
            return  # [DONE]
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError):
            return
        exact = _completion_tokens(obj)
        self.seen.drafts = _drafts(obj) or self.seen.drafts
        if exact is not None:
            self.exact = exact
        elif _carries_text(obj):
            self.chunks += 1


def _completion_tokens(obj: Any) -> int | None:
    if not isinstance(obj, dict):
        return None
    usage, timings = obj.get("usage"), obj.get("timings")
    for source, key in ((usage, "completion_tokens"), (timings, "predicted_n")):
        value = source.get(key) if isinstance(source, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _drafts(obj: Any) -> tuple[int, int] | None:
    """llama-server's `timings.draft_n` and `draft_n_accepted` (speculating), read as untrusted."""
    timings = obj.get("timings") if isinstance(obj, dict) else None
    if not isinstance(timings, dict):
        return None
    drafted, accepted = timings.get("draft_n"), timings.get("draft_n_accepted")
    counts = (drafted, accepted)
    if not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 40 for n in counts):
        return None
    return (drafted, accepted) if accepted <= drafted else None


def _carries_text(obj: dict[str, Any]) -> bool:
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return False
    choice = choices[0]
    delta = choice.get("delta")
    text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
    return isinstance(text, str) and text != ""


def request_line(method: str, path: str, status: int, seconds: float, seen: Exchange) -> str:
    if len(path) > MAX_PATH_SHOWN:
        path = path[:MAX_PATH_SHOWN] + "…"
    parts = [f"{method} {path} {status}"]
    if seen.tokens is not None:
        parts.append(f"{'~' if seen.approximate else ''}{seen.tokens} tok")
    if seen.drafts is not None and seen.drafts[0]:
        parts.append(f"{seen.drafts[1]}/{seen.drafts[0]} drafted kept")
    parts.append(f"{seconds:.2f} s")
    return " · ".join(parts)


def logged(path: str, verbose: bool, quiet: bool) -> bool:
    """Whether a request gets its line: every one unless --quiet, the polled ones only with --verbose."""
    return not quiet and (verbose or path not in POLLED)
