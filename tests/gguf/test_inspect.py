"""`edgepilot inspect` on the two real models and on damaged copies."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from edgepilot.cli import app
from edgepilot.gguf.inspect import inspect_model


def test_gemma_facts(gemma_path):
    info = inspect_model(gemma_path)
    assert info.architecture == "gemma3"
    assert info.file_type == "Q4_K_M"
    assert info.n_params == 268_098_176
    assert info.context_length == 32768
    assert info.block_count == 18 and info.head_count == 4 and info.head_count_kv == 1
    assert info.sliding_window == 512
    assert info.vocab_size == 262144
    assert not info.has_chat_template
    assert info.quant_mix[0].ggml_type == "Q8_0"  # the tied 262k-row embedding dominates the file
    assert 7.0 < info.bits_per_weight < 7.6
    assert info.validation.ok


def test_smollm2_facts(smollm_path):
    info = inspect_model(smollm_path)
    assert info.architecture == "llama"
    assert info.file_type == "Q4_1"
    assert 134_000_000 < info.n_params < 136_000_000
    assert info.context_length == 8192
    assert info.head_count == 9 and info.head_count_kv == 3 and info.block_count == 30
    assert info.vocab_size == 49152
    assert info.has_chat_template
    assert info.validation.ok


def test_cli_json(smollm_path):
    res = CliRunner().invoke(app, ["inspect", str(smollm_path), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["architecture"] == "llama" and data["validation"]["ok"] is True
    assert {q["ggml_type"] for q in data["quant_mix"]} >= {"Q4_1", "F32"}


def test_truncated_download_is_a_verdict_not_a_traceback(smollm_path, tmp_path):
    broken = tmp_path / "broken.gguf"
    with smollm_path.open("rb") as src, broken.open("wb") as dst:
        dst.write(src.read(smollm_path.stat().st_size // 2))
    res = CliRunner().invoke(app, ["inspect", str(broken)])
    assert res.exit_code == 1
    assert "not within the file bounds" in res.stdout or "truncated" in res.stdout
    assert "Traceback" not in res.output


def test_sha256_mismatch(smollm_path, tmp_path):
    copy = tmp_path / "m.gguf"
    shutil.copyfile(smollm_path, copy)
    res = CliRunner().invoke(app, ["inspect", str(copy), "--sha256", "0" * 64, "--json"])
    assert res.exit_code == 1
    codes = [p["code"] for p in json.loads(res.stdout)["validation"]["problems"]]
    assert "sha256-mismatch" in codes


def test_bad_sha256_argument(smollm_path):
    res = CliRunner().invoke(app, ["inspect", str(smollm_path), "--sha256", "xyz"])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
