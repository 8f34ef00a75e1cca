"""Figures that read true: what a run touches of the compute buffer is never more than llama.cpp reserves.

The excess a run's graphs cost beyond the reserve is the CPU backend's own work buffer (the attention scores
converted to f16 for the product with V), outside the compute buffer; fit shows it on its own row, and the
reserved total, which is no part of the peak, apart from the table.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from edgepilot.cli import app
from edgepilot.gguf.arch import arch_params
from edgepilot.gguf.gguf_header import read_header
from edgepilot.plan.compute import compute_buffer
from edgepilot.plan.context_limits import padded_ctx
from edgepilot.plan.memory_model import predict
from edgepilot.plan.settings import EngineSettings

MIB = 1 << 20
GRID = [
    (ctx, ub, fa) for ctx in (512, 2048, 4096, 16384, 32768) for ub in (32, 128, 512) for fa in (False, True)
]


@pytest.mark.parametrize("model", ["smollm", "gemma"])
def test_a_run_touches_at_most_what_is_reserved(model, smollm_path, gemma_path):
    """Before: SmolLM2 at ctx 4096 without flash attention "touched" 119.1 of 98.2 MiB reserved."""
    path = smollm_path if model == "smollm" else gemma_path
    header = read_header(path)
    arch = arch_params(header.metadata)
    n_head = max(arch.n_head)
    for ctx, ub, fa in GRID:
        s = EngineSettings(n_ctx=ctx, n_ubatch=ub, flash_attn=fa, n_threads=2)
        p = predict(header, arch, s, {})
        c, m = p.compute, p.memory
        assert m.compute_touched_bytes <= m.compute_reserved_bytes, (ctx, ub, fa)
        assert m.compute_work_bytes == c.work_bytes > 0
        if not fa:  # the scores, T x n_kv x n_head, as f16
            assert c.work_bytes == min(ub, ctx) * p.kv.cells_full * n_head * 2, (ctx, ub)
    # an f32 V cache is multiplied as it is: no converted copy
    f32 = predict(header, arch, EngineSettings(n_ctx=4096, type_k="f32", type_v="f32", n_threads=2), {})
    assert f32.compute.work_bytes == 0


def _fit_table(smollm_path, *args: str) -> str:
    env = {**os.environ, "COLUMNS": "50"}
    res = CliRunner().invoke(app, ["fit", str(smollm_path), "--budget", "4GiB", *args], env=env)
    assert res.exit_code == 0, res.output
    return res.stdout


def _row(text: str, label: str) -> tuple[float, str]:
    """(MiB, the note's first line) of a table row."""
    line = next(ln for ln in text.splitlines() if ln.startswith(f"│ {label} "))
    cells = [c.strip() for c in line.strip("│").split("│")]
    return float(cells[1]), cells[2]


def test_fit_at_50_columns_reads_without_contradictions(smollm_path):
    """Before, at ctx 4096 without flash attention: "compute (touched) 119.1 | of 98.2 MiB reserved", and a
    "reserved 280.5" row under "peak (RSS) 373.7"."""
    text = _fit_table(smollm_path, "--ctx", "4096", "--no-flash-attn")
    for line in text.splitlines():  # only a single token (the model's long path) may be wider
        assert len(line) <= 50 or " " not in line.strip().removesuffix("\\").strip(), line
    touched, note = _row(text, "compute (touched)")
    reserved = float(re.search(r"of ([\d.]+) MiB", note).group(1))
    assert touched <= reserved
    work, _ = _row(text, "CPU work buffer")
    assert work == pytest.approx(4096 * 512 * 9 * 2 / MIB, abs=0.05)
    rows = [ln for ln in text.splitlines() if ln.startswith("│ ") and not ln.startswith("│   ")]
    assert rows[-1].startswith("│ peak (RSS) ") and not any(r.startswith("│ reserved ") for r in rows)
    peak, _ = _row(text, "peak (RSS)")
    parts = ("weights", "repacked weights", "KV cache", "compute (touched)", "CPU work buffer", "output")
    assert sum(_row(text, p)[0] for p in (*parts, "runtime")) == pytest.approx(peak, abs=0.3)
    after = text[text.index("└") :]
    assert "reserved by llama.cpp: 280.5 MiB" in " ".join(after.split())
    assert "the peak holds only the pages a run touches" in " ".join(after.split())


# A child process (a clean address space, not pytest's) loads the model, runs a prompt of N tokens and lists
# the anonymous mappings the run created or grew: [size, resident bytes].
_RUN = """
import json, re, sys
from pathlib import Path
from edgepilot.engine.inprocess import LlamaEngine
from edgepilot.plan.settings import EngineSettings

def anon():
    out, cur = {}, None
    with open("/proc/self/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split()
                cur = parts[0] if len(parts) < 6 else None
                if cur:
                    out[cur] = [0, 0]
            elif cur and line.startswith(("Size:", "Rss:")):
                out[cur][line.startswith("Rss:")] = int(line.split()[1]) * 1024
    return out

path, ctx, ub, n = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
s = EngineSettings(n_ctx=ctx, n_ubatch=ub, flash_attn=False, n_threads=2)
with LlamaEngine(path, s) as engine:
    before = anon()
    engine.generate(engine.tokenize("hello world " * ctx)[:n], 1)
    print(json.dumps([v for k, v in anon().items() if before.get(k) != v]))
"""


MERGED_NEIGHBOUR = 4 * MIB


@pytest.mark.parametrize("ctx, ubatch", [(1024, 512), (1024, 128)])
def test_the_work_buffer_is_a_real_runs_own_mapping_of_the_predicted_size(smollm_path, ctx, ubatch):
    """Why touched > reserved could read true: a real run's CPU backend allocates, outside the compute
    buffer, one work buffer of the largest chunk's scores as f16, all of it resident. The planner's formula
    for each chunk of a context-filling prompt (n_kv = the cells used so far, padded) gives its size."""
    n = ctx - 8  # room for the one token generated
    # a fixed mmap threshold: glibc's grows after a large free, and the buffer would come from the heap
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "MALLOC_MMAP_THRESHOLD_": "131072"}
    done = subprocess.run(
        [sys.executable, "-c", _RUN, str(smollm_path), str(ctx), str(ubatch), str(n)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    mappings = json.loads(done.stdout.splitlines()[-1])
    arch = arch_params(read_header(smollm_path).metadata)
    chunks = [(min(ubatch, n - start), padded_ctx(min(start + ubatch, n))) for start in range(0, n, ubatch)]
    work = max(compute_buffer(arch, ctx, t, False, kv, kv).work_bytes for t, kv in chunks)
    assert work == max(t * kv for t, kv in chunks) * 9 * 2
    # its own mapping (malloc adds a page for its header), or one the kernel merged with an adjacent anonymous
    # neighbour of the same flags (seen on a loaded machine: 2.25 MiB inside a 3.25 MiB mapping): either way
    # every page of it resident
    match = [m for m in mappings if work <= m[0] <= work + MERGED_NEIGHBOUR and m[1] >= work]
    assert match, (work / MIB, [(a / MIB, b / MIB) for a, b in mappings[:8]])
