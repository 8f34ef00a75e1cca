"""Synthetic GGUFs for the model-layer tests.

- `write_model`: a real GGUF written with the `gguf` package's GGUFWriter, carrying an architecture's
  hyper-parameters (taken from the published configs) and a few tiny tensors of assorted ggml types.
- `RawGGUF`: a byte-level builder for headers GGUFWriter refuses to write (hostile lengths and counts,
  bad offsets, nested arrays).
- corruption helpers that turn a valid file into a damaged one.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gguf.constants import GGML_QUANT_SIZES

from gguf import GGMLQuantizationType, GGUFWriter

MiB = 1 << 20

# Published hyper-parameters (HF config.json of each model, as convert_hf_to_gguf.py writes them).
ARCHS: dict[str, dict[str, Any]] = {
    # HuggingFaceTB/SmolLM2-135M: llama, 30 layers, 9 heads / 3 KV heads of 64
    "smollm2": {
        "arch": "llama",
        "block_count": 30,
        "embedding_length": 576,
        "feed_forward_length": 1536,
        "head_count": 9,
        "head_count_kv": 3,
        "context_length": 8192,
        "vocab_size": 49152,
        "rope_dims": 64,
    },
    # google/gemma-3-270m: 18 layers, 4 heads / 1 KV head of 256, window 512, 5 of 6 layers sliding
    "gemma3": {
        "arch": "gemma3",
        "block_count": 18,
        "embedding_length": 640,
        "feed_forward_length": 2048,
        "head_count": 4,
        "head_count_kv": 1,
        "key_length": 256,
        "value_length": 256,
        "sliding_window": 512,
        "context_length": 32768,
        "vocab_size": 262144,
    },
    # Qwen/Qwen2.5-0.5B: 24 layers, 14 heads / 2 KV heads of 64
    "qwen2": {
        "arch": "qwen2",
        "block_count": 24,
        "embedding_length": 896,
        "feed_forward_length": 4864,
        "head_count": 14,
        "head_count_kv": 2,
        "context_length": 32768,
        "vocab_size": 151936,
    },
    # microsoft/Phi-3-mini-4k-instruct: 32 layers, 32 heads of 96, sliding_window 2047 (ignored by llama.cpp)
    "phi3": {
        "arch": "phi3",
        "block_count": 32,
        "embedding_length": 3072,
        "feed_forward_length": 8192,
        "head_count": 32,
        "head_count_kv": 32,
        "sliding_window": 2047,
        "context_length": 4096,
        "vocab_size": 32064,
        "rope_dims": 96,
    },
    # deepseek-ai/DeepSeek-V2-Lite as convert_hf_to_gguf.py writes it for MLA: one KV head of
    # kv_lora_rank (512) + qk_rope_head_dim (64), value_length = kv_lora_rank; *_mla keep the MHA sizes.
    "deepseek2": {
        "arch": "deepseek2",
        "block_count": 27,
        "embedding_length": 2048,
        "feed_forward_length": 10944,
        "head_count": 16,
        "head_count_kv": 1,
        "key_length": 576,
        "value_length": 512,
        "key_length_mla": 192,
        "value_length_mla": 128,
        "kv_lora_rank": 512,
        "rope_dims": 64,
        "context_length": 163840,
        "vocab_size": 102400,
    },
    # state-spaces/mamba-130m: 24 layers, d_model 768, d_inner 1536, d_state 16, d_conv 4
    "mamba": {
        "arch": "mamba",
        "block_count": 24,
        "embedding_length": 768,
        "context_length": 1048576,
        "ssm_conv_kernel": 4,
        "ssm_inner_size": 1536,
        "ssm_state_size": 16,
        "ssm_time_step_rank": 48,
        "vocab_size": 50280,
    },
}


@dataclass
class TensorSpec:
    name: str
    shape: tuple[int, ...]  # ggml order: shape[0] is the row length
    ggml_type: str = "F32"


DEFAULT_TENSORS = [
    TensorSpec("token_embd.weight", (64, 32), "Q8_0"),
    TensorSpec("blk.0.attn_norm.weight", (64,), "F32"),
    TensorSpec("blk.0.attn_q.weight", (256, 4), "Q4_K"),
    TensorSpec("blk.0.ffn_up.weight", (32, 16), "F16"),
    TensorSpec("output_norm.weight", (64,), "F32"),
]


def _tensor_bytes(spec: TensorSpec, rng: np.random.Generator) -> tuple[np.ndarray, Any]:
    qtype = GGMLQuantizationType[spec.ggml_type]
    if qtype == GGMLQuantizationType.F32:
        return rng.uniform(0.5, 1.5, size=spec.shape[::-1]).astype(np.float32), None
    if qtype == GGMLQuantizationType.F16:
        return rng.uniform(0.5, 1.5, size=spec.shape[::-1]).astype(np.float16), None
    block, size = GGML_QUANT_SIZES[qtype]
    rows = int(np.prod(spec.shape[1:])) if len(spec.shape) > 1 else 1
    row_bytes = spec.shape[0] // block * size
    data = rng.integers(1, 255, size=(rows, row_bytes), dtype=np.uint8)  # never all zero
    return data, qtype


def write_model(
    path: Path,
    hp: dict[str, Any],
    tensors: list[TensorSpec] | None = None,
    extra: Callable[[GGUFWriter], None] | None = None,
    alignment: int | None = None,
    seed: int = 0,
    name: str | None = None,
) -> Path:
    """Write a GGUF with the hyper-parameters in `hp` (see ARCHS) and small random tensors; `name` is its
    general.name (default `synthetic ARCH`)."""
    arch = hp["arch"]
    w = GGUFWriter(str(path), arch)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    w.add_name(f"synthetic {arch}" if name is None else name)
    w.add_file_type(15)
    w.add_block_count(hp["block_count"])
    w.add_embedding_length(hp["embedding_length"])
    w.add_context_length(hp["context_length"])
    if "feed_forward_length" in hp:
        w.add_feed_forward_length(hp["feed_forward_length"])
    if "head_count" in hp:
        w.add_head_count(hp["head_count"])
        w.add_head_count_kv(hp["head_count_kv"])
    for key, method in [
        ("key_length", w.add_key_length),
        ("value_length", w.add_value_length),
        ("key_length_mla", w.add_key_length_mla),
        ("value_length_mla", w.add_value_length_mla),
        ("kv_lora_rank", w.add_kv_lora_rank),
        ("sliding_window", w.add_sliding_window),
        ("sliding_window_pattern", w.add_sliding_window_pattern),
        ("rope_dims", w.add_rope_dimension_count),
        ("vocab_size", w.add_vocab_size),
        ("ssm_conv_kernel", w.add_ssm_conv_kernel),
        ("ssm_inner_size", w.add_ssm_inner_size),
        ("ssm_state_size", w.add_ssm_state_size),
        ("ssm_time_step_rank", w.add_ssm_time_step_rank),
        ("wkv_head_size", w.add_wkv_head_size),
    ]:
        if key in hp:
            method(hp[key])
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"tok{i}" for i in range(16)])
    if extra is not None:
        extra(w)
    rng = np.random.default_rng(seed)
    for spec in tensors if tensors is not None else DEFAULT_TENSORS:
        data, raw = _tensor_bytes(spec, rng)
        w.add_tensor(spec.name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


# --- raw builder ---


def pack_str(s: str | bytes, declared_len: int | None = None) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b) if declared_len is None else declared_len) + b


_FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<b", 10: "<Q", 11: "<q", 12: "<d"}


def pack_value(vtype: int, value: Any, item_type: int | None = None) -> bytes:
    if vtype == 8:
        return pack_str(value)
    if vtype == 9:
        assert item_type is not None
        out = struct.pack("<iQ", item_type, len(value))
        for v in value:
            out += pack_value(item_type, v[1], v[0]) if item_type == 9 else pack_value(item_type, v)
        return out
    return struct.pack(_FMT[vtype], value)


@dataclass
class RawGGUF:
    version: int = 3
    kvs: list[bytes] = field(default_factory=list)  # each: key + type + value, already packed
    tensor_infos: list[bytes] = field(default_factory=list)
    n_kv: int | None = None  # override the declared counts
    n_tensors: int | None = None
    alignment: int = 32
    data: bytes = b""

    def kv(self, key: str, vtype: int, value: Any, item_type: int | None = None) -> RawGGUF:
        self.kvs.append(pack_str(key) + struct.pack("<i", vtype) + pack_value(vtype, value, item_type))
        return self

    def kv_raw(self, blob: bytes) -> RawGGUF:
        self.kvs.append(blob)
        return self

    def tensor(self, name: str, shape: tuple[int, ...], ggml_type: int, offset: int) -> RawGGUF:
        self.tensor_infos.append(
            pack_str(name)
            + struct.pack("<I", len(shape))
            + b"".join(struct.pack("<q", d) for d in shape)
            + struct.pack("<iQ", ggml_type, offset)
        )
        return self

    def build(self) -> bytes:
        n_kv = len(self.kvs) if self.n_kv is None else self.n_kv
        n_t = len(self.tensor_infos) if self.n_tensors is None else self.n_tensors
        head = b"GGUF" + struct.pack("<IQQ", self.version, n_t, n_kv) + b"".join(self.kvs)
        head += b"".join(self.tensor_infos)
        if self.tensor_infos:
            head += b"\0" * (-len(head) % self.alignment)
        return head + self.data


def f32_tensor_file(offsets: list[int], n: int = 64, data_len: int | None = None) -> bytes:
    """F32 tensors of n elements at the given offsets, with enough non-zero data for well-placed ones."""
    g = RawGGUF().kv("general.architecture", 8, "llama")
    for i, off in enumerate(offsets):
        g.tensor(f"t{i}", (n,), 0, off)
    need = max(off for off in offsets) + n * 4 if data_len is None else data_len
    g.data = bytes(range(1, 256)) * (need // 255 + 1)
    g.data = g.data[:need]
    return g.build()


# --- corruption helpers ---


def zero_tail(path: Path, n_bytes: int) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(size - n_bytes)
        f.write(b"\0" * n_bytes)


def truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)
