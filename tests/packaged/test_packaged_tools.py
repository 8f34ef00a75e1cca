"""bench, tune, quantize and compare with Debian sid's llama.cpp 0.7.x and no llama-cpp-python: llama-bench,
llama-quantize and llama-perplexity of another version than the pinned one (its flags and its output),
chosen by `auto`."""

from __future__ import annotations

import json

import pytest
import sidlane as lane

SHORT = ["-p", "16", "-n", "4", "-r", "1"]


def edgepilot(root, *args):
    done = lane.run(root, ["edgepilot", *args])
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_bench_through_debians_llama_bench(sid_root):
    model = lane.model_in_root(sid_root, "smollm")
    data = edgepilot(sid_root, "bench", model, *SHORT, "-t", "1,2", "--json")
    assert data["engine"]["kind"] == "tools" and data["engine"]["path"] == "/usr/bin/llama-bench"
    assert data["engine"]["version"].startswith("0.7") and data["build"]["build_commit"] == "Debian"
    rows = data["rows"]
    assert [(r["test"], r["n_threads"]) for r in rows] == [("pp16", 1), ("tg4", 1), ("pp16", 2), ("tg4", 2)]
    assert all(r["avg_ts"] > 0 and len(r["samples_ts"]) == 1 and r["flash_attn"] is False for r in rows)
    assert data["run_id"] >= 1 and data["db_path"].endswith("/bench.sqlite")


def test_tune_through_debians_llama_bench(sid_root):
    model = lane.model_in_root(sid_root, "smollm")
    data = edgepilot(sid_root, "tune", model, *SHORT, "--no-save", "--json")
    assert data["engine"]["path"] == "/usr/bin/llama-bench"
    assert data["gen"]["tg_ts"] > 0 and data["prompt"]["pp_ts"] > 0 and data["profile_path"] is None


@pytest.fixture(scope="module")
def quantized(sid_root):
    model = lane.model_in_root(sid_root, "smollm")
    out = "/tmp/edgepilot-quantized"
    lane.run(sid_root, ["rm", "-rf", out])
    lane.run(sid_root, ["mkdir", "-p", out])
    return out, edgepilot(sid_root, "quantize", model, "--to", "Q4_0", "--out", out, "--json")


def test_quantize_through_debians_llama_quantize(sid_root, quantized):
    out, data = quantized
    assert data["engine"]["path"] == "/usr/bin/llama-quantize"
    assert data["engine"]["version"].startswith("0.7")  # from llama-server beside it
    assert data["reference"] == f"{out}/SmolLM2-135M-Instruct-F16.gguf"
    (variant,) = data["variants"]
    assert variant["type"] == "Q4_0" and variant["file_bytes"] > 50 << 20
    assert lane.host_path(sid_root, variant["path"]).is_file()


def test_compare_through_debians_llama_perplexity(sid_root, quantized):
    """Debian ships llama-perplexity in llama.cpp-tools-extra; without it compare names that package."""
    _, made = quantized
    files = [made["reference"], made["variants"][0]["path"]]
    sizes = ["--ctx", "256", "--ppl-ctx", "128", "--chunks", "2", "--n-gen", "8", "-t", "1"]
    if not lane.host_path(sid_root, "/usr/bin/llama-perplexity").exists():
        done = lane.run(sid_root, ["edgepilot", "compare", *files, *sizes])
        assert done.returncode == 2 and "llama.cpp-tools-extra" in done.stderr, done.stderr
        pytest.skip("llama.cpp-tools-extra is not installed in the lane: compare said which package")
    data = edgepilot(sid_root, "compare", *files, *sizes, "--json")
    assert data["engine"]["path"] == "/usr/bin/llama-perplexity"
    ref, q4 = data["rows"]
    assert ref["kl_mean"] == 0 and ref["same_top"] == 1 and q4["kl_mean"] > 0 and 0 < q4["same_top"] <= 1
    assert q4["measured_peak_bytes"] > 50 << 20 and q4["tg_tps"] > 0
