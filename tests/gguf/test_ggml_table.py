"""edgepilot's copies of the ggml type sizes and llama file types agree with llama.cpp's own Python package
(`gguf`, in the test extra): the copies exist so that reading a header does not import gguf and numpy."""

from __future__ import annotations

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, LlamaFileType

from edgepilot.gguf.ggml_types import F16, F32, GGML_TYPES
from edgepilot.gguf.quant_types import LLAMA_FILE_TYPES


def test_ggml_types_match_the_gguf_package():
    theirs = {int(t): (t.name, block, size) for t, (block, size) in GGML_QUANT_SIZES.items()}
    missing = {tid: entry for tid, entry in theirs.items() if tid not in GGML_TYPES}
    assert not missing, f"ggml types the gguf package knows and ggml_types.GGML_TYPES lacks: {missing}"
    wrong = {tid: (GGML_TYPES[tid], theirs[tid]) for tid in theirs if GGML_TYPES[tid] != theirs[tid]}
    assert not wrong, f"(ours, gguf's): {wrong}"
    assert set(GGML_TYPES) == set(theirs), "ggml_types.GGML_TYPES has ids the gguf package does not know"
    assert (int(GGMLQuantizationType.F32), int(GGMLQuantizationType.F16)) == (F32, F16)


def test_llama_file_types_match_the_gguf_package():
    assert {int(f): f.name for f in LlamaFileType} == LLAMA_FILE_TYPES
