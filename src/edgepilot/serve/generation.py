"""One generation at a time on the engine, streamed to asyncio.

llama.cpp's context is not thread-safe: every engine call runs on a single thread (a one-worker executor,
which is also the worker's queue; the front bounds how many requests reach it). Pieces of text cross to the
event loop with call_soon_threadsafe; a client that goes away sets `cancelled` and generation stops at the
next piece instead of running to max_tokens for nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from edgepilot.engine.conversation import TRANSCRIPT_STOP, ConversationTooLong, answer_room
from edgepilot.engine.inprocess import LlamaEngine
from edgepilot.engine.kv_slide import context_shift
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.engine.session import KVSession
from edgepilot.engine.stops import StopMatcher
from edgepilot.engine.turns import Turns
from edgepilot.errors import UserError
from edgepilot.serve.cache_keeper import MainCache
from edgepilot.serve.launch import LOG_PREFIX
from edgepilot.serve.prompt_fit import fit_within, message_overhead
from edgepilot.serve.protocol import Outcome, finish_reason
from edgepilot.words import count

_DONE = object()


class PromptRefused(UserError):
    """A prompt this server cannot run (the client's to fix: a 400 with this code)."""

    code: str | None = None


class ContextFull(PromptRefused):
    """The prompt does not fit the context the server was started with."""

    code = "context_length_exceeded"


class OverTokenCap(PromptRefused):
    """A completion prompt over the server's --max-prompt-tokens."""

    code = "request_too_large"


class NotShort(Exception):
    """A request the short lane cannot hold whole (prompt and answer): it goes to the main lane instead."""


class EmptyPrompt(PromptRefused):
    """An empty prompt, for a model without a begin-of-text token to start from."""

    code = "empty_prompt"


@dataclass
class Job:
    messages: list[tuple[str, str]] | None  # chat: (role, content); None = raw completion prompt
    prompt: str
    max_tokens: int
    sampler: SamplerSettings
    stops: list[str] = field(default_factory=list)


@dataclass
class EngineStats:
    requests: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens taken from the KV cache instead of processed
    last_cached_tokens: int | None = None
    gen_tokens: int = 0
    gen_seconds: float = 0.0
    last_prompt_tps: float | None = None
    last_gen_tps: float | None = None
    busy: bool = False

    def as_dict(self) -> dict[str, object]:
        avg = self.gen_tokens / self.gen_seconds if self.gen_seconds > 0 else None
        return {
            "requests": self.requests,
            "failed": self.failed,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "last_cached_tokens": self.last_cached_tokens,
            "gen_tokens": self.gen_tokens,
            "last_prompt_tps": _r(self.last_prompt_tps),
            "last_gen_tps": _r(self.last_gen_tps),
            "avg_gen_tps": _r(avg),
            "busy": self.busy,
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


class Generator:
    def __init__(
        self,
        engine: LlamaEngine,
        on_phase: Callable[[str], None] | None = None,
        cache_reuse: bool = True,
        max_prompt_tokens: int | None = None,
        short_turns: Turns | None = None,
    ) -> None:
        """short_turns: this is the short lane, taking its turns with the main lane there; it runs only
        requests it holds whole (NotShort otherwise), never trimming a conversation to fit."""
        self.engine = engine
        self.short_turns = short_turns
        self.on_phase = on_phase  # re-pins between prompt and generation (tuned profile), or None
        self.n_ctx = engine.load.n_ctx
        self.max_prompt_tokens = max_prompt_tokens  # None: the context
        self._overhead: int | None = None  # the chat template's tokens per message, measured once
        self.stats = EngineStats()
        # The last request's tokens stay in the KV cache: the next request processes only what differs
        # from them (a chat client resends the whole history each turn).
        self.session = KVSession(engine, reuse=cache_reuse)
        self.keeper: MainCache | None = None  # the cache kept on disk after each request (main lane)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine")

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _prompt(self, job: Job) -> tuple[list[int], list[str], bool, list[str]]:
        """(prompt tokens, stop strings, whether to strip the reply's leading space, notes). A chat that
        would overflow the context loses its oldest turns after the system message (with a note)."""
        if job.messages is None:
            tokens = self.engine.tokenize(job.prompt)
            cap = self.max_prompt_tokens
            if cap is not None and cap < self.n_ctx and len(tokens) > cap:  # past the context: ContextFull
                raise OverTokenCap(
                    f"the prompt has {count(len(tokens), 'token')}; this server takes at most {cap} in one "
                    "request (--max-prompt-tokens)"
                )
            if not tokens:  # "": like llama-server, generate from the start of a document
                bos = self.engine.bos_token()
                if bos is None:
                    raise EmptyPrompt(
                        "the prompt is empty and this model has no begin-of-text token to start from"
                    )
                tokens = [bos]
            return tokens, list(job.stops), False, []
        room = answer_room(job.max_tokens, self.n_ctx)
        cap = self.max_prompt_tokens
        n_ctx = self.n_ctx if cap is None else min(self.n_ctx, cap + room)
        if self._overhead is None:
            self._overhead = message_overhead(self.engine)
        try:
            r = fit_within(self.engine, job.messages, n_ctx, room, self._overhead)
        except ConversationTooLong as exc:
            raise ContextFull(str(exc)) from None
        if r.templated:
            return r.tokens, list(job.stops), False, r.notes
        # A transcript: stop where the model would go on to write the user's next turn, and drop the space
        # it puts after "Assistant:".
        return r.tokens, [*job.stops, TRANSCRIPT_STOP], True, r.notes

    def _run(self, job: Job, on_piece: Callable[[str], None], cancelled: threading.Event) -> Outcome:
        t0 = time.perf_counter()
        self.stats.busy = True
        try:
            tokens, stops, strip_lead, notes = self._prompt(job)
            if self.short_turns is not None and (notes or len(tokens) + job.max_tokens > self.n_ctx):
                raise NotShort()
            if len(tokens) >= self.n_ctx:
                raise ContextFull(
                    f"the prompt has {len(tokens)} tokens but the server's context holds {self.n_ctx}; "
                    "send a shorter conversation or restart the server with a larger --ctx"
                )
            for note in notes:
                sys.stderr.write(f"edgepilot-worker: note: {note}\n")
            matcher = StopMatcher(stops)
            pieces: list[str] = []

            def on_text(text: str) -> bool:
                nonlocal strip_lead
                if cancelled.is_set():
                    return True
                if strip_lead:
                    text = text.lstrip(" ")
                    strip_lead = not text
                out, hit = matcher.feed(text)
                if out:
                    pieces.append(out)
                    on_piece(out)
                return hit

            with self.short_turns.short_request() if self.short_turns else contextlib.nullcontext():
                stats, turn = self.session.generate(
                    tokens, job.max_tokens, sampler=job.sampler, on_text=on_text, on_phase=self.on_phase,
                    slide=bool(notes),  # older turns dropped: the kept ones slide down (engine/kv_slide.py)
                )  # fmt: skip
            tail = matcher.flush()
            if tail:
                pieces.append(tail)
                on_piece(tail)
        except NotShort:
            raise
        except BaseException:
            self.stats.failed += 1
            raise
        finally:
            self.stats.busy = False
        if self.keeper is not None:  # in this thread once the reply is out, before the next request
            self._pool.submit(self._keep)
        s = self.stats
        s.requests += 1
        s.prompt_tokens += stats.n_prompt
        s.cached_tokens += turn.n_reused
        s.last_cached_tokens = turn.n_reused
        s.gen_tokens += stats.n_gen
        s.gen_seconds += stats.gen_seconds
        s.last_prompt_tps = stats.prompt_tps
        if stats.n_gen > 1:
            s.last_gen_tps = stats.gen_tps
        return Outcome(
            n_prompt=stats.n_prompt,
            n_gen=stats.n_gen,
            finish_reason=finish_reason(stats.stopped_by, matcher.stopped),
            prompt_tps=stats.prompt_tps,
            gen_tps=stats.gen_tps,
            seconds=time.perf_counter() - t0,
            text="".join(pieces),
            n_cached=turn.n_reused,
            ttft_ms=round(turn.ttft_seconds * 1000, 1),
            notes=[*notes, *([turn.reuse_note] if turn.reuse_note else [])],
            context_shift=context_shift(turn) if notes else None,
        )

    def _keep(self) -> None:
        said = self.keeper.keep() if self.keeper is not None else ""
        if said:
            sys.stderr.write(f"{LOG_PREFIX}{said}\n")

    async def stream(self, job: Job, cancelled: threading.Event) -> AsyncIterator[str | Outcome]:
        """Yields text pieces as they are generated, then the Outcome. Closing the iterator cancels."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()

        def on_piece(piece: str) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, piece)

        future = asyncio.wrap_future(self._pool.submit(self._run, job, on_piece, cancelled))
        future.add_done_callback(lambda _f: queue.put_nowait(_DONE))
        handed_on = False
        try:
            while True:
                item = await queue.get()
                if item is _DONE:
                    break
                yield item  # type: ignore[misc]
            try:
                yield future.result()
            except NotShort:
                handed_on = True  # the request goes on in the main lane: not cancelled
                raise
        finally:
            if not handed_on:
                cancelled.set()

    async def complete(self, job: Job, cancelled: threading.Event) -> Outcome:
        """The whole reply at once. No per-token hop to the event loop: every wake-up of another thread
        takes a core from llama.cpp's compute threads, which wait for each other at every barrier."""
        handed_on = False
        try:
            return await asyncio.wrap_future(self._pool.submit(self._run, job, lambda _p: None, cancelled))
        except NotShort:
            handed_on = True  # the request goes on in the main lane: not cancelled
            raise
        finally:
            if not handed_on:
                cancelled.set()
