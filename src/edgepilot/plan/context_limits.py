"""What a context asks of the model and of llama.cpp, said before the run: fit, run, chat and serve all show
these warnings (plan.fit puts them in the plan).

- Above the context the model was trained on, llama.cpp runs anyway and only logs "possible training context
  overflow" (llama-context.cpp): positions past it were never seen in training and the output degrades. The
  GGUF's RoPE-scaling keys (`ARCH.rope.scaling.type`, `.factor`, `.original_context_length`) say whether the
  trained context was itself stretched from a shorter one.
- llama.cpp pads the context to a multiple of 256 cells (`cparams.n_ctx = GGML_PAD(n_ctx, 256)`): the run gets
  that context, and its KV cache that many cells.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CTX_PAD = 256  # llama-context.cpp pads n_ctx (and each sequence's share) to this


def padded_ctx(n_ctx: int) -> int:
    return -(-n_ctx // CTX_PAD) * CTX_PAD


def rope_scaling(metadata: Mapping[str, Any], arch: str) -> str | None:
    """The GGUF's RoPE-scaling facts in words, or None when it declares none."""
    kind = metadata.get(f"{arch}.rope.scaling.type")
    factor = metadata.get(f"{arch}.rope.scaling.factor") or metadata.get(f"{arch}.rope.scale_linear")
    original = metadata.get(f"{arch}.rope.scaling.original_context_length")
    if (kind in (None, "none") and not factor) or factor in (0, 1, 1.0):
        return None
    parts = [f"RoPE scaling {kind or 'linear'}"]
    if isinstance(factor, (int, float)):
        parts.append(f"factor {factor:g}")
    if isinstance(original, int) and original > 0:
        parts.append(f"from an original context of {original}")
    return " ".join(parts)


def context_warnings(
    metadata: Mapping[str, Any], arch: str, n_ctx_train: int | None, n_ctx: int, given: bool
) -> list[str]:
    """Warnings for a run at n_ctx: above the trained context (with the GGUF's RoPE-scaling facts), and any
    rounding llama.cpp will make. given: the user asked for this context (a chosen one needs no word)."""
    out: list[str] = []
    if n_ctx_train and n_ctx > n_ctx_train:
        rope = rope_scaling(metadata, arch)
        scaled = f"its GGUF declares {rope}" if rope else "its GGUF declares no RoPE scaling"
        out.append(
            f"ctx {n_ctx} is above the {n_ctx_train} tokens the model was trained on ({scaled}): past "
            f"them its output can degrade; --ctx {n_ctx_train} stays within it"
        )
    padded = padded_ctx(n_ctx)
    if given and padded != n_ctx:
        out.append(f"ctx {n_ctx} is rounded up to {padded}: llama.cpp makes it a multiple of {CTX_PAD}")
    return out
