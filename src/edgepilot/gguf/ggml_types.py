"""ggml tensor types: block sizes and byte sizes.

The table is gguf-py's GGML_QUANT_SIZES (gguf 0.19, llama.cpp's own Python package), copied so that reading a
model header does not import `gguf` and numpy (110 ms of start-up here, seconds on a phone);
tests/gguf/test_ggml_table.py checks it against the installed `gguf` package, entry by entry.
"""

from __future__ import annotations

# KV cache types llama.cpp accepts for --cache-type-k / --cache-type-v (common/arg.cpp kv_cache_types).
KV_CACHE_TYPES: tuple[str, ...] = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")

# ggml type id: (name, elements per block, bytes per block)
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
}
_BY_ID = GGML_TYPES
_BY_NAME: dict[str, int] = {name.lower(): tid for tid, (name, _, _) in _BY_ID.items()}


def type_name(type_id: int) -> str | None:
    """ggml type name ("Q4_K") for an id, or None for an id this table does not know."""
    entry = _BY_ID.get(type_id)
    return entry[0] if entry else None


def type_id(name: str) -> int:
    """ggml type id for a name such as "q8_0" or "F16" (case-insensitive); ValueError if unknown."""
    try:
        return _BY_NAME[name.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown ggml type {name!r}") from None


def block_and_type_size(type_id: int) -> tuple[int, int] | None:
    """(elements per block, bytes per block), or None for a type id this table does not know."""
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


F32 = type_id("f32")
F16 = type_id("f16")
