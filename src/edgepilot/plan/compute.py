"""The compute buffer: what llama.cpp reserves for the worst-case graph, and what a run really touches.

llama-context.cpp reserves the graph for a ubatch of T = min(n_ubatch, n_ctx) tokens that all produce
outputs, against every KV cell. ggml-alloc reuses memory between tensors, so the buffer is the peak of live
tensors, which for a transformer is one of two phases (checked against llama.cpp's no-alloc dry run over ctx
256..32768 and ubatch 32..512 for SmolLM2 and Gemma 3; see tests/plan):

- output phase: the logits, T x n_vocab f32, plus two n_embd rows per token;
- attention phase (without flash attention): the scores, T x n_kv x n_head f32, plus the f32 mask (one more
  "head"), plus the token activations. With flash attention only the f16 mask is materialized.

A real run asks for one output per prompt chunk (the last token), so the output phase it touches is a single
logits row; the attention phase is touched in full once the context has filled. What a run touches of the
buffer is therefore never more than what is reserved.

Outside the buffer, ggml's CPU backend keeps a work buffer (ggml-cpu.c, ggml_graph_plan: `cplan.work_size`,
allocated by the backend and grown to the largest graph it computed). Its size is the largest node's
scratch: without flash attention that is the product of the softmaxed scores with the f16 V cache, whose f32
scores are first converted to V's vec_dot type, f16: T x n_kv x n_head x 2 bytes, half the scores again.
Measured: SmolLM2 at ctx 8192, ubatch 512, a context-filling prompt: one anonymous mapping of 70.9 MiB, all
resident = 8192 cells x 504 tokens (the last chunk) x 9 heads x 2 B.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgepilot.gguf.arch import ArchParams

F32 = 4
F16 = 2
# Live activations per token in the attention phase, in units of n_embd f32 values (residual, normed input,
# Q/K/V, attention output). Fitted to llama.cpp's reserve for SmolLM2 (5.67) and rounded up.
ACTIVATION_ROWS = 6
# The work buffer converts the f32 scores to the V cache's vec_dot type before multiplying: f16 (and bf16)
# take 2 bytes a score, an f32 V cache needs no conversion.
SCORES_CONVERTED_BYTES = 2
# Flash attention's run-time scratch grows with the square of the ubatch: ~6.5 MiB at 512 tokens and
# ~0.4 MiB at 128 for both calibration models (benchmarks/data/memory_runs.json), whatever the context.
FLASH_SCRATCH_PER_TOKEN_SQUARED = 26


@dataclass
class ComputeEstimate:
    reserved_bytes: int  # the compute buffer llama.cpp reserves (and logs)
    touched_bytes: int  # of that buffer, what a run whose prompt fills the context touches: <= reserved
    phase: str  # "output" or "attention": which phase sizes the reserve
    work_bytes: int = 0  # the CPU backend's work buffer, outside the reserve (see the module docstring)

    @property
    def running_bytes(self) -> int:
        """The resident memory a run's graphs cost: the buffer's touched part and the work buffer."""
        return self.touched_bytes + self.work_bytes


def _n_head(p: ArchParams) -> int:
    return max(p.n_head) if p.n_head else 0


def _attention_bytes(p: ArchParams, n_tokens: int, n_kv: int, flash_attn: bool) -> int:
    activations = n_tokens * p.n_embd * F32 * ACTIVATION_ROWS
    if flash_attn:
        return n_tokens * n_kv * F16 + activations
    return n_tokens * n_kv * (_n_head(p) + 1) * F32 + activations  # the scores and the mask


def _work_bytes(p: ArchParams, n_tokens: int, n_kv: int, flash_attn: bool, type_v: str) -> int:
    if not n_kv:
        return 0
    if flash_attn:
        return FLASH_SCRATCH_PER_TOKEN_SQUARED * n_tokens * n_tokens
    converted = 0 if type_v == "f32" else SCORES_CONVERTED_BYTES
    return n_tokens * n_kv * _n_head(p) * converted


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
    type_v: str = "f16",
) -> ComputeEstimate:
    """n_ctx as llama.cpp pads it; cells_* = KV cells of full-attention and sliding-window layers.
    reserve_one_output: llama.cpp reserves the graph for one logits row (newer releases: n_outputs_max).
    type_v: the V cache's type (an f32 one needs no converted copy of the scores)."""
    n_tokens = max(1, min(n_ubatch, n_ctx))
    attention_layers = p.attention_layers()
    n_kv = 0
    if attention_layers:
        n_kv = cells_full if any(not p.is_swa[il] for il in attention_layers) else cells_swa
    attention = _attention_bytes(p, n_tokens, n_kv, flash_attn) if n_kv else 0
    output_reserved = _output_bytes(p, n_tokens, 1 if reserve_one_output else n_tokens)
    reserved = max(attention, output_reserved)
    return ComputeEstimate(
        reserved_bytes=reserved,
        touched_bytes=max(attention, _output_bytes(p, n_tokens, 1)),
        phase="attention" if attention >= output_reserved else "output",
        work_bytes=_work_bytes(p, n_tokens, n_kv, flash_attn, type_v),
    )
