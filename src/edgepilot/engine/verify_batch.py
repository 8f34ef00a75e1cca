"""One sequence's tokens in a llama.cpp batch with logits asked at every position: what a lookup verify step
(engine/lookup_decoding.py), the verify-cost measurement (bench/spec_costs.py) and the text scorer
(engine/logits.py) decode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def fill_with_logits(batch: Any, tokens: Sequence[int], first_pos: int) -> None:
    """Put `tokens` at positions first_pos.. of sequence 0 in `batch` (llama_batch_init'ed for at least that
    many), each asking for its logits."""
    batch.n_tokens = len(tokens)
    for i, token in enumerate(tokens):
        batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, first_pos + i, 1
        batch.seq_id[i][0], batch.logits[i] = 0, 1
