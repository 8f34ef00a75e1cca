"""ggml tensor types: block sizes and byte sizes, taken from the `gguf` package (not hand-written)."""

from __future__ import annotations

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

# KV cache types llama.cpp accepts for --cache-type-k / --cache-type-v (common/arg.cpp kv_cache_types).
KV_CACHE_TYPES: tuple[str, ...] = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")

_BY_ID: dict[int, tuple[str, int, int]] = {
    int(t): (t.name, block, size) for t, (block, size) in GGML_QUANT_SIZES.items()
}
_BY_NAME: dict[str, int] = {name.lower(): tid for tid, (name, _, _) in _BY_ID.items()}


def type_name(type_id: int) -> str | None:
    """ggml type name ("Q4_K") for an id, or None if the installed `gguf` package does not know it."""
    entry = _BY_ID.get(type_id)
    return entry[0] if entry else None


def type_id(name: str) -> int:
    """ggml type id for a name such as "q8_0" or "F16" (case-insensitive); ValueError if unknown."""
    try:
        return _BY_NAME[name.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown ggml type {name!r}") from None


def block_and_type_size(type_id: int) -> tuple[int, int] | None:
    """(elements per block, bytes per block), or None for a type id the `gguf` package does not know."""
    entry = _BY_ID.get(type_id)
    return (entry[1], entry[2]) if entry else None


def row_bytes(type_id: int, n_elements: int) -> int:
    """Bytes of one row of n_elements (ggml_row_size); the row must be a whole number of blocks."""
    sizes = block_and_type_size(type_id)
    if sizes is None:
        raise ValueError(f"unknown ggml type id {type_id}")
    block, size = sizes
    if n_elements % block:
        raise ValueError(
            f"{n_elements} elements is not a multiple of the {type_name(type_id)} block ({block})"
        )
    return n_elements // block * size


def bytes_per_element(name_or_id: str | int) -> float:
    """Average bytes per element, e.g. q8_0 → 34/32."""
    tid = type_id(name_or_id) if isinstance(name_or_id, str) else name_or_id
    sizes = block_and_type_size(tid)
    if sizes is None:
        raise ValueError(f"unknown ggml type id {tid}")
    return sizes[1] / sizes[0]


def is_quantized(type_id: int) -> bool:
    """True for block-quantized types (what ggml_is_quantized means for the KV cache rules)."""
    sizes = block_and_type_size(type_id)
    return sizes is not None and sizes[0] > 1


F32 = int(GGMLQuantizationType.F32)
F16 = int(GGMLQuantizationType.F16)
