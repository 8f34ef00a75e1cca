"""The buffer sizes llama.cpp logs when it loads a model: the truth of its arithmetic, for that version.

    load_tensors:   CPU_Mapped model buffer size =    92.10 MiB
    load_tensors:   CPU_REPACK model buffer size =    12.66 MiB
    llama_context:        CPU  output buffer size =     0.19 MiB
    llama_kv_cache:        CPU KV buffer size =    22.50 MiB
    sched_reserve:        CPU compute buffer size =    27.51 MiB
(the same words in the pinned llama.cpp and in later ones; newer llama-servers print them at -lv 4 only)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

MIB = 1 << 20
# (?<!\S): the backend name starts a word, so one long word is not rescanned from each of its characters
BUFFER = re.compile(r"(?<!\S)(\S+)\s+(model|KV|compute|output) buffer size\s*=\s*([\d.]+)\s*MiB")


@dataclass
class LoggedBuffers:
    weights_bytes: int = 0  # CPU_Mapped (mmap) or CPU (read) model buffers
    repack_bytes: int = 0
    kv_bytes: int = 0
    compute_bytes: int = 0
    output_bytes: int = 0
    lines: int = 0  # how many buffer lines were read (0: the log said nothing, e.g. too low a verbosity)


def logged_buffers(log: Iterable[str]) -> LoggedBuffers:
    out = LoggedBuffers()
    for line in log:
        m = BUFFER.search(line)
        if not m:
            continue
        backend, kind, size = m.group(1), m.group(2), int(float(m.group(3)) * MIB)
        out.lines += 1
        if kind == "model":
            if backend.endswith("REPACK"):
                out.repack_bytes += size
            else:
                out.weights_bytes += size
        elif kind == "KV":
            out.kv_bytes += size
        elif kind == "compute":
            out.compute_bytes += size
        else:
            out.output_bytes += size
    return out
