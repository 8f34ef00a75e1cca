"""Bits per weight of llama-quantize's types, to estimate "this model at a smaller quant" from its size.

Two figures per type:
- nominal_bpw: the main ggml type's own size (block bytes * 8 / block elements, from ggml_types);
- file_bpw: bits per weight of a whole file, from the QUANT_OPTIONS of tools/quantize/quantize.cpp
  (llama.cpp@0c1e57098): its Llama-3-8B file sizes (GiB, 8.03e9 weights) for the legacy and k-quants, its
  stated bpw for the i-quants. The mixes keep some tensors (output, token embedding, norms) at higher
  precision, so a real file is larger than the nominal figure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from edgepilot.gguf.ggml_types import GGML_TYPES, type_id

# general.file_type values (llama_ftype): gguf-py's LlamaFileType (gguf 0.19), checked against the installed
# `gguf` package by tests/gguf/test_ggml_table.py.
LLAMA_FILE_TYPES: dict[int, str] = {
    0: "ALL_F32",
    1: "MOSTLY_F16",
    2: "MOSTLY_Q4_0",
    3: "MOSTLY_Q4_1",
    7: "MOSTLY_Q8_0",
    8: "MOSTLY_Q5_0",
    9: "MOSTLY_Q5_1",
    10: "MOSTLY_Q2_K",
    11: "MOSTLY_Q3_K_S",
    12: "MOSTLY_Q3_K_M",
    13: "MOSTLY_Q3_K_L",
    14: "MOSTLY_Q4_K_S",
    15: "MOSTLY_Q4_K_M",
    16: "MOSTLY_Q5_K_S",
    17: "MOSTLY_Q5_K_M",
    18: "MOSTLY_Q6_K",
    19: "MOSTLY_IQ2_XXS",
    20: "MOSTLY_IQ2_XS",
    21: "MOSTLY_Q2_K_S",
    22: "MOSTLY_IQ3_XS",
    23: "MOSTLY_IQ3_XXS",
    24: "MOSTLY_IQ1_S",
    25: "MOSTLY_IQ4_NL",
    26: "MOSTLY_IQ3_S",
    27: "MOSTLY_IQ3_M",
    28: "MOSTLY_IQ2_S",
    29: "MOSTLY_IQ2_M",
    30: "MOSTLY_IQ4_XS",
    31: "MOSTLY_IQ1_M",
    32: "MOSTLY_BF16",
    36: "MOSTLY_TQ1_0",
    37: "MOSTLY_TQ2_0",
    38: "MOSTLY_MXFP4_MOE",
    39: "MOSTLY_NVFP4",
    40: "MOSTLY_Q1_0",
    1024: "GUESSED",
}
_FILE_TYPE_IDS = {name: value for value, name in LLAMA_FILE_TYPES.items()}
_LLAMA3_8B_PARAMS = 8_030_261_248
_GIB = 1 << 30


@dataclass(frozen=True)
class QuantType:
    name: str  # as llama-quantize spells it
    file_type: int  # general.file_type (llama_ftype)
    main_type: str  # the ggml type most tensors get
    nominal_bpw: float
    file_bpw: float  # whole-file bits per weight (nominal where quantize.cpp gives no size)


def _nominal(ggml_type: str) -> float:
    _, block, size = GGML_TYPES[type_id(ggml_type)]
    return size * 8 / block


# (llama-quantize name, LlamaFileType member, main ggml type (llama-quant.cpp llama_ftype_get_default_type),
#  Llama-3-8B size in GiB or, negated, the stated bpw, from quantize.cpp; None: nominal)
_TABLE: list[tuple[str, str, str, float | None]] = [
    ("IQ1_S", "MOSTLY_IQ1_S", "IQ1_S", -1.56),
    ("IQ1_M", "MOSTLY_IQ1_M", "IQ1_M", -1.75),
    ("IQ2_XXS", "MOSTLY_IQ2_XXS", "IQ2_XXS", -2.06),
    ("IQ2_XS", "MOSTLY_IQ2_XS", "IQ2_XS", -2.31),
    ("IQ2_S", "MOSTLY_IQ2_S", "IQ2_XS", -2.5),
    ("IQ2_M", "MOSTLY_IQ2_M", "IQ2_S", -2.7),
    ("Q2_K_S", "MOSTLY_Q2_K_S", "Q2_K", 2.96),
    ("Q2_K", "MOSTLY_Q2_K", "Q2_K", 2.96),
    ("IQ3_XXS", "MOSTLY_IQ3_XXS", "IQ3_XXS", -3.06),
    ("IQ3_XS", "MOSTLY_IQ3_XS", "IQ3_S", -3.3),
    ("IQ3_S", "MOSTLY_IQ3_S", "IQ3_S", -3.44),
    ("IQ3_M", "MOSTLY_IQ3_M", "IQ3_S", -3.66),
    ("Q3_K_S", "MOSTLY_Q3_K_S", "Q3_K", 3.41),
    ("Q3_K_M", "MOSTLY_Q3_K_M", "Q3_K", 3.74),
    ("Q3_K_L", "MOSTLY_Q3_K_L", "Q3_K", 4.03),
    ("IQ4_XS", "MOSTLY_IQ4_XS", "IQ4_XS", -4.25),
    ("IQ4_NL", "MOSTLY_IQ4_NL", "IQ4_NL", -4.5),
    ("Q4_0", "MOSTLY_Q4_0", "Q4_0", 4.34),
    ("Q4_K_S", "MOSTLY_Q4_K_S", "Q4_K", 4.37),
    ("Q4_K_M", "MOSTLY_Q4_K_M", "Q4_K", 4.58),
    ("Q4_1", "MOSTLY_Q4_1", "Q4_1", 4.78),
    ("Q5_0", "MOSTLY_Q5_0", "Q5_0", 5.21),
    ("Q5_K_S", "MOSTLY_Q5_K_S", "Q5_K", 5.21),
    ("Q5_K_M", "MOSTLY_Q5_K_M", "Q5_K", 5.33),
    ("Q5_1", "MOSTLY_Q5_1", "Q5_1", 5.65),
    ("Q6_K", "MOSTLY_Q6_K", "Q6_K", 6.14),
    ("Q8_0", "MOSTLY_Q8_0", "Q8_0", 7.96),
    ("BF16", "MOSTLY_BF16", "BF16", None),
    ("F16", "MOSTLY_F16", "F16", None),
    ("F32", "ALL_F32", "F32", None),
]


def _build() -> dict[str, QuantType]:
    out = {}
    for name, ftype, main, gib in _TABLE:
        nominal = _nominal(main)
        if gib is None:
            whole = nominal
        elif gib < 0:
            whole = -gib
        else:
            whole = gib * _GIB * 8 / _LLAMA3_8B_PARAMS
        out[name] = QuantType(name, _FILE_TYPE_IDS[ftype], main, round(nominal, 4), round(whole, 3))
    return out


QUANT_TYPES: dict[str, QuantType] = _build()
_BY_FILE_TYPE = {q.file_type: q for q in QUANT_TYPES.values()}


def quant_type(name: str) -> QuantType:
    """Look up a llama-quantize type by name ("q4_k_m", "Q4_K"; Q3_K/Q4_K/Q5_K mean their _M mix)."""
    key = name.strip().upper()
    key = {"Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}.get(key, key)
    try:
        return QUANT_TYPES[key]
    except KeyError:
        raise ValueError(f"unknown quantization type {name!r}; known: {', '.join(QUANT_TYPES)}") from None


def quant_for_file_type(file_type: int | None) -> QuantType | None:
    """The llama-quantize type behind a GGUF's general.file_type, if it is one of them."""
    return _BY_FILE_TYPE.get(file_type) if file_type is not None else None


def estimate_file_bytes(n_params: int, name: str) -> int:
    """Approximate size of a file of n_params weights quantized with `name` (whole-file bits per weight)."""
    return int(n_params * quant_type(name).file_bpw / 8)


def smaller_than(name: str) -> list[QuantType]:
    """Types with fewer bits per weight than `name`, largest first: what to try when it won't fit."""
    ref = quant_type(name).file_bpw
    return sorted((q for q in QUANT_TYPES.values() if q.file_bpw < ref), key=lambda q: -q.file_bpw)


# llama-quantize refuses these without an importance matrix (llama-imatrix's output).
NEEDS_IMATRIX = ("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "Q2_K_S")
_TAG = re.compile(r"[-_.](?:[IT]?Q\d\w*|F16|F32|BF16|MXFP4\w*)$", re.IGNORECASE)


def output_stem(path: Path) -> str:
    """The model's name without its quantization tag: gemma-3-270m-q4_k_m.gguf -> gemma-3-270m (what
    `edgepilot quantize` names its files after: STEM-TYPE.gguf)."""
    stem = path.name.removesuffix(".gguf")
    return _TAG.sub("", stem) or stem
