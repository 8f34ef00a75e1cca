"""Weight memory: mapped file pages or an anonymous copy, plus the CPU_REPACK copies, per load mode.

Which tensor llama.cpp re-lays into the CPU_REPACK buffer (vendored llama.cpp, src/llama-model-loader.cpp
create_tensor + select_weight_buft, ggml/src/ggml-cpu/repack.cpp):
- the extra buffer type is tried first for every weight; it takes a tensor when the op that uses it is a
  MUL_MAT on a 2-D weight (or a MUL_MAT_ID on a 3-D expert stack) and the CPU has a layout for its type whose
  row multiple divides ne[1] (device/isa.py REPACK_RULES). Embeddings read with GET_ROWS, convolutions, norms
  (1-D) and biases (ADD) stay where they are.
- a tied output: without `output.weight`, the output projection is `token_embd.weight` created a second
  time with TENSOR_DUPLICATED, as a MUL_MAT weight of the output layer. If its type repacks, that duplicate is
  a new tensor in CPU_REPACK (Gemma 3's Q8_0 embedding on an ARM dotprod/i8mm CPU: 170 MiB more) while the
  embedding itself stays a GET_ROWS tensor in the plain buffer. If it does not repack, the duplicate is the
  same tensor and costs nothing.

What each load mode makes resident (load_all_data):
- mmap: the whole file is mapped with MAP_POPULATE; repacked tensors are read from the mapping into their
  copy. After loading, only the span of the tensors left in the CPU_Mapped buffer stays mapped (the header and
  repacked tensors at either end are unmapped), so the repacked tensors inside that span keep their file pages
  resident next to their copy (llama.cpp #19578, #16761).
- no mmap (`-lm none`): plain tensors are read into an anonymous CPU buffer; repacked ones (largest first)
  through a temporary buffer of their own size straight into CPU_REPACK: one copy, plus that transient.
- repack off: every tensor stays in the one plain buffer (mapped or anonymous).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from edgepilot.gguf.gguf_records import TensorInfo

OUTPUT = "output.weight"
TOKEN_EMBD = "token_embd.weight"
# Weights whose op is not a matrix multiplication (llama-arch.cpp LLM_TENSOR_INFOS: GET_ROWS, IM2COL,
# SSM_CONV, SSM_SCAN, ROPE, ...), as names without the `blk.N.` prefix and the `.weight` suffix.
_NOT_MATMUL = frozenset(
    {
        "token_embd",
        "position_embd",
        "token_types",
        "per_layer_token_embd",
        "rope_freqs",
        "rope_factors_long",
        "rope_factors_short",
        "ple_conv1d",
        "attn_compressor_ape",
        "indexer_compressor_ape",
        "attn_sinks",
        "ffn.act",
        "ssm_conv1d",
        "ssm_a",
        "time_mix_first",
        "attn_rel_b",
        "cross_attn_rel_b",
        "conv1d",
        "conv1",
        "conv2",
        "dw",
        "shortconv.conv",
        "ffn_gate_tid2eid",
        "nextn.embed_tokens",
        "masked_embd_centroids",
        "masked_embd_ordering",
        "d2t",
        "markov_w1",
        "selector_predecessor",
        "selector_successor",
    }
)
# Expert stacks, multiplied with MUL_MAT_ID (3-D weights).
_MATMUL_ID = frozenset(
    {
        "ffn_down_exps",
        "ffn_gate_exps",
        "ffn_up_exps",
        "ffn_gate_up_exps",
        "ffn_down_chexps",
        "ffn_gate_chexps",
        "ffn_up_chexps",
    }
)
# Architectures without an output projection (encoders, embedding models): no tied duplicate.
_NO_OUTPUT_ARCHS = frozenset(
    {
        "bert",
        "modern-bert",
        "nomic-bert",
        "nomic-bert-moe",
        "neo-bert",
        "jina-bert-v2",
        "jina-bert-v3",
        "eurobert",
        "t5encoder",
        "llama-embed",
        "clip",
        "wavtokenizer-dec",
    }
)
_LAYER_PREFIX = re.compile(r"^(?:enc\.|dec\.)?(?:blk|posnet|convnext)\.\d+\.")


@dataclass
class WeightsEstimate:
    tensor_bytes: int  # all tensor data in the file
    repack_bytes: int  # the CPU_REPACK buffer with repacking on (the tied duplicate included)
    repacked_tensors: int
    repacked_types: dict[str, int] = field(default_factory=dict)  # llama.cpp layout (q4_K_8x8) -> bytes
    tied_output_bytes: int = 0  # the repacked duplicate of token_embd used as the output (in repack_bytes)
    repacked_file_bytes: int = 0  # file tensors that move to CPU_REPACK (repack_bytes minus the duplicate)
    span_bytes: int = 0  # first to last byte of all tensor data (CPU_Mapped without repacking)
    span_unrepacked_bytes: int = 0  # first to last byte of the tensors that stay plain (CPU_Mapped)
    file_bytes: int = 0  # the whole file: mmap maps and populates all of it while loading
    largest_repacked: list[int] = field(default_factory=list)  # repacked tensor sizes, largest first

    def repack_buffer_bytes(self, repack: bool) -> int:
        return self.repack_bytes if repack else 0

    def weight_buffer_bytes(self, use_mmap: bool, repack: bool) -> int:
        """The plain buffer as llama.cpp logs it: CPU_Mapped (a span of the file) with mmap, CPU without."""
        if use_mmap:
            return self.span_unrepacked_bytes if repack else self.span_bytes
        return self.tensor_bytes - self.repacked_file_bytes if repack else self.tensor_bytes

    def resident_bytes(self, use_mmap: bool, repack: bool = True) -> int:
        """Weight pages resident while the model runs, not counting the CPU_REPACK copy itself."""
        return self.weight_buffer_bytes(use_mmap, repack)

    def load_peak_bytes(self, use_mmap: bool, repack: bool) -> int:
        """Weights resident at the worst moment of loading, the CPU_REPACK copy included."""
        if not repack:
            return self.weight_buffer_bytes(use_mmap, repack)
        if use_mmap:
            return max(self.file_bytes, self.span_bytes) + self.repack_bytes
        # Repacked tensors first, largest first, each through a temporary buffer of its size.
        done, worst = 0, 0
        for size in self.largest_repacked:
            worst = max(worst, done + 2 * size)
            done += size
        return max(worst, self.repack_bytes + self.weight_buffer_bytes(False, True))


def _base_name(name: str) -> str:
    base = _LAYER_PREFIX.sub("", name)
    return base[: -len(".weight")] if base.endswith(".weight") else base


def _n_dims(shape: list[int]) -> int:
    """ggml_n_dims: trailing dimensions of size 1 do not count."""
    dims = len(shape)
    while dims > 1 and shape[dims - 1] == 1:
        dims -= 1
    return dims


def repack_layout(t: TensorInfo, plan: dict[str, tuple[str, int]]) -> str | None:
    """The layout llama.cpp re-lays this tensor into (`q4_K_8x8`), or None when it stays plain."""
    if t.type_name is None or t.type_name not in plan or t.n_bytes is None or len(t.shape) < 2:
        return None
    if t.name.endswith(".bias"):
        return None
    base = _base_name(t.name)
    if base in _NOT_MATMUL:
        return None
    wanted_dims = 3 if base in _MATMUL_ID else 2
    if _n_dims(t.shape) != wanted_dims:
        return None
    layout, row_multiple = plan[t.type_name]
    if t.shape[1] % row_multiple:
        return None
    return f"{t.type_name.lower().replace('_k', '_K')}_{layout}"


def repackable(t: TensorInfo, plan: dict[str, tuple[str, int]]) -> bool:
    return repack_layout(t, plan) is not None


def tied_output_layout(
    tensors: list[TensorInfo], plan: dict[str, tuple[str, int]], architecture: str | None
) -> tuple[str, TensorInfo] | None:
    """(layout, token_embd) when the output projection is token_embd's repacked duplicate."""
    if architecture in _NO_OUTPUT_ARCHS or any(t.name == OUTPUT for t in tensors):
        return None
    embd = next((t for t in tensors if t.name == TOKEN_EMBD), None)
    if embd is None:
        return None
    as_output = TensorInfo(OUTPUT, embd.shape, embd.ggml_type, embd.type_name, embd.offset, 0, embd.n_bytes)
    layout = repack_layout(as_output, plan)
    return (layout, embd) if layout else None


def _span(tensors: list[TensorInfo]) -> int:
    sized = [t for t in tensors if t.n_bytes is not None]
    if not sized:
        return 0
    return max(t.offset + (t.n_bytes or 0) for t in sized) - min(t.offset for t in sized)


def estimate_weights(
    tensors: list[TensorInfo],
    repack_plan: dict[str, tuple[str, int]],
    architecture: str | None = None,
    file_size: int = 0,
) -> WeightsEstimate:
    total = sum(t.n_bytes or 0 for t in tensors)
    layouts: dict[str, int] = {}
    repacked: list[int] = []
    plain: list[TensorInfo] = []
    for t in tensors:
        layout = repack_layout(t, repack_plan)
        if layout is None:
            plain.append(t)
            continue
        layouts[layout] = layouts.get(layout, 0) + (t.n_bytes or 0)
        repacked.append(t.n_bytes or 0)
    file_repacked = sum(repacked)
    tied = tied_output_layout(tensors, repack_plan, architecture)
    tied_bytes = 0
    if tied is not None:
        layout, embd = tied
        tied_bytes = embd.n_bytes or 0
        layouts[layout] = layouts.get(layout, 0) + tied_bytes
        repacked.append(tied_bytes)
    return WeightsEstimate(
        tensor_bytes=total,
        repack_bytes=file_repacked + tied_bytes,
        repacked_tensors=len(repacked),
        repacked_types=layouts,
        tied_output_bytes=tied_bytes,
        repacked_file_bytes=file_repacked,
        span_bytes=_span(tensors),
        span_unrepacked_bytes=_span(plain),
        file_bytes=file_size,
        largest_repacked=sorted(repacked, reverse=True),
    )
