"""The tools engine's conversation: llama-server's one slot keeps the KV cache between turns."""

from __future__ import annotations

import time
from collections.abc import Callable

from edgepilot.engine.base import GenerationStats, TurnStats
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.engine.server_engine import ServerEngine


class ServerSession:
    """A conversation's KV cache in llama-server's slot: the server keeps the longest common prefix of each
    prompt with its last sequence (cache_prompt) and processes only the rest; the turn's figures come from
    its timings (cache_n: the prompt tokens it kept)."""

    def __init__(self, engine: ServerEngine, reuse: bool = True) -> None:
        self.engine = engine
        self.reuse = reuse
        self.cached: list[int] = []

    @property
    def n_ctx(self) -> int:
        return self.engine.load.n_ctx

    def reset(self) -> None:
        self.cached = []

    def generate(
        self,
        tokens: list[int],
        n_predict: int,
        sampler: SamplerSettings | None = None,
        on_text: Callable[[str], bool | None] | None = None,
        on_phase: Callable[[str], None] | None = None,
        stop_at_eog: bool = True,
    ) -> tuple[GenerationStats, TurnStats]:
        t0 = time.perf_counter()
        self.cached = []
        gen = self.engine.generate(
            tokens, n_predict, sampler=sampler, on_text=on_text, stop_at_eog=stop_at_eog,
            cache_prompt=self.reuse,
        )  # fmt: skip
        self.cached = [*tokens, *gen.tokens]
        ttft = gen.first_token_seconds if gen.first_token_seconds is not None else time.perf_counter() - t0
        return gen, TurnStats.of(gen, ttft)
