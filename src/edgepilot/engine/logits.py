"""Next-token log-probabilities for every position of a token sequence, as llama-perplexity computes them.

One sequence is decoded into an empty cache in n_batch pieces with logits requested for every position
(llama_batch_init + logits flags, tools/perplexity/perplexity.cpp); the rows are read with
llama_get_logits_ith and turned into log-softmax rows in float64 (then stored as float32).
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

import numpy as np

from edgepilot.engine.llama_binding import llama_cpp
from edgepilot.engine.verify_batch import fill_with_logits
from edgepilot.errors import UserError

if TYPE_CHECKING:
    from edgepilot.engine.inprocess import LlamaEngine


def log_softmax(rows: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax in float64 (stable: the row maximum is subtracted first)."""
    x = rows.astype(np.float64, copy=False)
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def sequence_logprobs(engine: LlamaEngine, tokens: list[int], first: int) -> np.ndarray:
    """log p(token | previous tokens) rows for positions first .. len(tokens)-2 of one sequence decoded
    from position 0 (row i predicts tokens[first + i + 1]): shape (len(tokens) - 1 - first, n_vocab)."""
    ctx = engine._ctx  # noqa: SLF001 - the engine layer's own handle
    n_ctx = llama_cpp.llama_n_ctx(ctx)
    n_batch = llama_cpp.llama_n_batch(ctx)
    if len(tokens) > n_ctx or not 0 <= first < len(tokens) - 1:
        raise UserError(f"cannot score {len(tokens)} tokens from {first} in a context of {n_ctx}")
    n_vocab = engine.load.n_vocab
    engine.reset()
    out = np.empty((len(tokens) - 1 - first, n_vocab), dtype=np.float32)
    batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
    try:
        for start in range(0, len(tokens), n_batch):
            piece = tokens[start : start + n_batch]
            fill_with_logits(batch, piece, start)
            rc = llama_cpp.llama_decode(ctx, batch)
            if rc != 0:
                raise UserError(f"llama_decode failed with code {rc} while scoring the text")
            for i in range(len(piece)):
                pos = start + i
                if first <= pos < len(tokens) - 1:
                    row = llama_cpp.llama_get_logits_ith(ctx, i)
                    view = np.ctypeslib.as_array(ctypes.cast(row, ctypes.POINTER(ctypes.c_float)), (n_vocab,))
                    out[pos - first] = view
    finally:
        llama_cpp.llama_batch_free(batch)
    # in blocks: a float64 copy of every row at once would be 8 bytes x n_vocab x positions
    for lo in range(0, len(out), 64):
        out[lo : lo + 64] = log_softmax(out[lo : lo + 64])
    return out
