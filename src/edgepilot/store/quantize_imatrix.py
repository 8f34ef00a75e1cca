"""An importance matrix (llama-imatrix's output) read with bounds, for llama_model_quantize's params.imatrix.

The two formats llama.cpp reads (common/imatrix-loader.cpp, tools/quantize/quantize.cpp load_imatrix):
- GGUF: per weight `NAME.in_sum2` (F32 sums of squared activations) and `NAME.counts` (F32, one per expert),
  with the keys imatrix.datasets, imatrix.chunk_count and imatrix.chunk_size; the values given to the
  quantizer are in_sum2 / count per expert (1 where the count is 0).
- legacy .dat: int32 n_entries, then per entry int32 name length, the name, int32 ncall, int32 nval and nval
  float32 sums; the values are sums / ncall.
"""

from __future__ import annotations

import ctypes
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgepilot.errors import UserError
from edgepilot.gguf.gguf_header import read_header
from edgepilot.untrusted import failure, open_regular

MAX_IMATRIX_BYTES = 4 << 30  # a 70B model's imatrix is a few hundred MiB
MAX_ENTRIES = 1 << 16
MAX_NAME = 1024
GGML_TYPE_F32 = 0
GGUF_KEYS = ("imatrix.datasets", "imatrix.chunk_count", "imatrix.chunk_size")


@dataclass
class Imatrix:
    path: str
    entries: dict[str, np.ndarray] = field(default_factory=dict)
    array: ctypes.Array | None = None  # llama_model_imatrix_data[], ended by a NULL name; points into entries


def _bad(path: str | os.PathLike[str], why: str) -> UserError:
    return UserError(f"imatrix {path} is not usable: {why}")


def _read_legacy(path: Path, size: int) -> dict[str, np.ndarray]:
    entries: dict[str, np.ndarray] = {}
    with open_regular(path) as f:

        def take(n: int) -> bytes:
            if f.tell() + n > size:
                raise _bad(path, "truncated (an entry runs past the end of the file)")
            return f.read(n)

        (n_entries,) = struct.unpack("<i", take(4))
        if not 1 <= n_entries <= MAX_ENTRIES:
            raise _bad(path, f"{n_entries} entries (expected 1 to {MAX_ENTRIES})")
        for _ in range(n_entries):
            (length,) = struct.unpack("<i", take(4))
            if not 1 <= length <= MAX_NAME:
                raise _bad(path, f"a name of {length} bytes")
            name = take(length).decode("utf-8", errors="replace")
            ncall, nval = struct.unpack("<ii", take(8))
            if nval < 1 or nval * 4 > size:
                raise _bad(path, f"entry {name} claims {nval} values")
            sums = np.frombuffer(take(4 * nval), dtype="<f4").astype(np.float32)
            entries[name] = sums / ncall if ncall > 0 else sums
    return entries


def _read_gguf(path: Path) -> dict[str, np.ndarray]:
    header = read_header(path)
    errors = [p for p in header.problems if p.severity == "error"]
    if errors or not header.complete or header.data_offset is None:
        raise _bad(path, errors[0].message if errors else "the GGUF header is incomplete")
    missing = [k for k in GGUF_KEYS if k not in header.metadata]
    if missing:
        raise _bad(path, f"missing imatrix metadata ({missing[0]})")
    tensors = {t.name: t for t in header.tensors}
    entries: dict[str, np.ndarray] = {}
    with open_regular(path) as f:

        def data(name: str) -> np.ndarray:
            t = tensors[name]
            if t.ggml_type != GGML_TYPE_F32 or t.n_bytes is None:
                raise _bad(path, f"{name} must be F32")
            start = header.data_offset + t.offset
            if start + t.n_bytes > header.file_size:
                raise _bad(path, f"{name} lies past the end of the file")
            f.seek(start)
            return np.frombuffer(f.read(t.n_bytes), dtype="<f4")

        for name in tensors:
            if not name.endswith(".in_sum2"):
                continue
            base = name.removesuffix(".in_sum2")
            if base + ".counts" not in tensors:
                raise _bad(path, f"mismatched sums and counts for {base}")
            sums, counts = data(name), np.rint(data(base + ".counts"))
            if len(counts) < 1 or len(sums) % len(counts):
                raise _bad(path, f"{base}: {len(sums)} sums for {len(counts)} counts")
            per = sums.reshape(len(counts), -1).astype(np.float32)
            values = np.where(counts[:, None] > 0, per / np.maximum(counts[:, None], 1), 1.0)
            entries[base] = values.astype(np.float32).ravel()
    if not entries:
        raise _bad(path, "no .in_sum2 tensors in it")
    return entries


def load_imatrix(file: str) -> Imatrix:
    """read_imatrix, with the array llama_model_quantize takes."""
    from edgepilot.engine.llama_binding import llama_cpp

    result = read_imatrix(file)
    array = (llama_cpp.llama_model_imatrix_data * (len(result.entries) + 1))()
    for slot, (name, values) in zip(array, result.entries.items(), strict=False):
        slot.name = name.encode()
        slot.data = values.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        slot.size = len(values)
    result.array = array
    return result


def read_imatrix(file: str) -> Imatrix:
    """The matrix's entries, read and checked (a UserError saying why when it is not usable)."""
    path = Path(file).expanduser()
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            magic = f.read(4)
    except OSError as exc:
        raise failure(exc, "imatrix file", path) from None
    if size > MAX_IMATRIX_BYTES:
        raise _bad(path, f"{size} bytes is more than any importance matrix ({MAX_IMATRIX_BYTES} at most)")
    if size < 8:
        raise _bad(path, f"the file is {size} bytes long")
    entries = _read_gguf(path) if magic == b"GGUF" else _read_legacy(path, size)
    if any(not np.isfinite(v).all() for v in entries.values()):
        raise _bad(path, "it holds non-finite values")
    return Imatrix(str(path), entries)
