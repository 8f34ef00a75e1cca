"""The tools engine's conversation: llama-server's one slot keeps the KV cache between turns."""

from __future__ import annotations

import time
from typing import Any

from edgepilot.engine.base import GenerationStats
from edgepilot.engine.kv_slide import MIN_CHUNK, kept_after
from edgepilot.engine.prefix_session import PrefixSession
from edgepilot.engine.server_engine import ServerEngine

BLOCKED = "llama-server could not shift this model's cache: the kept turns were processed again"


class ServerSession(PrefixSession):
    """A conversation's KV cache in llama-server's slot: the server keeps the longest common prefix of each
    prompt with its last sequence (cache_prompt) and processes only the rest; the turn's figures come from
    its timings (cache_n: the prompt tokens it kept). After dropped turns it slides the kept ones down
    (`n_cache_reuse`, engine/kv_slide.py); where its memory cannot shift it says so in its log only, so the
    session compares what it kept with what a slide would have kept."""

    engine: ServerEngine

    def turn(
        self, tokens: list[int], n_predict: int, slide: bool, t0: float, ask: dict[str, Any]
    ) -> tuple[GenerationStats, float, str]:
        slide = slide and self.reuse
        n_past, moves = self.shared(tokens, slide)
        self.cached = []
        gen = self.engine.generate(
            tokens, n_predict, cache_prompt=self.reuse, cache_reuse=MIN_CHUNK if slide else 0, **ask
        )
        ttft = gen.first_token_seconds if gen.first_token_seconds is not None else time.perf_counter() - t0
        if moves:
            # what it kept past the common prefix came from after the dropped turns: it slid (its own
            # count of a turn's tokens can differ from ours by the reply's last one: a shorter slide counts)
            self.slid, kept = max(0, gen.n_past - n_past), kept_after(moves, n_past) - n_past
            if self.slid < min(MIN_CHUNK, kept):
                self.slid, self.recomputed = 0, kept
                self.blocked = BLOCKED
        return gen, ttft, ""
