"""`edgepilot quantize --engine tools`: llama.cpp's llama-quantize makes the reference and the variants, for
real, from SmolLM2 135M; the same files as the in-process quantizer when both are the pinned llama.cpp."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from edgepilot.engine.native_tools import tool_version
from edgepilot.gguf.gguf_header import read_header
from edgepilot.gguf.gguf_info import file_type_name
from edgepilot.store.quantize import REFERENCE_KEY, quantize_model

runner = CliRunner()


def _sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def quantized(cli_app, smollm_path, llama_quantize_tool, tmp_path_factory):
    out = tmp_path_factory.mktemp("tools-quantized")
    args = ["quantize", str(smollm_path), "--to", "Q8_0,q4_0", "--out", str(out), "-t", "2"]
    res = runner.invoke(cli_app, [*args, "--engine", "tools", "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_reference_and_variants_through_llama_quantize(quantized, llama_quantize_tool):
    assert quantized["engine"]["kind"] == "tools" and quantized["engine"]["path"] == str(llama_quantize_tool)
    assert quantized["engine"]["version"]  # llama-quantize has no --version: a program beside it says it
    assert quantized["source_type"] == "Q4_1" and "dequantized to F16" in quantized["reference_note"]
    ref = read_header(quantized["reference"])
    assert file_type_name(ref.metadata["general.file_type"]) == "F16"
    assert "dequantized to F16" in ref.metadata[REFERENCE_KEY]  # --override-kv made it into the file
    assert [v["type"] for v in quantized["variants"]] == ["Q8_0", "Q4_0"]
    for v in quantized["variants"]:
        assert file_type_name(read_header(v["path"]).metadata["general.file_type"]) == v["type"]
        assert v["file_bytes"] == Path(v["path"]).stat().st_size and 4 < v["bits_per_weight"] < 9
        assert not Path(v["path"] + ".part").exists()


def test_the_same_bytes_as_the_in_process_quantizer(quantized, llama_quantize_tool, tmp_path):
    """llama-quantize is a CLI over llama_model_quantize: from the same llama.cpp, the same file."""
    version = tool_version(llama_quantize_tool) or tool_version(llama_quantize_tool.parent / "llama-bench")
    if version is None or version.source != "built":
        pytest.skip("llama-quantize is not the pinned llama.cpp (`edgepilot build`): other bytes are allowed")
    pytest.importorskip("llama_cpp")
    variant = next(v for v in quantized["variants"] if v["type"] == "Q4_0")
    inprocess = quantize_model(quantized["reference"], ["Q4_0"], str(tmp_path), threads=2, engine="inprocess")
    assert _sha256(inprocess.variants[0].path) == _sha256(variant["path"])


def _ones_imatrix(reference: str, path: Path) -> Path:
    """A legacy .dat importance matrix with all-equal weights for every matrix (as tests/store builds it)."""
    mats = [t for t in read_header(reference).tensors if len(t.shape) == 2 and t.name != "token_embd.weight"]
    blob = struct.pack("<i", len(mats))
    for t in mats:
        name = t.name.encode()
        blob += struct.pack("<i", len(name)) + name + struct.pack("<ii", 1, t.shape[0])
        blob += np.ones(t.shape[0], dtype="<f4").tobytes()
    path.write_bytes(blob)
    return path


def test_imatrix_reaches_llama_quantize(cli_app, quantized, tmp_path):
    dat = _ones_imatrix(quantized["reference"], tmp_path / "ones.dat")
    args = ["quantize", quantized["reference"], "--to", "Q4_0", "--out", str(tmp_path), "--imatrix", str(dat)]
    res = runner.invoke(cli_app, [*args, "--engine", "tools", "--json"])
    assert res.exit_code == 0, res.output
    with_imatrix = json.loads(res.stdout)
    assert with_imatrix["imatrix"] == str(dat) and with_imatrix["reference"] is None  # F16: its own reference
    plain = next(v for v in quantized["variants"] if v["type"] == "Q4_0")
    assert _sha256(with_imatrix["variants"][0]["path"]) != _sha256(plain["path"])


def test_types_are_the_installed_quantizers(cli_app, smollm_path, llama_quantize_tool, tmp_path):
    res = runner.invoke(
        cli_app, ["quantize", str(smollm_path), "--to", "Q9_K", "--out", str(tmp_path), "--engine", "tools"]
    )
    assert res.exit_code == 2
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "unknown quantization type Q9_K" in err[0] and "Q4_K_M" in err[0]
    assert "COPY" not in err[0]


def test_missing_llama_quantize_names_the_package(cli_app, smollm_path, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPILOT_TOOLS_DIR", str(tmp_path / "no-build"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    res = runner.invoke(cli_app, ["quantize", str(smollm_path), "--to", "Q4_0", "--engine", "tools"])
    assert res.exit_code == 2
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "llama-quantize" in err[0] and "pkg install llama-cpp" in err[0]


def test_llama_quantize_never_replaces_its_source(cli_app, quantized, llama_quantize_tool, tmp_path):
    """--force with the output named like the source (the F16 reference, --to F16): refused before
    llama-quantize starts, the source's bytes intact."""
    reference = Path(quantized["reference"])
    before = _sha256(reference)
    args = ["quantize", str(reference), "--to", "F16", "--force", "--engine", "tools"]
    res = runner.invoke(cli_app, args)
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.output
    assert "would replace the source model" in res.stderr
    assert _sha256(reference) == before


def test_llama_quantize_does_not_write_through_a_stale_part_link(cli_app, quantized, tmp_path):
    victim = tmp_path / "elsewhere.bin"
    victim.write_bytes(b"precious bytes")
    out = tmp_path / "out"
    out.mkdir()
    (out / "SmolLM2-135M-Instruct-Q4_0.gguf.part").symlink_to(victim)
    args = ["quantize", quantized["reference"], "--to", "Q4_0", "--out", str(out), "-t", "2"]
    res = runner.invoke(cli_app, [*args, "--engine", "tools", "--json"])
    assert res.exit_code == 0, res.output
    assert victim.read_bytes() == b"precious bytes"
    made = out / "SmolLM2-135M-Instruct-Q4_0.gguf"
    assert file_type_name(read_header(made).metadata["general.file_type"]) == "Q4_0"
    assert sorted(p.name for p in out.iterdir()) == [made.name, made.name + ".part"]
