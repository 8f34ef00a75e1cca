"""The size of a model requantized to another llama-quantize type, from its own tensor table.

The bits-per-weight table (quant_types) fits models whose rows are multiples of 256. Many small models' are
not (SmolLM2's 576), and llama-quantize then gives those tensors another type (llama-quant.cpp,
tensor_type_fallback): SmolLM2 at IQ3_M measures 84 MiB, not the 59 MiB the table says. Here the tensors of
every layer are requantized one by one, with that fallback; norms stay F32 and quantized embeddings keep their
size (llama.cpp gives them a type of their own; unquantized ones get Q6_K). The _M mixes' few larger tensors
are left out: within a few % of the files llama-quantize wrote for SmolLM2 (tests/gguf/test_requant_size.py).
"""

from __future__ import annotations

from edgepilot.gguf.ggml_types import GGML_TYPES, type_id
from edgepilot.gguf.gguf_records import GGUFHeader
from edgepilot.gguf.quant_types import estimate_file_bytes, quant_for_file_type, quant_type

# llama-quant.cpp tensor_type_fallback: the type a tensor gets when its row is not a multiple of the block
FALLBACK = {
    **dict.fromkeys(("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_XS"), "IQ4_NL"),
    **dict.fromkeys(("Q2_K", "Q3_K", "TQ1_0", "TQ2_0"), "Q4_0"),
    "Q4_K": "Q5_0",
    "Q5_K": "Q5_1",
    "Q6_K": "Q8_0",
}


EMBEDDINGS = ("token_embd.weight", "output.weight")


def _type_for_row(main: str, row: int) -> str:
    """The ggml type llama-quantize gives a tensor of this row length when the file's type is `main`."""
    for candidate in (main, FALLBACK.get(main, main)):
        _, block, _ = GGML_TYPES[type_id(candidate)]
        if row % block == 0:
            return candidate
    return "F16"


def _bytes(ggml_type: str, n_elements: int) -> int:
    _, block, size = GGML_TYPES[type_id(ggml_type)]
    return n_elements // block * size


def requantized_bytes(header: GGUFHeader, name: str) -> int:
    """Tensor bytes of this model quantized as `name` (a llama-quantize type such as IQ3_M)."""
    target = quant_type(name)
    current = quant_for_file_type(header.metadata.get("general.file_type"))
    n_params = sum(t.n_elements for t in header.tensors)
    if current is None:
        return estimate_file_bytes(n_params, name)
    total = 0
    for t in header.tensors:
        if len(t.shape) < 2 or t.type_name == "F32":
            total += t.n_bytes or 0  # norms and biases stay F32
        elif t.name in EMBEDDINGS:
            # llama.cpp gives these a type of their own (Q6_K for the output in most mixes): a quantized one
            # keeps its size, an unquantized one gets Q6_K
            unquantized = t.type_name in ("F16", "BF16")
            total += (
                _bytes(_type_for_row("Q6_K", t.shape[0]), t.n_elements) if unquantized else t.n_bytes or 0
            )
        else:  # every layer tensor, the mixes' larger ones too
            total += _bytes(_type_for_row(target.main_type, t.shape[0]), t.n_elements)
    return total
