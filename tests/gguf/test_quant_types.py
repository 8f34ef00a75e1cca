"""Bits per weight per llama-quantize type, and size estimates for smaller quants."""

from __future__ import annotations

import pytest

from edgepilot.gguf import ggml_types
from edgepilot.gguf.gguf_header import read_header
from edgepilot.gguf.quant_types import (
    QUANT_TYPES,
    estimate_file_bytes,
    quant_for_file_type,
    quant_type,
    smaller_than,
)


def test_nominal_sizes_come_from_ggml_blocks():
    assert quant_type("Q8_0").nominal_bpw == 8.5
    assert quant_type("q4_0").nominal_bpw == 4.5
    assert quant_type("Q4_K").name == "Q4_K_M" and quant_type("Q4_K_M").nominal_bpw == 4.5
    assert quant_type("Q6_K").nominal_bpw == 6.5625
    assert quant_type("F16").file_bpw == 16


def test_whole_file_bpw_from_quantize_sizes():
    # quantize.cpp: Q4_K_M is 4.58 GiB for Llama-3-8B
    assert quant_type("Q4_K_M").file_bpw == pytest.approx(4.58 * 2**30 * 8 / 8.03e9, rel=1e-3)
    assert quant_type("IQ2_XXS").file_bpw == 2.06
    for q in QUANT_TYPES.values():
        assert q.file_bpw >= q.nominal_bpw - 0.15, q  # mixes never fall much below their main type


def test_order_and_alternatives():
    names = [q.name for q in smaller_than("Q5_K_M")]
    assert set(names[:2]) == {"Q5_K_S", "Q5_0"} and "Q4_K_M" in names and "Q8_0" not in names  # 5.21 GiB both
    assert [q.file_bpw for q in smaller_than("Q8_0")] == sorted(
        (q.file_bpw for q in smaller_than("Q8_0")), reverse=True
    )


def test_estimate_bytes():
    assert estimate_file_bytes(8_030_261_248, "Q8_0") == pytest.approx(7.96 * 2**30, rel=1e-3)
    with pytest.raises(ValueError, match="unknown quantization"):
        estimate_file_bytes(1000, "Q9_X")


def test_file_type_lookup(real_smollm):
    h = read_header(real_smollm)
    q = quant_for_file_type(h.metadata["general.file_type"])
    assert q is not None and q.name == "Q4_1"
    assert quant_for_file_type(None) is None and quant_for_file_type(999) is None


def test_kv_element_sizes():
    got = {t: ggml_types.bytes_per_element(t) for t in ggml_types.KV_CACHE_TYPES}
    assert got == {
        "f32": 4,
        "f16": 2,
        "bf16": 2,
        "q8_0": 34 / 32,
        "q4_0": 18 / 32,
        "q4_1": 20 / 32,
        "iq4_nl": 18 / 32,
        "q5_0": 22 / 32,
        "q5_1": 24 / 32,
    }
