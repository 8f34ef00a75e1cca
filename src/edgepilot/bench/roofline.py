"""The generation speed ceiling: every token reads (about) all the weights once, so t/s <= bandwidth / bytes.

Memory bandwidth is measured with a short streaming copy (numpy, one chunk per thread; numpy releases the
GIL while copying), larger than any phone's caches. A copy moves each byte twice (read + write), which is
what the figure counts. Generation at a small context reads the weights plus a little KV cache, so the bound
is slightly optimistic: a fraction near 1 means more tuning cannot help, well below 1 means threads/cores or
per-token overhead are the limit.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from edgepilot.errors import UserError

COPY_MIB = 64  # source buffer per measurement, split across threads; the destination is as large
REPS = 5


@dataclass
class Bandwidth:
    bytes_per_s: float
    threads: int
    buffer_mib: int
    seconds: float  # time the measurement took

    @property
    def gb_per_s(self) -> float:
        return self.bytes_per_s / 1e9


def measure_bandwidth(threads: int, buffer_mib: int = COPY_MIB, reps: int = REPS) -> Bandwidth:
    """Best of `reps` parallel copies of `buffer_mib` MiB (bytes read + written per second)."""
    import numpy as np

    threads = max(1, threads)
    t_start = time.perf_counter()
    n = (buffer_mib << 20) // 8 // threads * threads
    src = np.ones(n, dtype=np.float64)
    dst = np.empty_like(src)
    bounds = [(k * n // threads, (k + 1) * n // threads) for k in range(threads)]
    chunks = [(src[a:b], dst[a:b]) for a, b in bounds]
    for s, d in chunks:  # touch the pages first: the first copy would measure page faults
        np.copyto(d, s)
    best = float("inf")
    for _ in range(reps):
        barrier = threading.Barrier(threads + 1)

        def work(s, d, barrier=barrier):
            barrier.wait()
            np.copyto(d, s)

        pool = [threading.Thread(target=work, args=c) for c in chunks]
        for t in pool:
            t.start()
        barrier.wait()
        t0 = time.perf_counter()
        for t in pool:
            t.join()
        best = min(best, time.perf_counter() - t0)
    moved = 2 * src.nbytes
    return Bandwidth(moved / best, threads, buffer_mib, time.perf_counter() - t_start)


def bytes_per_token(model_path: Path) -> int | None:
    """Weight bytes one generated token reads: every tensor, except the token embedding table when the model
    has a separate output matrix (then only one embedding row is read per token)."""
    from edgepilot.gguf.verdict import header_of

    try:
        header = header_of(model_path)
    except (UserError, OSError):
        return None
    sizes = {t.name: t.n_bytes for t in header.tensors}
    if not sizes or any(v is None for v in sizes.values()):
        return None
    total = sum(sizes.values())
    if "output.weight" in sizes and "token_embd.weight" in sizes:
        total -= sizes["token_embd.weight"]
    return total


def roofline_fraction(tg_ts: float, bytes_token: int | None, bandwidth: Bandwidth | None) -> float | None:
    if not bytes_token or bandwidth is None or bandwidth.bytes_per_s <= 0 or tg_ts <= 0:
        return None
    return round(tg_ts * bytes_token / bandwidth.bytes_per_s, 3)
