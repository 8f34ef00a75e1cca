"""`inspect`: read a GGUF's header once (bounded), validate it, summarize it."""

from __future__ import annotations

import os

from edgepilot.errors import UserError
from edgepilot.model.gguf_header import read_header
from edgepilot.model.gguf_info import ModelInfo, TensorRecord, summarize
from edgepilot.model.gguf_records import SkippedValue
from edgepilot.model.gguf_validate import validate_gguf
from edgepilot.model.resolve import check_model_path


def inspect_model(model: str | os.PathLike[str], sha256: str | None = None) -> ModelInfo:
    path = check_model_path(model)
    header = read_header(path)
    validation = validate_gguf(path, sha256=sha256, header=header)
    if not header.metadata and not header.tensors:
        first = validation.problems[0].message if validation.problems else "no metadata could be read"
        raise UserError(f"{path} is not a readable GGUF: {first}")
    metadata = {
        key: (value.count if isinstance(value, SkippedValue) else value)
        for key, value in header.metadata.items()
    }
    tensors = [
        TensorRecord(t.name, t.type_name or f"type{t.ggml_type}", t.n_elements, t.n_bytes or 0)
        for t in header.tensors
    ]
    info = summarize(path, header.file_size, metadata, tensors)
    info.validation = validation
    return info
