"""`edgepilot quantize` and `edgepilot compare` on the real SmolLM2 135M (Q4_1), with real llama.cpp.

One session: the shipped model dequantized to an F16 reference, four variants quantized from it, then one
compare of the reference, the variants and a second name of the reference (a hard link) at small sizes
(ctx 256, two chunks of 128 tokens of the shipped text, one thread: this machine's two cores are shared).
"""

from __future__ import annotations

import io
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from edgepilot.cli import app
from edgepilot.gguf.gguf_header import read_header
from edgepilot.gguf.gguf_info import file_type_name
from edgepilot.store.compare import compare_models
from edgepilot.store.quantize import REFERENCE_KEY, quantize_model

TYPES = ["Q8_0", "Q4_K_M", "Q4_0", "Q2_K"]  # most bits first (on SmolLM2's 576-wide rows, see docs/models.md)


@pytest.fixture(scope="session")
def quantized(smollm_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("quantized")
    return quantize_model(str(smollm_path), TYPES, out_dir=str(out), threads=2)


@pytest.fixture(scope="session")
def compared(quantized):
    ref = quantized.reference
    twin = os.path.join(os.path.dirname(ref), "same-values.gguf")
    os.link(ref, twin)  # the reference again under another name: measured in processes of its own
    files = [ref] + [v.path for v in quantized.variants] + [twin]
    return compare_models(files, ctx=256, ppl_ctx=128, max_chunks=2, n_gen=8, threads=1)


def _row(result, name):
    return next(r for r in result.rows if r.name == name)


def test_quantize_makes_each_type_from_an_f16_reference(quantized, smollm_path):
    assert quantized.source_type == "Q4_1"
    assert "Q4_1) dequantized to F16" in quantized.reference_note
    ref = read_header(quantized.reference)
    assert file_type_name(ref.metadata["general.file_type"]) == "F16"
    assert "SmolLM2-135M-Instruct.Q4_1.gguf" in ref.metadata[REFERENCE_KEY]
    for variant, name in zip(quantized.variants, TYPES, strict=True):
        assert variant.path.endswith(f"SmolLM2-135M-Instruct-{name}.gguf")
        assert file_type_name(read_header(variant.path).metadata["general.file_type"]) == name
    sizes = [v.file_bytes for v in quantized.variants]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)
    # SmolLM2's rows (576) are not a multiple of 256: llama.cpp gives most k-quant tensors another type
    assert _variant(quantized, "Q4_K_M").fallback_tensors > 100
    assert _variant(quantized, "Q8_0").fallback_tensors == 0


def _variant(result, name):
    return next(v for v in result.variants if v.type == name)


def test_the_reference_holds_the_shipped_models_values(quantized, smollm_path):
    from gguf.quants import dequantize

    from gguf import GGUFReader

    shipped = {t.name: t for t in GGUFReader(smollm_path).tensors}
    ref = {t.name: t for t in GGUFReader(quantized.reference).tensors}
    for name in ("blk.0.attn_q.weight",):
        original = dequantize(shipped[name].data, shipped[name].tensor_type).astype(np.float32)
        as_f16 = np.asarray(ref[name].data, dtype=np.float16).astype(np.float32).reshape(original.shape)
        # F16 rounding only: at most half a unit in the last place (2^-11 relative; subnormals absolute)
        np.testing.assert_allclose(as_f16, original, rtol=2**-11, atol=2**-24)


def test_compare_kl_of_the_reference_against_itself_is_zero(compared, quantized):
    ref = _row(compared, os.path.basename(quantized.reference))
    twin = _row(compared, "same-values.gguf")
    assert ref.reference and not twin.reference
    assert "dequantized to F16" in compared.reference_note
    assert ref.kl_mean == 0.0 and twin.kl_mean == 0.0 and twin.kl_max == 0.0
    assert twin.same_top == 1.0
    assert twin.perplexity == ref.perplexity  # a separate process, bit for bit the same logits
    assert compared.n_scored == 2 * (128 - 64 - 1)


def test_compare_quality_falls_as_bits_shrink(compared, quantized):
    ref = _row(compared, os.path.basename(quantized.reference))
    rows = [_row(compared, os.path.basename(v.path)) for v in quantized.variants]
    bits = [r.bits_per_weight for r in rows]
    assert bits == sorted(bits, reverse=True) and ref.bits_per_weight > 15.9  # 1-D norms stay F32
    ppl = [r.perplexity for r in rows]
    kl = [r.kl_mean for r in rows]
    assert ppl == sorted(ppl) and len(set(ppl)) == len(ppl), ppl
    assert kl == sorted(kl) and kl[0] > 0, kl
    # Q8_0 is within noise of the reference (either side); every other variant is clearly worse
    assert abs(ppl[0] - ref.perplexity) / ref.perplexity < 0.03
    assert ppl[-1] > ref.perplexity * 1.1
    assert all(0 < r.same_top < 1 for r in rows)


def test_compare_predicted_peaks_are_within_5_percent(compared):
    for r in compared.rows:
        assert r.measured_peak_bytes > 100 * 2**20
        assert abs(r.peak_error) < 0.05, (
            r.name,
            r.predicted_peak_bytes / 2**20,
            r.measured_peak_bytes / 2**20,
        )
        assert r.pp_tps > 0 and r.tg_tps > 0
        assert r.n_prompt >= 256 - 8 - 8 - 4  # the memory run's prompt fills the context (re-tokenized)


def test_compare_table_json_and_png(compared, tmp_path):
    from rich.console import Console

    from edgepilot.cli.quantize_cmd import render_compare
    from edgepilot.jsonable import dumps
    from edgepilot.store.compare_plot import write_png

    out = io.StringIO()
    render_compare(compared, Console(file=out, width=220))
    text = out.getvalue()
    assert "Q2_K" in text and "(ref)" in text and "perplexity" in text and "peak measured" in text
    import json

    data = json.loads(dumps(compared))
    row = data["rows"][0]
    for key in (
        "file_bytes",
        "predicted_peak_bytes",
        "measured_peak_bytes",
        "pp_tps",
        "tg_tps",
        "perplexity",
        "kl_mean",
        "bits_per_weight",
    ):
        assert key in row
    png = tmp_path / "compare.png"
    write_png(compared, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_imatrix_reaches_the_quantizer(quantized, tmp_path):
    """A legacy .dat importance matrix with all-equal weights for every matrix: llama.cpp then weighs each
    value alike instead of by x^2 (and keeps the first ffn_down layers off Q4_0), so the file differs."""
    header = read_header(quantized.reference)
    blob = io.BytesIO()
    mats = [t for t in header.tensors if len(t.shape) == 2 and t.name != "token_embd.weight"]
    blob.write(struct.pack("<i", len(mats)))
    for t in mats:
        name = t.name.encode()
        blob.write(struct.pack("<i", len(name)) + name + struct.pack("<ii", 1, t.shape[0]))
        blob.write(np.ones(t.shape[0], dtype="<f4").tobytes())
    dat = tmp_path / "ones.dat"
    dat.write_bytes(blob.getvalue())
    out = tmp_path / "out"
    out.mkdir()
    res = CliRunner().invoke(
        app,
        ["quantize", quantized.reference, "--to", "Q4_0", "--out", str(out), "--imatrix", str(dat), "--json"],
    )
    assert res.exit_code == 0, res.stderr
    with_imatrix = (out / "SmolLM2-135M-Instruct-Q4_0.gguf").read_bytes()
    without = Path(_variant(quantized, "Q4_0").path).read_bytes()
    assert with_imatrix != without  # other values (and, for Q4_0 with an imatrix, other ffn_down types)


def _one_line_exit_2(args, message):
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert message in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_bad_type_name_lists_the_valid_ones(smollm_path):
    res = CliRunner().invoke(app, ["quantize", str(smollm_path), "--to", "Q4_K_M,Q5_X"])
    assert res.exit_code == 2 and "unknown quantization type Q5_X" in res.stderr
    assert "Q4_K_M" in res.stderr and "IQ4_XS" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_missing_files_and_fifos_are_refused(tmp_path, smollm_path):
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    _one_line_exit_2(["quantize", str(tmp_path / "none.gguf"), "--to", "Q4_0"], "not found")
    _one_line_exit_2(["quantize", str(fifo), "--to", "Q4_0"], "not a regular file")
    _one_line_exit_2(["compare", str(smollm_path), str(tmp_path / "none.gguf")], "not found")
    _one_line_exit_2(["compare", str(fifo)], "not a regular file")
    _one_line_exit_2(["compare", str(smollm_path), "--text", str(fifo)], "not a regular file")
    _one_line_exit_2(
        ["quantize", str(smollm_path), "--to", "Q4_0", "--imatrix", str(fifo)], "not a regular file"
    )
    _one_line_exit_2(["compare", str(smollm_path), "--ppl-ctx", "4"], "--ppl-ctx 4: out of range")


def test_existing_output_is_not_overwritten(quantized, tmp_path):
    target = tmp_path / "SmolLM2-135M-Instruct-Q4_0.gguf"
    target.write_bytes(b"keep me")
    _one_line_exit_2(["quantize", quantized.reference, "--to", "Q4_0", "--out", str(tmp_path)], "--force")
    assert target.read_bytes() == b"keep me"


def test_a_truncated_imatrix_is_refused(smollm_path, tmp_path):
    dat = tmp_path / "cut.dat"
    dat.write_bytes(struct.pack("<i", 3) + struct.pack("<i", 20) + b"blk.0.attn_q")
    _one_line_exit_2(
        ["quantize", str(smollm_path), "--to", "Q4_0", "--out", str(tmp_path), "--imatrix", str(dat)],
        "truncated",
    )
    assert not list(tmp_path.glob("*.gguf"))


def test_quantize_off_a_terminal_says_what_it_does_every_few_seconds(quantized, tmp_path):
    """One quantization is one silent call into llama.cpp: off a terminal the step under way is repeated
    every $EDGEPILOT_PROGRESS_SECONDS (5 by default) with the time so far. Before: nothing between steps."""
    import subprocess
    import sys

    env = {**os.environ, "EDGEPILOT_PROGRESS_SECONDS": "0.02"}
    argv = ["quantize", quantized.reference, "--to", "Q4_0", "--out", str(tmp_path), "--json"]
    done = subprocess.run([sys.executable, "-m", "edgepilot", *argv], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("quantize: ")]
    assert lines, done.stderr
    assert any("[1/1] Q4_0 from " in ln for ln in lines) and all(ln.endswith(" s") for ln in lines), lines
