"""A KV cache that lives across turns: process only what is new in each prompt.

The session remembers the tokens the context's KV cache holds (the last prompt and the reply generated after
it). For the next prompt it keeps the longest common prefix, removes the rest from the cache
(llama_memory_seq_rm from the divergence point) and decodes only the new tokens, as llama-server does with
its slots' cache_prompt.

When the conversation dropped its oldest turns to fit, the turns kept are found further on in the cache and
slid down to their new positions (engine/kv_slide.py) rather than processed again.

Some memories cannot keep a prefix: a recurrent model's state cannot drop a partial range (seq_rm returns
false), and a sliding-window cache (Gemma 3 without swa_full) has already forgotten the cells the window
needs before the divergence point when the divergence lies far back. Then the cache is cleared and the whole
prompt processed again, and the turn's `reuse_note` says so.
"""

from __future__ import annotations

import time
from typing import Any

from edgepilot.engine.base import GenerationStats
from edgepilot.engine.inprocess import LlamaEngine
from edgepilot.engine.kv_slide import apply_moves, kept_after, slide_note
from edgepilot.engine.llama_binding import llama_cpp
from edgepilot.engine.prefix_session import PrefixSession


class KVSession(PrefixSession):
    """One conversation's KV cache on an engine (the engine's context is the session's: one at a time)."""

    engine: LlamaEngine

    def __init__(self, engine: LlamaEngine, reuse: bool = True) -> None:
        super().__init__(engine, reuse)
        s = engine.settings
        self.n_swa = 0 if s.swa_full else int(llama_cpp.llama_model_n_swa(engine._model))
        self.can_shift = bool(llama_cpp.llama_memory_can_shift(llama_cpp.llama_get_memory(engine._ctx)))

    def reset(self) -> None:
        self.engine.reset()
        self.cached = []

    def keep(self, tokens: list[int], slide: bool = False) -> tuple[int, str]:
        """Trim the cache to what it shares with `tokens` (leaving one token to process, for the logits);
        `slide` (the conversation dropped its oldest turns): move the turns kept down, too (their keys were
        computed after the dropped ones: an approximation, as llama-server's --cache-reuse, taken only then).
        Returns (tokens kept, a note when the memory could not keep them)."""
        self.slid, self.blocked, self.recomputed = 0, "", 0
        if not self.reuse or not self.cached:
            self.reset()
            return 0, ""
        n_keep, moves = self.shared(tokens, slide)
        if moves and not self.can_shift:
            self.recomputed = kept_after(moves, n_keep) - n_keep
            self.blocked, moves = slide_note(False, self.n_swa), []
        if n_keep <= 0 and not moves:
            self.reset()
            return 0, ""
        mem = llama_cpp.llama_get_memory(self.engine._ctx)
        if moves:
            apply_moves(mem, llama_cpp, moves, self.cached)
            n_keep = kept_after(moves, n_keep)
            self.slid = sum(m.n for m in moves if m.src != m.dst)
        if n_keep < len(self.cached) and not llama_cpp.llama_memory_seq_rm(mem, 0, n_keep, -1):
            self.reset()
            return 0, "this model's memory cannot drop part of the cache (recurrent state): all re-processed"
        if self.n_swa > 0:
            # The sliding-window layers need the n_swa positions before the next one; a cache that already
            # dropped them (positions below pos_min are gone) cannot continue from n_keep.
            pos_min = llama_cpp.llama_memory_seq_pos_min(mem, 0)
            if pos_min > max(0, n_keep - self.n_swa):
                self.reset()
                return 0, (
                    f"the sliding-window cache no longer holds the {self.n_swa} tokens before the change: "
                    "all re-processed"
                )
        del self.cached[n_keep:]
        return n_keep, ""

    def turn(
        self, tokens: list[int], n_predict: int, slide: bool, t0: float, ask: dict[str, Any]
    ) -> tuple[GenerationStats, float, str]:
        n_keep, note = self.keep(tokens, slide) if tokens else (0, "")
        self.cached = []  # unknown while llama.cpp works (an exception, Ctrl-C): the next turn starts clean
        gen = self.engine.generate(tokens, n_predict, n_past=n_keep, **ask)
        return gen, (time.perf_counter() - t0) - gen.gen_seconds, note
