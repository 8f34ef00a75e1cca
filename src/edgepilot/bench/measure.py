"""llama-bench's two tests on a loaded LlamaEngine (tools/llama-bench/llama-bench.cpp, test_prompt/test_gen).

pp: an empty cache, then n_prompt random tokens (BOS first when the model adds one) decoded in n_batch chunks.
tg: an empty cache, then n_gen single-token decodes of random tokens, no sampling.
A sample is tokens / seconds of one repetition; tokens are drawn before the clock starts.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from edgepilot.engine.base import EngineError
from edgepilot.plan.settings import EngineSettings

if TYPE_CHECKING:
    from edgepilot.engine.inprocess import LlamaEngine

LLAMA_BENCH_BATCH = 2048  # llama-bench's default -b


def bench_settings(
    n_prompt: int,
    n_gen: int,
    n_threads: int,
    n_ubatch: int = 512,
    flash_attn: bool = False,
    n_batch: int = LLAMA_BENCH_BATCH,
    type_k: str = "f16",
    type_v: str = "f16",
    repack: bool = True,
) -> EngineSettings:
    """llama-bench sizes the context to the test (n_prompt + n_gen); pp and tg share one context here."""
    return EngineSettings(
        n_ctx=max(16, n_prompt, n_gen + 1),
        n_batch=n_batch,
        n_ubatch=n_ubatch,
        type_k=type_k,
        type_v=type_v,
        flash_attn=flash_attn,
        n_threads=n_threads,
        repack=repack,
    )


@dataclass
class Sample:
    tokens: int
    seconds: float

    @property
    def ts(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


class Bencher:
    """Runs pp/tg repetitions on one engine; switching threads is free, the context stays."""

    def __init__(self, engine: LlamaEngine, seed: int = 1234) -> None:
        from edgepilot.engine.llama_binding import llama_cpp

        self.engine = engine
        self.rng = random.Random(seed)
        vocab = engine.vocab
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
        self.bos = llama_cpp.llama_vocab_bos(vocab) if llama_cpp.llama_vocab_get_add_bos(vocab) else None
        self.threads: int | None = None

    def set_threads(self, n_threads: int) -> None:
        if n_threads != self.threads:
            self.engine.set_threads(n_threads, n_threads)
            self.threads = n_threads

    def _tokens(self, n: int) -> list[int]:
        tokens = [self.rng.randrange(self.n_vocab) for _ in range(n)]
        if self.bos is not None and tokens:
            tokens[0] = self.bos
        return tokens

    def pp(self, n_prompt: int) -> Sample:
        tokens = self._tokens(n_prompt)
        self.engine.reset()
        return Sample(n_prompt, self.engine.eval_prompt(tokens))

    def tg(self, n_gen: int, max_seconds: float | None = None) -> Sample:
        tokens = self._tokens(n_gen)
        self.engine.reset()
        deadline = time.perf_counter() + max_seconds if max_seconds else None
        n, seconds = decode_each(self.engine, tokens, deadline)
        return Sample(n, seconds)

    def warmup(self, n_prompt: int, n_gen: int) -> None:
        """llama-bench's warm-up: one full prompt run, one generated token."""
        if n_prompt > 0:
            self.pp(n_prompt)
        if n_gen > 0:
            self.tg(1)


def decode_each(engine: LlamaEngine, tokens: list[int], deadline: float | None = None) -> tuple[int, float]:
    """Decode tokens one at a time on the engine's context without sampling, as llama-bench's tg test does.

    Returns (tokens decoded, seconds). With a deadline (a time.perf_counter() value) it stops early once
    the deadline has passed, so a hopeless setting (threads on stalled little cores) cannot take minutes.
    """
    from edgepilot.engine.llama_binding import llama_cpp

    one = (llama_cpp.llama_token * 1)()
    batch = llama_cpp.llama_batch_get_one(one, 1)  # points at `one`: refill it, reuse the batch
    ctx, decode, clock = engine._ctx, llama_cpp.llama_decode, time.perf_counter
    n, rc = 0, 0
    t0 = clock()
    if deadline is None:
        for token in tokens:
            one[0] = token
            rc = decode(ctx, batch)
            if rc != 0:
                break
            n += 1
    else:
        for token in tokens:
            one[0] = token
            rc = decode(ctx, batch)
            if rc != 0:
                break
            n += 1
            if clock() > deadline:
                break
    llama_cpp.llama_synchronize(ctx)
    seconds = clock() - t0
    if rc != 0:
        raise EngineError(f"llama_decode failed with code {rc} after {n} of {len(tokens)} tokens")
    return n, seconds
