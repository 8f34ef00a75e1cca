"""Weight memory: mapped file pages or an anonymous copy, plus the CPU_REPACK copies.

llama.cpp (ggml-cpu/repack.cpp) re-lays a weight into the CPU_REPACK buffer when the CPU has the fast path for
its type and its row count fits the layout; only weights used by a matrix multiplication qualify, so the token
embedding (read with get_rows) never does. With mmap the original pages of a repacked tensor are read to make
the copy and stay mapped: resident weights grow by the repacked size (llama.cpp #19578, #16761).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgepilot.model.gguf_records import TensorInfo

# Tensors read with get_rows (an embedding lookup), never multiplied: not repacked.
_LOOKUP_TENSORS = (
    "token_embd.weight",
    "token_embd_norm.weight",
    "position_embd.weight",
    "token_types.weight",
)


@dataclass
class WeightsEstimate:
    tensor_bytes: int  # all tensor data in the file
    repack_bytes: int  # the CPU_REPACK copy
    repacked_tensors: int
    repacked_types: dict[str, int] = field(default_factory=dict)  # ggml type -> bytes repacked

    def resident_bytes(self, use_mmap: bool) -> int:
        """Weight bytes resident at peak, not counting the repack copy itself."""
        if use_mmap:
            return self.tensor_bytes  # every tensor's pages are read, repacked ones included
        return self.tensor_bytes - self.repack_bytes  # without mmap, repacked tensors live only in the copy


def repackable(t: TensorInfo, plan: dict[str, tuple[str, int]]) -> bool:
    if t.type_name is None or t.type_name not in plan or len(t.shape) < 2:
        return False
    if t.name in _LOOKUP_TENSORS:
        return False
    _layout, row_multiple = plan[t.type_name]
    return t.shape[1] % row_multiple == 0


def estimate_weights(tensors: list[TensorInfo], repack_plan: dict[str, tuple[str, int]]) -> WeightsEstimate:
    total = sum(t.n_bytes or 0 for t in tensors)
    repacked: dict[str, int] = {}
    count = 0
    for t in tensors:
        if repackable(t, repack_plan):
            repacked[t.type_name or "?"] = repacked.get(t.type_name or "?", 0) + (t.n_bytes or 0)
            count += 1
    return WeightsEstimate(
        tensor_bytes=total,
        repack_bytes=sum(repacked.values()),
        repacked_tensors=count,
        repacked_types=repacked,
    )
