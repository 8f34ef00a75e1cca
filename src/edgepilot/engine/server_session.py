"""The tools engine's conversation: llama-server's one slot keeps the KV cache between turns."""

from __future__ import annotations

import time
from collections.abc import Callable

from edgepilot.engine.base import GenerationStats, TurnStats, common_prefix
from edgepilot.engine.kv_slide import MIN_CHUNK, kept_after, plan_moves
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.engine.server_engine import ServerEngine


class ServerSession:
    """A conversation's KV cache in llama-server's slot: the server keeps the longest common prefix of each
    prompt with its last sequence (cache_prompt) and processes only the rest; the turn's figures come from
    its timings (cache_n: the prompt tokens it kept). After dropped turns it slides the kept ones down
    (`n_cache_reuse`, engine/kv_slide.py); where its memory cannot shift it says so in its log only, so the
    session compares what it kept with what a slide would have kept."""

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
        slide: bool = False,
    ) -> tuple[GenerationStats, TurnStats]:
        t0 = time.perf_counter()
        n_past = min(common_prefix(self.cached, tokens), len(tokens) - 1)
        slide = slide and self.reuse
        moves = plan_moves(self.cached, tokens, n_past, len(tokens) - 1) if slide else []
        before, self.cached = len(self.cached), []
        gen = self.engine.generate(
            tokens, n_predict, sampler=sampler, on_text=on_text, stop_at_eog=stop_at_eog,
            cache_prompt=self.reuse, cache_reuse=MIN_CHUNK if slide else 0,
        )  # fmt: skip
        self.cached = [*tokens, *gen.tokens]
        ttft = gen.first_token_seconds if gen.first_token_seconds is not None else time.perf_counter() - t0
        # what it kept past the common prefix came from after the dropped turns: it slid (its own count of a
        # turn's tokens can differ from ours by the reply's last one, so a shorter slide still counts)
        slid, blocked, recomputed = max(0, gen.n_past - n_past) if moves else 0, "", 0
        if moves and slid < min(MIN_CHUNK, kept_after(moves, n_past) - n_past):
            slid, recomputed = 0, kept_after(moves, n_past) - n_past
            blocked = "llama-server could not shift this model's cache: the kept turns were processed again"
        return gen, TurnStats.of(
            gen, ttft, n_slid=slid, slide_blocked=blocked, n_recomputed=recomputed, n_cached_before=before
        )
