"""N-gram lookup decoding in this process: llama.cpp's `ngram-simple` (common/ngram-map.cpp), verified by our
own loop on the C API.

Each step decodes the token just chosen plus the tokens that followed the last earlier occurrence of the
current n-gram, with logits for every position, in one batch. The target then picks at each position as it
would alone (argmax at temperature 0, its own sampler chain otherwise): while its pick equals the drafted
token, that token is kept; the first pick that differs is the next token, and the drafted positions after it
are removed from the KV cache (`llama_memory_seq_rm`). A drafted token is certain (its proposal probability
is 1), so sampling at each position from the target's distribution and stopping at the first difference is
speculative sampling's acceptance rule exactly: the output has the target's distribution at any temperature,
and at temperature 0 it is the target's greedy text (up to the batch's float rounding, which can differ from
one token's).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from edgepilot.engine.base import GenerationStats
from edgepilot.engine.llama_binding import llama_cpp
from edgepilot.engine.speculation import LOOKUP_NGRAM, SpecStats, Speculation
from edgepilot.engine.token_text import TokenText
from edgepilot.engine.verify_batch import fill_with_logits
from edgepilot.plan.speculation_memory import DEFAULT_N_MAX

DRAFT_MAX = DEFAULT_N_MAX["lookup"]  # its --spec-ngram-simple-size-m default (48)


@dataclass
class NgramIndex:
    """Where each token occurs in the context, so the last earlier occurrence of an n-gram is found by
    looking at the positions of its first token only."""

    tokens: list[int]
    positions: dict[int, list[int]] = field(default_factory=dict)
    indexed: bool = True  # False: the tokens only (a draft model proposes, nothing is looked up)

    def __post_init__(self) -> None:
        if self.indexed:
            for pos, token in enumerate(self.tokens):
                self.positions.setdefault(token, []).append(pos)

    def append(self, token: int) -> None:
        if self.indexed:
            self.positions.setdefault(token, []).append(len(self.tokens))
        self.tokens.append(token)

    def draft(self, sampled: int, n: int = LOOKUP_NGRAM, m: int = DRAFT_MAX) -> list[int]:
        """common_ngram_simple_draft: the (n-1) last tokens plus `sampled`, searched backwards in the
        context; what followed the match (at most m tokens, none when fewer than n would follow)."""
        if not self.indexed:
            raise ValueError("an NgramIndex made with indexed=False holds no positions to look up")
        tokens, cur_len = self.tokens, len(self.tokens)
        if m < 1 or cur_len <= n + m + 1:
            return []
        pattern = tokens[cur_len - n + 1 :] + [sampled]
        last_start = cur_len - n - 1
        for j in reversed(self.positions.get(pattern[0], ())):
            if j > last_start:
                continue
            if j == 0:
                break  # llama.cpp never matches at position 0
            if tokens[j : j + n] == pattern:
                copy = min(m, cur_len - (j + n))
                return tokens[j + n : j + n + copy] if copy >= n else []
        return []


class LookupEngine(Protocol):
    """What the loop uses of the in-process engine (engine/inprocess.py's LlamaEngine)."""

    _ctx: Any
    vocab: Any
    speculation: Speculation | None
    between_tokens: Callable[[int], None] | None

    def piece(self, token: int) -> bytes: ...
    def _decode_failed(self, rc: int) -> None: ...


@dataclass
class LookupOutcome:
    tokens: list[int]
    n_gen: int
    stopped_by: str
    first_token_seconds: float | None
    gen_seconds: float
    stats: SpecStats

    def generation_stats(
        self, prompt: list[int], prompt_seconds: float, n_past: int, context_bound: bool
    ) -> GenerationStats:
        """As the plain loop reports it (context_bound: the budget was cut to what the context holds)."""
        return GenerationStats(
            n_prompt=len(prompt),
            n_gen=self.n_gen,
            prompt_seconds=prompt_seconds,
            gen_seconds=self.gen_seconds,
            stopped_by="context" if context_bound and self.stopped_by == "limit" else self.stopped_by,
            first_token_seconds=self.first_token_seconds,
            n_past=n_past,
            tokens=self.tokens,
            speculation=self.stats,
        )


def lookup_generate(
    engine: LookupEngine,
    context: list[int],
    budget: int,
    pick_at: Callable[[int], int],
    on_text: Callable[[str], bool | None] | None,
    stop_at_eog: bool,
    t_start: float,
    drafter: Callable[[list[int], int, int], list[int]] | None = None,
) -> LookupOutcome:
    """Generate up to `budget` tokens after `context` (the tokens the KV cache holds, the last one's logits
    ready at batch index -1). pick_at(i) is the target's choice from the logits at batch index i.
    drafter(kept, chosen, n): a draft model's proposal (engine/draft_decoding.py) instead of the lookup's."""
    ctx, between = engine._ctx, engine.between_tokens  # noqa: SLF001
    default = DEFAULT_N_MAX["draft"] if drafter else DRAFT_MAX
    m = (engine.speculation.n_max if engine.speculation else None) or default
    index = NgramIndex(list(context), indexed=drafter is None)
    memory = llama_cpp.llama_get_memory(ctx)
    batch = llama_cpp.llama_batch_init(m + 1, 0, 1)
    text_out = TokenText(engine.vocab, engine.piece, on_text, stop_at_eog)
    generated: list[int] = []
    n_gen, drafted, accepted, stopped_by = 0, 0, 0, "limit"
    first_token: float | None = None
    t0 = t_end = time.perf_counter()

    def emits(token: int) -> str | None:
        """Whether generation goes on after `token`: None, or why it stops (the token is not kept)."""
        nonlocal n_gen, t_end
        why = text_out.stop_reason(token)
        if why == "caller":
            n_gen += 1
            t_end = time.perf_counter()
        return why

    try:
        pending = pick_at(-1)
        first_token = time.perf_counter() - t_start
        while True:
            why = emits(pending)
            if why is not None:
                stopped_by = why
                break
            room = budget - n_gen - 1
            if room <= 0:
                draft = []
            elif drafter is not None:
                draft = drafter(index.tokens, pending, min(m, room))
            else:
                draft = index.draft(pending, m=m)[:room]  # cut after: m < n drafts nothing
            base = len(index.tokens)
            fill_with_logits(batch, [pending, *draft], base)
            if between is not None:
                between(n_gen + 1)
            rc = llama_cpp.llama_decode(ctx, batch)
            if rc != 0:
                engine._decode_failed(rc)  # noqa: SLF001
            index.append(pending)
            generated.append(pending)
            n_gen += 1
            drafted += len(draft)
            t_end = time.perf_counter()
            if n_gen >= budget:
                break
            chosen: int | None = None
            for i, token in enumerate(draft):
                pick = pick_at(i)
                if pick != token:
                    chosen = pick
                    break
                why = emits(token)
                if why is not None:
                    stopped_by = why
                    break
                index.append(token)
                generated.append(token)
                n_gen += 1
                accepted += 1
                t_end = time.perf_counter()
            else:
                if n_gen < budget:
                    chosen = pick_at(len(draft))
            # drafted positions past the last kept token leave the cache
            llama_cpp.llama_memory_seq_rm(memory, 0, len(index.tokens), -1)
            if chosen is None:
                break
            pending = chosen
    finally:
        llama_cpp.llama_batch_free(batch)
    text_out.finish(stopped_by)
    return LookupOutcome(
        generated,
        n_gen,
        stopped_by,
        first_token,
        t_end - t0,
        SpecStats("draft" if drafter else "lookup", drafted, accepted, n_gen),
    )
