"""Two contexts on one model taking turns: a short request is never stuck behind a long one.

serve keeps a second, small context (the short lane) beside the main one. Both share the model's weights and
the device's cores, and llama.cpp's CPU threads spin at every barrier: two graphs computing at once on the
same cores each run several times slower. So they take turns instead. The main lane decodes in steps (one
prompt chunk, or one generated token) and each step waits while a short request is active; a short request
waits only for the main lane's current step, then runs to its end. Between two short requests the main lane is
owed one step, so a stream of short requests slows a long one down but never stops it.

The main lane's prompt chunks are sized from its measured prompt speed so that one step takes about
STEP_SECONDS: that is the longest a short request waits before it starts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

STEP_SECONDS = 0.25
FIRST_CHUNK = 32  # tokens, before the prompt speed is known
MIN_CHUNK = 8
T = TypeVar("T")
B = TypeVar("B")


class Turns:
    def __init__(self, step_seconds: float = STEP_SECONDS) -> None:
        self.step_seconds = step_seconds
        self._cond = threading.Condition()
        self._main_running = False
        self._main_waiting = False
        self._main_owed = False
        self._short_active = False
        self._short_waiting = 0
        self._tokens_per_second: float | None = None
        self.short_requests = 0
        self.main_pauses = 0  # steps of the main lane that waited for a short request

    @contextmanager
    def main_step(self) -> Iterator[None]:
        """Around one decode of the main lane."""
        with self._cond:
            if not self._main_owed and (self._short_active or self._short_waiting):
                self.main_pauses += 1
                self._main_waiting = True
                while not self._main_owed and (self._short_active or self._short_waiting):
                    self._cond.wait()
                self._main_waiting = False
            self._main_running = True
            self._main_owed = False
        try:
            yield
        finally:
            with self._cond:
                self._main_running = False
                self._cond.notify_all()

    @contextmanager
    def short_request(self) -> Iterator[None]:
        """Around the whole of a short request (its prompt and its answer)."""
        with self._cond:
            self._short_waiting += 1
            try:
                while self._main_running or self._main_owed or self._short_active:
                    self._cond.wait()
            finally:
                self._short_waiting -= 1
            self._short_active = True
        try:
            yield
        finally:
            with self._cond:
                self._short_active = False
                self._main_owed = self._main_waiting
                self.short_requests += 1
                self._cond.notify_all()

    def in_turn(self, decode: Callable[[T, B], int]) -> Callable[[T, B], int]:
        """`decode` (llama_decode) as a step of the main lane."""

        def step(ctx: T, batch: B) -> int:
            with self.main_step():
                return decode(ctx, batch)

        return step

    def prompt_in_steps(self, tokens: list[int], n_batch: int, decode: Callable[[list[int]], None]) -> None:
        """The main lane's prompt, in chunks of about STEP_SECONDS each."""
        start = 0
        while start < len(tokens):
            chunk = tokens[start : start + self.chunk(n_batch)]
            with self.main_step():
                t0 = time.perf_counter()
                decode(chunk)
                self.prompt_step(len(chunk), time.perf_counter() - t0)
            start += len(chunk)

    def chunk(self, n_batch: int) -> int:
        """Prompt tokens for the main lane's next step."""
        if self._tokens_per_second is None:
            return min(n_batch, FIRST_CHUNK)
        return max(MIN_CHUNK, min(n_batch, int(self._tokens_per_second * self.step_seconds)))

    def prompt_step(self, n_tokens: int, seconds: float) -> None:
        if seconds > 0:
            self._tokens_per_second = n_tokens / seconds
