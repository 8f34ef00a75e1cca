"""One generation at a time on the engine, streamed to asyncio.

llama.cpp's context is not thread-safe: every engine call runs on a single thread (a one-worker executor,
which is also the worker's queue; the front bounds how many requests reach it). Pieces of text cross to the
event loop with call_soon_threadsafe; a client that goes away sets `cancelled` and generation stops at the
next piece instead of running to max_tokens for nobody.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from edgepilot.engine.inprocess import LlamaEngine
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.errors import UserError
from edgepilot.serve.protocol import Outcome, finish_reason
from edgepilot.serve.stops import StopMatcher

_DONE = object()


class PromptRefused(UserError):
    """A prompt this server cannot run (the client's to fix: a 400 with this code)."""

    code: str | None = None


class ContextFull(PromptRefused):
    """The prompt does not fit the context the server was started with."""

    code = "context_length_exceeded"


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
            "gen_tokens": self.gen_tokens,
            "last_prompt_tps": _r(self.last_prompt_tps),
            "last_gen_tps": _r(self.last_gen_tps),
            "avg_gen_tps": _r(avg),
            "busy": self.busy,
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


TRANSCRIPT_STOP = "\nUser:"


def fallback_prompt(messages: list[tuple[str, str]]) -> str:
    """For a model without a chat template llama.cpp knows (usually a base model, like the bundled Gemma 3
    270M): a plain transcript ending where the reply starts. A chat template such a model was never trained
    on (chatml, gemma's turns) makes it echo the question; a transcript it continues."""
    return "".join(f"{role.capitalize()}: {content}\n" for role, content in messages) + "Assistant:"


class Generator:
    def __init__(self, engine: LlamaEngine, on_phase: Callable[[str], None] | None = None) -> None:
        self.engine = engine
        self.on_phase = on_phase  # re-pins between prompt and generation (tuned profile), or None
        self.n_ctx = engine.load.n_ctx
        self.stats = EngineStats()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine")

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _prompt(self, job: Job) -> tuple[str, list[str], bool]:
        """(prompt text, stop strings, whether to strip the reply's leading space)."""
        if job.messages is None:
            return job.prompt, list(job.stops), False
        templated = self.engine.chat_messages_prompt(job.messages)
        if templated is not None:
            return templated, list(job.stops), False
        # A transcript: stop where the model would go on to write the user's next turn, and drop the space
        # it puts after "Assistant:".
        return fallback_prompt(job.messages), [*job.stops, TRANSCRIPT_STOP], True

    def _run(self, job: Job, on_piece: Callable[[str], None], cancelled: threading.Event) -> Outcome:
        engine = self.engine
        t0 = time.perf_counter()
        self.stats.busy = True
        try:
            prompt, stops, strip_lead = self._prompt(job)
            tokens = engine.tokenize(prompt)
            if not tokens:  # "": like llama-server, generate from the start of a document
                bos = engine.bos_token()
                if bos is None:
                    raise EmptyPrompt(
                        "the prompt is empty and this model has no begin-of-text token to start from"
                    )
                tokens = [bos]
            if len(tokens) >= self.n_ctx:
                raise ContextFull(
                    f"the prompt has {len(tokens)} tokens but the server's context holds {self.n_ctx}; "
                    "send a shorter conversation or restart the server with a larger --ctx"
                )
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

            stats = engine.generate(
                tokens, job.max_tokens, sampler=job.sampler, on_text=on_text, on_phase=self.on_phase
            )
            tail = matcher.flush()
            if tail:
                pieces.append(tail)
                on_piece(tail)
        except BaseException:
            self.stats.failed += 1
            raise
        finally:
            self.stats.busy = False
        s = self.stats
        s.requests += 1
        s.prompt_tokens += stats.n_prompt
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
        )

    async def stream(self, job: Job, cancelled: threading.Event) -> AsyncIterator[str | Outcome]:
        """Yields text pieces as they are generated, then the Outcome. Closing the iterator cancels."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()

        def on_piece(piece: str) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, piece)

        future = asyncio.wrap_future(self._pool.submit(self._run, job, on_piece, cancelled))
        future.add_done_callback(lambda _f: queue.put_nowait(_DONE))
        try:
            while True:
                item = await queue.get()
                if item is _DONE:
                    break
                yield item  # type: ignore[misc]
            yield future.result()
        finally:
            cancelled.set()

    async def complete(self, job: Job, cancelled: threading.Event) -> Outcome:
        """The whole reply at once. No per-token hop to the event loop: every wake-up of another thread
        takes a core from llama.cpp's compute threads, which wait for each other at every barrier."""
        try:
            return await asyncio.wrap_future(self._pool.submit(self._run, job, lambda _p: None, cancelled))
        finally:
            cancelled.set()
