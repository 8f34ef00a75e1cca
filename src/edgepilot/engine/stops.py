"""OpenAI `stop` strings over streamed text: cut at the first stop, and never send a piece of one.

Text that could be the start of a stop string is held back until the next piece decides it.
"""

from __future__ import annotations

MAX_STOPS = 4  # OpenAI's limit
MAX_STOP_CHARS = 256


class StopMatcher:
    def __init__(self, stops: list[str]) -> None:
        self.stops = [s for s in stops if s]
        self.pending = ""
        self.stopped = False

    def feed(self, text: str) -> tuple[str, bool]:
        """(text that is safe to send now, whether a stop string was reached)."""
        if self.stopped:
            return "", True
        if not self.stops:
            return text, False
        buf = self.pending + text
        cut = min((i for i in (buf.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.pending, self.stopped = "", True
            return buf[:cut], True
        keep = self._held(buf)
        self.pending = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep], False

    def _held(self, buf: str) -> int:
        """Length of the longest tail of buf that is a proper prefix of some stop string."""
        best = 0
        for s in self.stops:
            for n in range(min(len(s) - 1, len(buf)), best, -1):
                if buf.endswith(s[:n]):
                    best = n
                    break
        return best

    def flush(self) -> str:
        """What was held back, once generation ended without reaching a stop string."""
        out, self.pending = ("" if self.stopped else self.pending), ""
        return out
