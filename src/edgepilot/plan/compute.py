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

from edgepilot.gguf.arch import ArchParams

F32 = 4
F16 = 2
# Live activations per token in the attention phase, in units of n_embd f32 values (residual, normed input,
# Q/K/V, attention output). Fitted to llama.cpp's reserve for SmolLM2 (5.67) and rounded up.
ACTIVATION_ROWS = 6
# A real run's graphs (one output per ubatch, the KV view growing chunk by chunk) touch more score memory
# than the reserve graph lays out: measured 1.4-1.5 x n_head score planes for SmolLM2 and Gemma 3 at
# ctx 2048-32768 (benchmarks/data/memory_runs.json). The scheduler grows the buffer when a graph needs it.
RUN_SCORE_PLANES = 1.45
# Flash attention's run-time scratch grows with the square of the ubatch: ~6.5 MiB at 512 tokens and
# ~0.4 MiB at 128 for both calibration models (benchmarks/data/memory_runs.json), whatever the context.
FLASH_SCRATCH_PER_TOKEN_SQUARED = 26


@dataclass
class ComputeEstimate:
    reserved_bytes: int
    touched_bytes: int  # by a run whose prompt fills the context (one output per ubatch)
    phase: str  # "output" or "attention": which phase sizes the reserve


def _attention_bytes(p: ArchParams, n_tokens: int, n_kv: int, flash_attn: bool, planes: float = 1.0) -> int:
    n_head = max(p.n_head) if p.n_head else 0
    activations = n_tokens * p.n_embd * F32 * ACTIVATION_ROWS
    if flash_attn:
        return n_tokens * n_kv * F16 + activations
    return int(n_tokens * n_kv * (n_head * planes + 1) * F32) + activations


def _output_bytes(p: ArchParams, n_tokens: int, n_outputs: int) -> int:
    return n_outputs * (p.n_vocab or 0) * F32 + n_tokens * 2 * p.n_embd * F32


def compute_buffer(
    p: ArchParams,
    n_ctx: int,
    n_ubatch: int,
    flash_attn: bool,
    cells_full: int,
    cells_swa: int,
    reserve_one_output: bool = False,
) -> ComputeEstimate:
    """n_ctx as llama.cpp pads it; cells_* = KV cells of full-attention and sliding-window layers.
    reserve_one_output: llama.cpp reserves the graph for one logits row (newer releases: n_outputs_max)."""
    n_tokens = max(1, min(n_ubatch, n_ctx))
    attention_layers = p.attention_layers()
    n_kv = 0
    if attention_layers:
        n_kv = cells_full if any(not p.is_swa[il] for il in attention_layers) else cells_swa
    attention = _attention_bytes(p, n_tokens, n_kv, flash_attn) if n_kv else 0
    output_reserved = _output_bytes(p, n_tokens, 1 if reserve_one_output else n_tokens)
    reserved = max(attention, output_reserved)
    run_attention = _attention_bytes(p, n_tokens, n_kv, flash_attn, RUN_SCORE_PLANES) if n_kv else 0
    if flash_attn and n_kv:
        run_attention += FLASH_SCRATCH_PER_TOKEN_SQUARED * n_tokens * n_tokens
    touched = max(run_attention, _output_bytes(p, n_tokens, 1))
    return ComputeEstimate(
        reserved_bytes=reserved,
        touched_bytes=touched,
        phase="attention" if attention >= output_reserved else "output",
    )
