"""What a GGUF model is: architecture, size, quantization mix, trained context (for `edgepilot inspect`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgepilot.gguf.quant_types import LLAMA_FILE_TYPES


@dataclass
class TensorRecord:
    name: str
    ggml_type: str
    n_elements: int
    n_bytes: int


@dataclass
class QuantShare:
    ggml_type: str
    tensors: int
    params: int
    bytes: int
    share_of_bytes: float


@dataclass
class ModelInfo:
    path: str
    file_bytes: int
    architecture: str
    name: str | None
    file_type: str | None
    n_params: int
    tensor_bytes: int
    bits_per_weight: float
    quant_mix: list[QuantShare]
    context_length: int | None
    block_count: int | None
    embedding_length: int | None
    head_count: int | None
    head_count_kv: int | list[int] | None
    vocab_size: int | None
    sliding_window: int | None
    has_chat_template: bool
    validation: Any = None
    notes: list[str] = field(default_factory=list)


def file_type_name(value: Any) -> str | None:
    if not isinstance(value, int):
        return None
    try:
        return LLAMA_FILE_TYPES[value].removeprefix("MOSTLY_").removeprefix("ALL_")
    except KeyError:
        return f"file_type {value}"


def summarize(
    path: Path, file_bytes: int, metadata: Mapping[str, Any], tensors: Iterable[TensorRecord]
) -> ModelInfo:
    """Facts about the model from its metadata (key → value; arrays may be given as their lengths)."""
    tensors = list(tensors)
    arch = str(metadata.get("general.architecture", "unknown"))

    def hp(key: str) -> Any:
        return metadata.get(f"{arch}.{key}")

    by_type: dict[str, list[TensorRecord]] = {}
    for t in tensors:
        by_type.setdefault(t.ggml_type, []).append(t)
    total_bytes = sum(t.n_bytes for t in tensors)
    n_params = sum(t.n_elements for t in tensors)
    mix = sorted(
        (
            QuantShare(
                ggml_type=name,
                tensors=len(ts),
                params=sum(t.n_elements for t in ts),
                bytes=sum(t.n_bytes for t in ts),
                share_of_bytes=round(sum(t.n_bytes for t in ts) / total_bytes, 4) if total_bytes else 0.0,
            )
            for name, ts in by_type.items()
        ),
        key=lambda q: q.bytes,
        reverse=True,
    )
    vocab = hp("vocab_size")
    if vocab is None:
        tokens = metadata.get("tokenizer.ggml.tokens")
        vocab = tokens if isinstance(tokens, int) else (len(tokens) if isinstance(tokens, list) else None)
    return ModelInfo(
        path=str(path),
        file_bytes=file_bytes,
        architecture=arch,
        name=metadata.get("general.name"),
        file_type=file_type_name(metadata.get("general.file_type")),
        n_params=n_params,
        tensor_bytes=total_bytes,
        bits_per_weight=round(total_bytes * 8 / n_params, 3) if n_params else 0.0,
        quant_mix=mix,
        context_length=hp("context_length"),
        block_count=hp("block_count"),
        embedding_length=hp("embedding_length"),
        head_count=hp("attention.head_count"),
        head_count_kv=hp("attention.head_count_kv"),
        vocab_size=vocab,
        sliding_window=hp("attention.sliding_window"),
        has_chat_template=bool(metadata.get("tokenizer.chat_template")),
    )
