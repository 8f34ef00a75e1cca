"""Figures that read true: what a run touches of the compute buffer is never more than llama.cpp reserves.

The excess a run's graphs cost beyond the reserve is the CPU backend's own work buffer (the attention scores
converted to f16 for the product with V), outside the compute buffer; fit shows it on its own row, and the
reserved total, which is no part of the peak, apart from the table.
"""

from __future__ import annotations

import os
import re

import pytest
from click.testing import CliRunner

from edgepilot.cli import app
from edgepilot.gguf.arch import arch_params
from edgepilot.gguf.gguf_header import read_header
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
