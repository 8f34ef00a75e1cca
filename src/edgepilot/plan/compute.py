"""The compute buffer: what llama.cpp reserves for the worst-case graph, and what a run really touches.

llama-context.cpp reserves the graph for a ubatch of T = min(n_ubatch, n_ctx) tokens that all produce
outputs, against every KV cell. ggml-alloc reuses memory between tensors, so the buffer is the peak of live
tensors, which for a transformer is one of two phases (checked against llama.cpp's no-alloc dry run over ctx
256..32768 and ubatch 32..512 for SmolLM2 and Gemma 3; see tests/plan):

- output phase: the logits, T x n_vocab f32, plus two n_embd rows per token;
- attention phase (without flash attention): the scores, T x n_kv x n_head f32, plus the f32 mask (one more
  "head"), plus the token activations. With flash attention only the f16 mask is materialized.

A real run asks for one output per prompt chunk (the last token), so the output phase it touches is a single
logits row; the attention phase is touched in full once the context has filled.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgepilot.model.arch import ArchParams

F32 = 4
F16 = 2
# Live activations per token in the attention phase, in units of n_embd f32 values (residual, normed input,
# Q/K/V, attention output). Fitted to llama.cpp's reserve for SmolLM2 (5.67) and rounded up.
ACTIVATION_ROWS = 6


@dataclass
class ComputeEstimate:
    reserved_bytes: int
    touched_bytes: int  # by a run whose prompt fills the context (one output per ubatch)
    phase: str  # "output" or "attention": which phase sizes the reserve


def _attention_bytes(p: ArchParams, n_tokens: int, n_kv: int, flash_attn: bool) -> int:
    n_head = max(p.n_head) if p.n_head else 0
    activations = n_tokens * p.n_embd * F32 * ACTIVATION_ROWS
    if flash_attn:
        return n_tokens * n_kv * F16 + activations
    return n_tokens * n_kv * (n_head + 1) * F32 + activations


def _output_bytes(p: ArchParams, n_tokens: int, n_outputs: int) -> int:
    return n_outputs * (p.n_vocab or 0) * F32 + n_tokens * 2 * p.n_embd * F32


def compute_buffer(
    p: ArchParams, n_ctx: int, n_ubatch: int, flash_attn: bool, cells_full: int, cells_swa: int
) -> ComputeEstimate:
    """n_ctx as llama.cpp pads it; cells_* = KV cells of full-attention and sliding-window layers."""
    n_tokens = max(1, min(n_ubatch, n_ctx))
    attention_layers = p.attention_layers()
    n_kv = 0
    if attention_layers:
        n_kv = cells_full if any(not p.is_swa[il] for il in attention_layers) else cells_swa
    attention = _attention_bytes(p, n_tokens, n_kv, flash_attn) if n_kv else 0
    output_reserved = _output_bytes(p, n_tokens, n_tokens)
    reserved = max(attention, output_reserved)
    touched = max(attention, _output_bytes(p, n_tokens, 1))
    return ComputeEstimate(
        reserved_bytes=reserved,
        touched_bytes=min(touched, reserved),
        phase="attention" if attention >= output_reserved else "output",
    )
