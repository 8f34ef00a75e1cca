"""The memory read bandwidth: measured against a known figure here, sized by the cache and the free memory,
kept per device so probe shows it without measuring, and the roofline's bytes per token."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import edgepilot
from edgepilot.device.bandwidth import (
    MAX_BUFFER,
    Bandwidth,
    buffer_size,
    last_level_cache,
    measure_read_bandwidth,
    thread_counts,
)
from edgepilot.errors import UserError
from edgepilot.plan.roofline import kv_bytes_per_cell, read_per_token

MIB = 1 << 20
SRC = str(Path(edgepilot.__file__).resolve().parent.parent)


def _best_of(kernel, threads: int, src: np.ndarray, passes: int = 8) -> float:
    """Seconds of the best of `passes`, `threads` threads running `kernel` on a slice each."""
    # timed from a common start, as ours is: a thread's start-up (~0.1 ms each) is a tenth of a pass over a
    # 64 MiB buffer at 30 GB/s, so counting it here made ours look 10-18 % faster than the reference
    bounds = [(k * src.size // threads, (k + 1) * src.size // threads) for k in range(threads)]
    best = float("inf")
    for _ in range(passes):
        barrier = threading.Barrier(threads + 1)

        def run(part, barrier=barrier) -> None:
            barrier.wait()
            kernel(part)

        pool = [threading.Thread(target=run, args=(src[a:b],)) for a, b in bounds]
        for t in pool:
            t.start()
        barrier.wait()
        t0 = time.perf_counter()
        for t in pool:
            t.join()
        best = min(best, time.perf_counter() - t0)
    return best


def _numpy_sum(threads: int, size: int) -> float:
    """A plain numpy read benchmark of another kind than ours: an integer sum, bytes read per second."""
    src = np.ones(size // 8, dtype=np.int64)
    return src.nbytes / _best_of(np.add.reduce, threads, src)


def _numpy_copy(threads: int, size: int) -> tuple[float, float]:
    """A plain numpy copy benchmark: (bytes copied per second, STREAM's Copy count: read + written)."""
    src = np.ones(size // 8)
    dst = np.zeros_like(src)
    seconds = _best_of(lambda part: np.copyto(dst[: part.size], part), threads, src)
    return src.nbytes / seconds, 2 * src.nbytes / seconds


def _median_ratios(rounds: int = 7) -> tuple[float, float, float, Bandwidth]:
    """Alongside: each measurement is followed by the references at the same thread counts and buffer size;
    the medians of the rounds' ratios (one pair can be off by 2x either way on a shared machine)."""
    to_sum, to_read_half, to_stream = [], [], []
    for _ in range(rounds):
        bw = measure_read_bandwidth()
        to_sum.append(bw.bytes_per_s / max(_numpy_sum(t, bw.buffer_bytes) for t in bw.by_threads))
        copies = [_numpy_copy(t, bw.buffer_bytes) for t in bw.by_threads]
        to_read_half.append(bw.bytes_per_s / max(c[0] for c in copies))
        to_stream.append(bw.bytes_per_s / max(c[1] for c in copies))
    med = statistics.median
    return med(to_sum), med(to_read_half), med(to_stream), bw


def test_the_read_bandwidth_is_within_15_percent_of_a_numpy_read_and_inside_a_copys_bounds_here():
    # Two known figures measured alongside. A numpy integer sum reads as a token does: ours must be within
    # 15 % of it. A numpy copy reads and writes: reading alone is at least the copy's read stream and at most
    # STREAM's count of it (read + written), with 15 % either way. Which end it is near depends on the CPU:
    # on an AMD EPYC here reading matched STREAM's count, on an Intel Xeon here (whose large copies write
    # around the cache) 0.63 of it. This VM's memory reads 32 or 49 GB/s for seconds at a time and other jobs
    # share its two cores, so one of three spells must agree. A wrong kernel or count (half the bytes, a
    # cached buffer) is off by far more, every time.
    spells = []
    for _ in range(3):
        to_sum, to_read_half, to_stream, bw = _median_ratios()
        spells.append((round(to_sum, 3), round(to_read_half, 3), round(to_stream, 3)))
        if to_sum == pytest.approx(1.0, rel=0.15) and to_read_half >= 0.85 and to_stream <= 1.15:
            break
    to_sum, to_read_half, to_stream = spells[-1]
    assert to_sum == pytest.approx(1.0, rel=0.15), spells
    assert to_read_half >= 0.85 and to_stream <= 1.15, spells
    assert bw.method == "read" and bw.passes >= 2 * len(bw.by_threads)
    assert set(bw.by_threads) == set(thread_counts(len(os.sched_getaffinity(0))))
    # Memory is timed, not the cache: 4x the last-level cache, up to the cap. This VM lists a 480 MiB L3 that
    # it does not have (512 MiB and 2 GiB read alike here), so the cap is what it gets.
    assert bw.buffer_bytes >= min(4 * (last_level_cache() or 0), MAX_BUFFER)
    assert "reading" in bw.how() and "last-level cache" in bw.how()


def _cache_tree(root: Path, sizes: dict[str, tuple[int, str, str]]) -> Path:
    for index, (level, size, kind) in sizes.items():
        d = root / "sys/devices/system/cpu/cpu0/cache" / index
        d.mkdir(parents=True)
        (d / "level").write_text(f"{level}\n")
        (d / "size").write_text(f"{size}\n")
        (d / "type").write_text(f"{kind}\n")
    return root


def test_the_buffer_is_several_times_the_last_level_cache_within_the_free_memory(tmp_path):
    root = _cache_tree(
        tmp_path,
        {"index0": (1, "64K", "Data"), "index1": (2, "2048K", "Unified"), "index2": (3, "32M", "Unified")},
    )
    assert last_level_cache(root) == 32 * MIB
    assert last_level_cache(tmp_path / "none") is None
    assert buffer_size(32 * MIB, 20_000 * MIB) == 128 * MIB
    assert buffer_size(None, 20_000 * MIB) == 64 * MIB  # not listed (phones): at least 64 MiB
    assert buffer_size(1024 * MIB, 20_000 * MIB) == 512 * MIB
    assert buffer_size(32 * MIB, 400 * MIB) == 50 * MIB  # an eighth of what is available
    with pytest.raises(UserError, match="not measuring memory bandwidth: 100 MiB available"):
        buffer_size(32 * MIB, 100 * MIB)


def test_kv_bytes_per_cell_from_the_models_shapes(gemma_path, smollm_path):
    # Gemma 3 270M: 18 layers, 1 KV head of 256; SmolLM2 135M: 30 layers, 3 KV heads of 64; f16 K and V
    assert kv_bytes_per_cell(gemma_path) == 18 * 2 * 256 * 2
    assert kv_bytes_per_cell(smollm_path) == 30 * 2 * 3 * 64 * 2
    assert kv_bytes_per_cell(smollm_path, "q8_0", "q8_0") == 30 * 2 * 3 * 2 * 34  # 64 = 2 blocks of 34 B
    assert read_per_token(1000, 10, 50.5) == 1505 and read_per_token(None, 10, 5) is None


def _edgepilot(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(filter(None, (SRC, os.environ.get("PYTHONPATH"))))
    env = {**os.environ, "PYTHONPATH": path, "EDGEPILOT_DATA_DIR": str(data), "COLUMNS": "50"}
    argv = [sys.executable, "-m", "edgepilot", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)


def test_probe_measures_only_when_asked_and_bench_uses_the_kept_figure(tmp_path, smollm_path, devices):
    data = tmp_path / "data"
    first = json.loads(_edgepilot(data, "probe", "--json", "--no-gpu-check").stdout)["memory_bandwidth"]
    assert first["bytes_per_s"] is None and "probe --bandwidth" in first["why"]
    assert not (data / "memory-bandwidth.json").exists()
    done = _edgepilot(data, "probe", "--json", "--no-gpu-check", "--bandwidth")
    measured = json.loads(done.stdout)["memory_bandwidth"]
    assert measured["bytes_per_s"] > 1e8 and measured["cached"] is False and measured["method"] == "read"
    again = json.loads(_edgepilot(data, "probe", "--json", "--no-gpu-check").stdout)["memory_bandwidth"]
    assert again["cached"] is True and again["bytes_per_s"] == measured["bytes_per_s"]
    assert again["how"] == measured["how"]
    text = _edgepilot(data, "probe", "--no-gpu-check").stdout
    assert f"{measured['gb_per_s']:.1f} GB/s read (kept)" in text
    bench = _edgepilot(data, "bench", str(smollm_path), "-p", "16", "-n", "16", "-r", "1", "--json")
    report = json.loads(bench.stdout)
    assert report["bandwidth_gbs"] == round(measured["bytes_per_s"] / 1e9, 2)
    assert report["bandwidth_how"] == measured["how"] and report["kv_bytes_per_cell"] == 23040
    tg = [r for r in report["rows"] if r["n_gen"]][0]
    read = report["bytes_per_token"] + 23040 * 8  # weights + the KV cache of 8 tokens on average
    assert tg["roofline"] == pytest.approx(tg["avg_ts"] * read / measured["bytes_per_s"], abs=1e-3)
    run = ["run", str(smollm_path), "-p", "1, 2, 3,", "--raw", "--temp", "0", "-n", "16", "--ctx", "512"]
    result = json.loads(_edgepilot(data, *run, "--json").stdout)
    assert result["bandwidth_gbs"] == report["bandwidth_gbs"]
    read = report["bytes_per_token"] + 23040 * (result["n_prompt"] + result["n_gen"] / 2)
    assert result["roofline"] == pytest.approx(result["gen_tps"] * read / measured["bytes_per_s"], abs=2e-3)
    summary = _edgepilot(data, *run).stdout
    assert re.search(r"\bbandwidth \d+% of limit\b", summary), summary  # run's summary line
    tree = _edgepilot(data, "probe", "--bandwidth", "--root", str(devices / "sd8gen2-xiaomi13pro"))
    assert tree.returncode == 2 and tree.stderr.count("\n") == 1 and "--bandwidth" in tree.stderr


def _keep(data: Path, bytes_per_s: float) -> None:
    from edgepilot.tuned.bandwidth_cache import CACHE_NAME, FORMAT, cache_key

    entry = {"bytes_per_s": bytes_per_s, "threads": 1, "buffer_bytes": 64 * MIB, "seconds": 0.1, "passes": 2}
    data.mkdir(parents=True, exist_ok=True)
    (data / CACHE_NAME).write_text(json.dumps({"format": FORMAT, "devices": {cache_key(): entry}}))


def test_measuring_again_keeps_the_best_figure(tmp_path):
    data = tmp_path / "data"
    _keep(data, 5e12)  # higher than this memory (and within a measurement's range): not replaced
    probe = ["probe", "--json", "--no-gpu-check", "--bandwidth"]
    kept = json.loads(_edgepilot(data, *probe).stdout)["memory_bandwidth"]
    assert kept["bytes_per_s"] == 5e12 and kept["cached"] is True and 1e8 < kept["latest_bytes_per_s"] < 5e12
    text = " ".join(_edgepilot(data, "probe", "--no-gpu-check", "--bandwidth").stdout.split())
    assert "5000.0 GB/s read (kept)" in text and "GB/s now: the best is kept" in text
    _keep(data, 1e6)  # lower than any memory: no measurement (left out with a note), measured again
    measured = json.loads(_edgepilot(data, *probe).stdout)["memory_bandwidth"]
    assert (
        measured["bytes_per_s"] > 1e8
        and measured["cached"] is False
        and measured["latest_bytes_per_s"] is None
    )
    again = json.loads(_edgepilot(data, "probe", "--json", "--no-gpu-check").stdout)["memory_bandwidth"]
    assert again["bytes_per_s"] == measured["bytes_per_s"] and again["cached"] is True


def test_tunes_own_summary_does_not_send_the_user_to_tune():
    """issue 31 review: tune's bandwidth line ended with "look at threads and cores (edgepilot tune)"."""
    from edgepilot.plan.roofline import share_words

    for share in (0.1, 0.5):
        assert "edgepilot tune" in share_words(share)
        assert "edgepilot tune" not in share_words(share, tuned=True)
