"""A smaller quantization sized as llama-quantize writes it: SmolLM2's 576-wide rows fall back to 32-block
types, which the bits-per-weight table alone misses by a third. Checked against a file quantized for real."""

from __future__ import annotations

import pytest

from edgepilot.gguf.quant_types import estimate_file_bytes
from edgepilot.gguf.requant_size import requantized_bytes
from edgepilot.gguf.verdict import header_of


def test_requantized_size_matches_a_real_quantization(smollm_path, tmp_path):
    from edgepilot.store.quantize import quantize_model

    made = quantize_model(str(smollm_path), ["IQ3_M", "Q4_0"], out_dir=str(tmp_path))
    source = header_of(smollm_path)
    n_params = sum(t.n_elements for t in source.tensors)
    for variant in made.variants:
        real = sum(t.n_bytes or 0 for t in header_of(variant.path).tensors)
        assert requantized_bytes(source, variant.type) == pytest.approx(real, rel=0.05), variant.type
    iq3 = next(v for v in made.variants if v.type == "IQ3_M")
    real = sum(t.n_bytes or 0 for t in header_of(iq3.path).tensors)
    assert estimate_file_bytes(n_params, "IQ3_M") < 0.75 * real  # why the table alone is not enough
