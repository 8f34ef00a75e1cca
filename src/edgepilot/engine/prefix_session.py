"""What both engines' conversations keep track of between turns: the tokens their KV cache holds, how much of
the next prompt those spare (the common prefix, and after dropped turns the kept ones found further on), and
the turn's figures. How the cache is trimmed and slid is each engine's own: engine/session.py (in-process,
through llama.cpp's memory calls) and engine/server_session.py (llama-server's slot)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from edgepilot.engine.base import GenerationStats, TurnStats, common_prefix
from edgepilot.engine.kv_slide import Move, plan_moves
from edgepilot.engine.sampling import SamplerSettings


class PrefixSession:
    """One conversation's KV cache on an engine (the engine's context is the session's: one at a time)."""

    def __init__(self, engine: Any, reuse: bool = True) -> None:
        self.engine = engine
        self.reuse = reuse
        self.cached: list[int] = []  # the tokens the KV cache holds, in order from position 0
        self.slid = 0  # tokens the last turn moved down instead of processing again
        self.blocked = ""  # why the last turn could not slide what it could have
        self.recomputed = 0  # and how many tokens it processed again for that

    @property
    def n_ctx(self) -> int:
        return int(self.engine.load.n_ctx)

    def reset(self) -> None:
        self.cached = []

    def shared(self, tokens: list[int], slide: bool) -> tuple[int, list[Move]]:
        """How many tokens of `tokens` the cache holds from position 0 (one always left to process, for the
        logits) and, with `slide`, the runs after them found further on in the cache (kv_slide.py)."""
        limit = len(tokens) - 1
        n_keep = min(common_prefix(self.cached, tokens), limit)
        return n_keep, plan_moves(self.cached, tokens, n_keep, limit) if slide else []

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
        """Generate after `tokens`, reusing the cache for their common prefix with the last sequence (and
        with `slide`, the turns kept after a drop)."""
        t0 = time.perf_counter()
        before = len(self.cached)
        self.slid, self.blocked, self.recomputed = 0, "", 0
        ask = {"sampler": sampler, "on_text": on_text, "on_phase": on_phase, "stop_at_eog": stop_at_eog}
        gen, ttft, note = self.turn(tokens, n_predict, slide, t0, ask)
        self.cached = [*tokens, *gen.tokens]
        turn = TurnStats.of(
            gen, ttft, note, n_slid=self.slid, slide_blocked=self.blocked, n_recomputed=self.recomputed,
            n_cached_before=before,
        )  # fmt: skip
        return gen, turn

    def turn(
        self, tokens: list[int], n_predict: int, slide: bool, t0: float, ask: dict[str, Any]
    ) -> tuple[GenerationStats, float, str]:
        """The engine's part of a turn: trim (and slide) the cache, generate with `ask` (the engine's
        generate() keywords), set slid/blocked/recomputed. (generation, time to first token, a note when the
        cache could not keep what it shared)"""
        raise NotImplementedError
