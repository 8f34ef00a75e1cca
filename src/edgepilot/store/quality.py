"""Quality of a model on a text, as llama-perplexity measures it (tools/perplexity/perplexity.cpp).

Perplexity: the text's tokens in chunks of n_ctx; each chunk is decoded from an empty cache (BOS first when
the model adds one) and only the second half of each chunk is scored, so every scored token has at least
n_ctx/2 tokens of context. KL divergence: the same positions, the reference's full next-token distribution
P against the model's Q, KL(P || Q) = sum P (log P - log Q), averaged over positions; `same_top` is the
share of positions where both pick the same most likely token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from edgepilot.errors import UserError
from edgepilot.untrusted import read_user_file

DEFAULT_TEXT = "alice-chapter1.txt"  # data/SOURCE.md: Lewis Carroll, 1865, public domain
MAX_TEXT_BYTES = 4 << 20


def default_text() -> tuple[str, str]:
    """(name, content) of the text the project ships for quality measurements."""
    data = resources.files("edgepilot.store").joinpath("data", DEFAULT_TEXT).read_text(encoding="utf-8")
    return DEFAULT_TEXT, data


def read_text(path: str | None) -> tuple[str, str]:
    if path is None:
        return default_text()
    data = read_user_file(path, "text file", MAX_TEXT_BYTES)
    try:
        return Path(path).name, data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"text file {path} is not UTF-8 text") from None


def check_text(name: str, text: str, n_ctx: int) -> None:
    """Refuse, before any model loads, a text that cannot fill one chunk of n_ctx tokens: a token covers at
    least one byte, and BOS, EOS and SentencePiece's leading space add at most 3."""
    if not text.strip():
        raise UserError(f"text file {name} has no text; perplexity needs at least {n_ctx} tokens (--ppl-ctx)")
    n_bytes = len(text.encode("utf-8", errors="surrogatepass"))
    if n_bytes + 3 < n_ctx:
        raise UserError(
            f"text file {name} has {n_bytes} bytes, fewer than the {n_ctx} tokens of one chunk (--ppl-ctx): "
            "use a longer --text or a smaller --ppl-ctx"
        )


def chunks(tokens: list[int], n_ctx: int, max_chunks: int, bos: int | None) -> list[list[int]]:
    """Whole chunks of n_ctx tokens (the tail that does not fill one is dropped, as llama-perplexity does)."""
    n = min(len(tokens) // n_ctx, max_chunks)
    if n < 1:
        raise UserError(
            f"the text has {len(tokens)} tokens, fewer than one chunk of {n_ctx}; use a longer --text "
            "or a smaller --ppl-ctx"
        )
    out = []
    for i in range(n):
        chunk = list(tokens[i * n_ctx : (i + 1) * n_ctx])
        if bos is not None:
            chunk[0] = bos
        out.append(chunk)
    return out


def first_scored(n_ctx: int) -> int:
    return n_ctx // 2


def token_nll(logprobs: np.ndarray, targets: list[int]) -> np.ndarray:
    """-log p(target) for each row (row i predicts targets[i])."""
    return -logprobs[np.arange(len(targets)), np.asarray(targets)].astype(np.float64)


def kl_rows(ref: np.ndarray, other: np.ndarray) -> np.ndarray:
    """KL(P_ref || Q) per row, from log-probability rows (float64 sums)."""
    p = ref.astype(np.float64)
    return (np.exp(p) * (p - other.astype(np.float64))).sum(axis=1)


def same_top(ref: np.ndarray, other: np.ndarray) -> int:
    return int((ref.argmax(axis=1) == other.argmax(axis=1)).sum())


@dataclass
class Quality:
    perplexity: float
    ppl_stderr: float  # of the mean negative log-likelihood, carried to perplexity (delta method)
    n_scored: int
    kl_mean: float | None = None  # None for the reference itself until compared
    kl_max: float | None = None
    same_top: float | None = None  # share of positions with the reference's top token


def perplexity_of(nlls: list[float]) -> tuple[float, float]:
    """(exp(mean nll), its standard error) from per-token negative log-likelihoods."""
    arr = np.asarray(nlls, dtype=np.float64)
    mean = float(arr.mean())
    stderr = float(arr.std(ddof=1) / math.sqrt(len(arr))) if len(arr) > 1 else 0.0
    ppl = math.exp(mean)
    return ppl, ppl * stderr
