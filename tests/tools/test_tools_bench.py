"""`edgepilot bench` and `edgepilot tune` with --engine tools: llama.cpp's llama-bench measures, for real, on
the two real models (short runs: -p 16 -n 4 -r 1)."""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import subprocess

from click.testing import CliRunner

from edgepilot.engine.llama_bench import start_on_cpus
from edgepilot.tuned.pinning import allowed_cpus

runner = CliRunner()
SHORT = ["-p", "16", "-n", "4", "-r", "1"]
BENCH_KEYS = {"n_threads", "n_prompt", "n_gen", "avg_ts", "stddev_ts", "samples_ts"}


def invoke(cli_app, *args):
    res = runner.invoke(cli_app, list(args))
    assert res.exit_code == 0, res.output
    return res


def test_bench_rows_come_from_llama_bench(cli_app, smollm_path, llama_bench_tool, data_dir):
    res = invoke(cli_app, "bench", str(smollm_path), *SHORT, "-t", "1,2", "--engine", "tools", "--json")
    data = json.loads(res.stdout)
    rows = data["rows"]
    assert [(r["test"], r["n_threads"]) for r in rows] == [("pp16", 1), ("tg4", 1), ("pp16", 2), ("tg4", 2)]
    for r in rows:
        assert set(r) >= BENCH_KEYS
        assert len(r["samples_ts"]) == 1 and r["avg_ts"] > 0 and r["samples_ns"][0] > 0
        assert r["model_type"].startswith("llama") and r["model_size"] > 50 << 20
        assert r["n_gpu_layers"] == 0 and r["flash_attn"] is False and r["cores"] is None
    assert rows[1]["roofline"] is not None
    engine = data["engine"]
    assert engine["kind"] == "tools" and engine["path"] == str(llama_bench_tool) and engine["version"]
    assert data["build"]["engine"] == "tools" and data["build"]["llama.cpp"] == engine["version"]
    with sqlite3.connect(data_dir / "bench.sqlite") as con:
        assert con.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 4
        build = json.loads(con.execute("SELECT build FROM runs").fetchone()[0])
    assert build["llama-bench"] == str(llama_bench_tool)


def test_bench_pinned_with_repack_sweep_and_csv(cli_app, gemma_path, llama_bench_tool):
    """--cores: the child runs on that set; --repack 0,1 goes to llama-bench's own --repack."""
    cpu = min(allowed_cpus())
    args = ["bench", str(gemma_path), *SHORT, "-t", "1", "--cores", str(cpu), "--repack", "0,1"]
    res = invoke(cli_app, *args, "--engine", "tools", "--csv")
    table = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [(r["n_prompt"], r["repack"]) for r in table] == [("16", "0"), ("0", "0"), ("16", "1"), ("0", "1")]
    assert {r["cpu_mask"] for r in table} == {hex(1 << cpu)} and {r["cores"] for r in table} == {str(cpu)}
    assert all(r["build_commit"] and not r["build_commit"].startswith("llama-cpp-python") for r in table)
    md = invoke(cli_app, "bench", str(gemma_path), *SHORT, "-t", "1", "--engine", "tools", "--md").stdout
    assert "tg4" in md and "build: llama-bench " in md and "llama-cpp-python" not in md


def test_a_child_inherits_the_cpu_set_and_this_process_keeps_its_own():
    cpu = min(allowed_cpus())
    before = os.sched_getaffinity(0)
    with start_on_cpus([cpu]):
        child = subprocess.run(["grep", "Cpus_allowed", "/proc/self/status"], capture_output=True, text=True)
    assert child.stdout.split()[-1] == str(cpu)
    assert os.sched_getaffinity(0) == before


def test_tune_through_llama_bench(cli_app, smollm_path, llama_bench_tool, data_dir):
    res = invoke(cli_app, "tune", str(smollm_path), *SHORT, "--engine", "tools", "--json")
    data = json.loads(res.stdout)
    assert data["engine"]["kind"] == "tools" and data["engine"]["path"] == str(llama_bench_tool)
    assert [t["phase"] for t in data["trials"]][0] == "scan"
    assert data["gen"]["tg_ts"] > 0 and data["prompt"]["pp_ts"] > 0
    # each scan trial is one llama-bench run; with one repetition a "confirm" trial re-uses its scan sample
    scans = [t for t in data["trials"] if t["phase"] == "scan"]
    assert data["loads"] >= len(scans) and data["model"]["type"].startswith("llama")
    profile = json.loads(next((data_dir / "profiles").glob("*.json")).read_text())
    assert profile == data["profile"] and profile["n_threads"] == data["gen"]["n_threads"]
    hist = json.loads(invoke(cli_app, "bench", "--history", "--json").stdout)
    assert {e["kind"] for e in hist["entries"]} == {"tune"}


def test_missing_llama_bench_is_one_line_naming_the_package(cli_app, smollm_path, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPILOT_TOOLS_DIR", str(tmp_path / "no-build"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for command in ("bench", "tune"):
        res = runner.invoke(cli_app, [command, str(smollm_path), *SHORT, "--engine", "tools"])
        assert res.exit_code == 2, res.output
        err = res.stderr.strip().splitlines()
        assert len(err) == 1 and "llama-bench" in err[0] and "pkg install llama-cpp" in err[0], err


def test_a_bad_engine_is_one_line(cli_app, smollm_path):
    res = runner.invoke(cli_app, ["bench", str(smollm_path), "--engine", "gpu"])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "--engine" in res.stderr
