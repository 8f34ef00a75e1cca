"""`inspect`: read a GGUF's header once (bounded), validate it, summarize it."""

from __future__ import annotations

import os

from edgepilot.gguf.gguf_info import ModelInfo, TensorRecord, summarize
from edgepilot.gguf.gguf_records import SkippedValue
from edgepilot.gguf.verdict import model_verdict


def inspect_model(model: str | os.PathLike[str], sha256: str | None = None) -> ModelInfo:
    """Facts and the validation verdict. A header damaged before any metadata still gets a verdict (the CLI
    exits 1 for it, as for any damage); only a path that is not a GGUF file at all raises UserError."""
    verdict = model_verdict(model, "inspect", sha256=sha256)
    header = verdict.header
    metadata = {
        key: (value.count if isinstance(value, SkippedValue) else value)
        for key, value in header.metadata.items()
    }
    tensors = [
        TensorRecord(t.name, t.type_name or f"type{t.ggml_type}", t.n_elements, t.n_bytes or 0)
        for t in header.tensors
    ]
    info = summarize(verdict.path, header.file_size, metadata, tensors)
    info.validation = verdict.validation
    return info
