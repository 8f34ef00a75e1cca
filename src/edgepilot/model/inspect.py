"""`inspect`: read a GGUF's header and summarize it."""

from __future__ import annotations

import os

import gguf

from edgepilot.errors import UserError
from edgepilot.model.gguf_info import ModelInfo, TensorRecord, ggml_type_name, summarize
from edgepilot.model.resolve import check_model_path


def inspect_model(model: str | os.PathLike[str], sha256: str | None = None) -> ModelInfo:
    path = check_model_path(model)
    try:
        reader = gguf.GGUFReader(path)
    except Exception as exc:  # the gguf package raises bare ValueErrors/numpy errors on bad files
        raise UserError(f"{path} is not a readable GGUF: {exc}") from None
    metadata = {}
    for key, fld in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        if fld.types and fld.types[0] == gguf.GGUFValueType.ARRAY and len(fld.data) > 64:
            metadata[key] = len(fld.data)
        else:
            metadata[key] = fld.contents()
    tensors = [
        TensorRecord(t.name, ggml_type_name(int(t.tensor_type)), int(t.n_elements), int(t.n_bytes))
        for t in reader.tensors
    ]
    return summarize(path, path.stat().st_size, metadata, tensors)
