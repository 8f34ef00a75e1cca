"""`edgepilot compare --engine tools`: quality from llama.cpp's llama-perplexity (its KL-divergence mode),
memory and speed from `edgepilot run --engine tools`. Its output as Debian's 0.7.0 prints it
(samples/SOURCE.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from edgepilot.engine.native_tools import tool_version
from edgepilot.store.compare_tool import parse_base, parse_kl
from nativekit import native_tool

SAMPLES = Path(__file__).resolve().parent / "samples"
runner = CliRunner()


def _sample(kind: str) -> str:
    return "\n".join(
        (SAMPLES / f"llama-perplexity-{kind}-0.7.0-debian.{part}.txt").read_text()
        for part in ("stdout", "stderr")
    )


def test_the_reference_runs_perplexity():
    assert parse_base(_sample("base")) == {"perplexity": 25.207, "ppl_stderr": 5.25863, "chunks": 2}


def test_a_compared_model_against_the_reference():
    got = parse_kl(_sample("kld"))
    assert got == {
        "perplexity": 27.129933,
        "ppl_stderr": 5.8955,
        "kl_mean": 0.054698,
        "kl_max": 0.239012,
        "same_top": pytest.approx(0.8254),
        "chunks": 2,
    }


def test_output_without_the_statistics_is_a_value_error():
    with pytest.raises(ValueError, match="no final estimate"):
        parse_base("perplexity: calculating perplexity over 2 chunks, n_ctx=128")
    with pytest.raises(ValueError, match="mean KL divergence"):
        parse_kl("Mean PPL(Q)                   :  27.129933 ±   5.895500\n")


SIZES = ["--ctx", "256", "--ppl-ctx", "128", "--chunks", "2", "--n-gen", "8", "-t", "1"]


@pytest.fixture(scope="module")
def through_tools(cli_app, smollm_path, tmp_path_factory):
    perplexity = native_tool("llama-perplexity")
    native_tool("llama-quantize")
    native_tool("llama-server")
    out = tmp_path_factory.mktemp("q")
    args = ["quantize", str(smollm_path), "--to", "Q4_0", "--out", str(out), "--engine", "tools", "--json"]
    made = json.loads(runner.invoke(cli_app, args).stdout)
    files = [made["reference"], made["variants"][0]["path"]]
    res = runner.invoke(cli_app, ["compare", *files, *SIZES, "--engine", "tools", "--json"])
    assert res.exit_code == 0, res.output
    return perplexity, files, json.loads(res.stdout)


def test_compare_through_llama_perplexity(through_tools):
    perplexity, _, data = through_tools
    assert data["engine"]["path"] == str(perplexity)
    ref, q4 = data["rows"]
    assert ref["reference"] and ref["kl_mean"] == 0 and ref["same_top"] == 1 and ref["perplexity"] > 1
    assert q4["kl_mean"] > 0 and q4["kl_max"] >= q4["kl_mean"] and 0 < q4["same_top"] <= 1
    assert q4["perplexity"] > ref["perplexity"] * 0.9
    assert data["n_scored"] == 2 * (128 - 1 - 64)
    assert 200 <= ref["n_prompt"] <= 256 - 8 and ref["measured_peak_bytes"] > 50 << 20


def test_llama_perplexity_agrees_with_the_in_process_measurement(cli_app, through_tools):
    """The same llama.cpp scoring the same chunks: the same figures, up to llama-perplexity keeping the
    reference's distributions in 16 bits."""
    perplexity, files, tools = through_tools
    version = tool_version(perplexity)
    if version is None or version.source != "built":
        pytest.skip("llama-perplexity is not the pinned llama.cpp: its figures may differ")
    pytest.importorskip("llama_cpp")
    res = runner.invoke(cli_app, ["compare", *files, *SIZES, "--engine", "inprocess", "--json"])
    assert res.exit_code == 0, res.output
    inproc = json.loads(res.stdout)
    assert (tools["n_scored"], tools["text_tokens"]) == (inproc["n_scored"], inproc["text_tokens"])
    for a, b in zip(tools["rows"], inproc["rows"], strict=True):
        assert a["perplexity"] == pytest.approx(b["perplexity"], rel=0.01)
        assert a["same_top"] == pytest.approx(b["same_top"], abs=0.02)
        assert a["kl_mean"] == pytest.approx(b["kl_mean"], rel=0.1, abs=1e-6)
        assert a["n_prompt"] == b["n_prompt"]


def test_missing_llama_perplexity_names_the_package(cli_app, smollm_path, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPILOT_TOOLS_DIR", str(tmp_path / "no-build"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    res = runner.invoke(cli_app, ["compare", str(smollm_path), "--engine", "tools"])
    assert res.exit_code == 2
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "llama-perplexity" in err[0] and "llama.cpp-tools-extra" in err[0], err
