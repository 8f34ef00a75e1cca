"""`edgepilot bench` and `edgepilot tune` end to end on both real models (short runs), plus their store."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sqlite3

import pytest
from click.testing import CliRunner

from edgepilot.bench.formats import LLAMA_BENCH_FIELDS
from edgepilot.tuned.pinning import allowed_cpus

runner = CliRunner()
SHORT = ["-p", "32", "-n", "8", "-r", "2"]
BENCH_KEYS = {"n_threads", "n_prompt", "n_gen", "avg_ts", "stddev_ts", "samples_ts"}


def bench(cli_app, *args):
    res = runner.invoke(cli_app, ["bench", *args])
    assert res.exit_code == 0, res.output
    return res


@pytest.mark.parametrize("model", ["gemma_path", "smollm_path"])
def test_bench_json_rows_are_llama_bench_rows(cli_app, model, request, data_dir):
    path = request.getfixturevalue(model)
    res = bench(cli_app, str(path), *SHORT, "-t", "1,2", "--json")
    data = json.loads(res.stdout)
    rows = data["rows"]
    assert [(r["test"], r["n_threads"]) for r in rows] == [("pp32", 1), ("tg8", 1), ("pp32", 2), ("tg8", 2)]
    for r in rows:
        assert set(r) >= BENCH_KEYS
        assert len(r["samples_ts"]) == 2 and r["avg_ts"] > 0
        assert r["avg_ts"] == pytest.approx(sum(r["samples_ts"]) / 2, rel=1e-3)
        assert r["model_size"] > 0 and r["model_type"]
    assert rows[1]["roofline"] is not None and 0 < rows[1]["roofline"] < 1.5
    assert data["bandwidth_gbs"] > 0 and data["bytes_per_token"] > 0
    assert data["run_id"] == 1 and (data_dir / "bench.sqlite").is_file()
    with sqlite3.connect(data_dir / "bench.sqlite") as con:
        assert con.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 4
        assert con.execute("SELECT device_fp, model_key FROM runs").fetchone()[1] == data["model"]["key"]


def test_bench_csv_has_llama_bench_columns(cli_app, smollm_path):
    res = bench(cli_app, str(smollm_path), *SHORT, "--csv")
    table = list(csv.reader(io.StringIO(res.stdout)))
    header, rows = table[0], table[1:]
    assert header[: len(LLAMA_BENCH_FIELDS)] == LLAMA_BENCH_FIELDS
    assert len(rows) == 2
    row = dict(zip(header, rows[0], strict=True))
    assert row["n_prompt"] == "32" and row["n_gen"] == "0" and float(row["avg_ts"]) > 0
    assert row["cpu_mask"] == "0x0" and row["backends"] == "CPU"


def test_bench_measures_with_and_without_repacking(cli_app, gemma_path, data_dir):
    """--repack 0,1 as llama-bench: one model load each (Gemma's Q4_K tensors are repacked on x86 AVX2)."""
    res = bench(cli_app, str(gemma_path), "-p", "16", "-n", "0", "-r", "1", "--repack", "0,1", "--json")
    rows = json.loads(res.stdout)["rows"]
    assert [r["repack"] for r in rows] == [False, True] and all(r["avg_ts"] > 0 for r in rows)
    with sqlite3.connect(data_dir / "bench.sqlite") as con:
        assert sorted(con.execute("SELECT repack FROM results").fetchall()) == [(0,), (1,)]
    res = bench(cli_app, str(gemma_path), "-p", "16", "-n", "0", "-r", "1", "--no-repack", "--csv")
    header, row = list(csv.reader(io.StringIO(res.stdout)))[:2]
    assert dict(zip(header, row, strict=True))["repack"] == "0"


PARTIAL_COLUMN = "    partial INTEGER DEFAULT 0           -- 1: stopped (Ctrl-C) before every test ran\n"
SPECULATION_COLUMNS = (
    ",  -- sustained: JSON windows, when and how far speed fell\n"
    "    speculation TEXT, text_kind TEXT, acceptance_rate REAL"
    "  -- tune --speculation: plain | lookup | draft\n"
)


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("writable", [True, False])
def test_bench_store_from_before_repack_device_and_partial_is_upgraded(tmp_path, version, writable):
    from edgepilot.bench.store import SCHEMA, connect

    db = tmp_path / "bench.sqlite"
    assert PARTIAL_COLUMN in SCHEMA and SPECULATION_COLUMNS in SCHEMA
    old = SCHEMA.replace(PARTIAL_COLUMN, "").replace("build TEXT,", "build TEXT ")  # runs.partial: 4
    old = old.replace(SPECULATION_COLUMNS, "\n")  # results.speculation, text_kind, acceptance_rate: 6
    if version <= 2:  # no device columns either
        old = old.replace("    device TEXT DEFAULT 'none', n_gpu_layers INTEGER DEFAULT 0,\n", "")
    if version == 1:  # no repack column either
        old = old.replace("    repack INTEGER DEFAULT 1,\n", "")
    with sqlite3.connect(db) as con:
        con.executescript(old)
        con.execute("INSERT INTO runs (started, kind, device_fp, model_key) VALUES ('t', 'bench', 'd', 'm')")
        con.execute("INSERT INTO results (run_id, test) VALUES (1, 'pp16')")
        con.execute(f"PRAGMA user_version = {version}")
    con.close()
    with connect(db, create=writable) as con:  # not writable: read as it is, through temporary views
        row = con.execute("SELECT repack, device, n_gpu_layers FROM results").fetchone()
        assert tuple(row) == (1, "none", 0)
        assert con.execute("SELECT partial FROM runs").fetchone()[0] == 0
        spec = con.execute("SELECT speculation, text_kind, acceptance_rate FROM results").fetchone()
        assert tuple(spec) == (None, None, None)


def test_bench_md_like_llama_bench_with_pinning(cli_app, smollm_path):
    cpu = allowed_cpus()[0]
    res = bench(cli_app, str(smollm_path), *SHORT, "-t", "1", "--cores", str(cpu), "-fa", "0,1", "--md")
    lines = res.stdout.splitlines()
    assert lines[0].startswith("| model") and "| threads |" in lines[0] and "cores" in lines[0]
    assert "fa" in lines[0] and lines[0].rstrip().endswith("t/s |")
    assert lines[1].startswith("| ---") or lines[1].startswith("| -")
    body = [ln for ln in lines[2:] if ln.startswith("|")]
    assert len(body) == 4 and all("±" in ln for ln in body)
    assert any("pp32" in ln for ln in body) and any("tg8" in ln for ln in body)
    assert lines[-1].startswith("build: llama-cpp-python")
    assert os.sched_getaffinity(0) == set(allowed_cpus())  # pinning undone afterwards


def test_history_shows_and_compares_runs(cli_app, smollm_path, gemma_path):
    bench(cli_app, str(smollm_path), *SHORT, "--json")
    bench(cli_app, str(smollm_path), *SHORT, "--json")
    bench(cli_app, str(gemma_path), "-p", "0", "-n", "8", "-r", "2", "--json")
    res = bench(cli_app, "--history", "--json")
    data = json.loads(res.stdout)
    assert data["runs"] == 3 and len(data["entries"]) == 5
    second = [e for e in data["entries"] if e["run_id"] == 2]
    assert all(e["previous_ts"] is not None and e["change"] is not None for e in second)
    assert all(e["best_ts"] >= e["avg_ts"] for e in data["entries"])
    only = json.loads(bench(cli_app, "--history", str(gemma_path), "--json").stdout)
    assert {e["model_name"] for e in only["entries"]} == {gemma_path.name}
    table = bench(cli_app, "--history").stdout
    assert "Δ prev" in table and "tg8" in table
    narrow = runner.invoke(cli_app, ["bench", "--history"], env={"COLUMNS": "50"}).stdout
    for e in data["entries"]:  # a table row each on a phone's screen (before: a block of 8 lines each)
        row = f"{e['avg_ts']:.2f} ± {e['stddev_ts']:.2f}"
        assert any(
            e["test"] in ln and row in ln and f"{e['best_ts']:.2f}" in ln for ln in narrow.splitlines()
        )
    assert all(len(ln) <= 50 or " " not in ln.strip() for ln in narrow.splitlines())  # but a long path
    assert len(narrow.splitlines()) < 50


def test_history_before_any_run(cli_app):
    res = bench(cli_app, "--history")
    assert "no results" in res.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["-t", "0"], "-t"),
        (["-t", "two"], "-t"),
        (["-p", "1-"], "-p"),
        (["-r", "0"], "-r"),
        (["-p", "0", "-n", "0"], "nothing to measure"),
        (["--cores", "4096"], "--cores"),
        (["--cores", "fast9"], "--cores"),
        (["-fa", "maybe"], "-fa"),
        (["--json", "--csv"], "one output format"),
        (["--plot", "sweep.svg"], "--plot"),
        (["--cooldown", "-1"], "--cooldown"),
        (["/no/such/model.gguf"], "not found"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli_app, args, needle):
    res = runner.invoke(cli_app, ["bench", *args])
    assert res.exit_code == 2, res.output
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("edgepilot: error:") and needle in err[0]
    assert "Traceback" not in res.output and res.stdout == ""


@pytest.mark.parametrize("threads", ["999", "1,999"])
def test_impossible_thread_counts_are_refused_before_any_work(cli_app, smollm_path, data_dir, threads):
    """As run and serve refuse them (one line, exit 2). Before: `bench -t 999` measured for 51 s, saved the
    result, and then only warned."""
    res = runner.invoke(cli_app, ["bench", str(smollm_path), *SHORT, "-t", threads])
    assert res.exit_code == 2, res.output
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "-t 999 on a device with" in err[0] and "use at most" in err[0], err
    assert res.stdout == "" and not (data_dir / "bench.sqlite").exists()


def test_bench_off_a_terminal_says_how_far_it_got_every_few_seconds(smollm_path, data_dir):
    """A pipe or a log gets a progress line every $EDGEPILOT_PROGRESS_SECONDS (5 by default; 0.1 here): what
    runs, how many repetitions of all are done, the time so far. Before: nothing until the result (28 s)."""
    import subprocess
    import sys

    env = {**os.environ, "EDGEPILOT_PROGRESS_SECONDS": "0.1"}
    done = subprocess.run(
        [sys.executable, "-m", "edgepilot", "bench", str(smollm_path), *SHORT, "-t", "1,2", "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("bench: ") and "bench: done" not in ln]
    assert len(lines) >= 2, done.stderr
    assert all(" of 12 · " in ln and ln.endswith(" s") for ln in lines), lines
    assert json.loads(done.stdout)["rows"]  # stdout stays the one JSON object


def test_bench_table_and_png(cli_app, smollm_path, tmp_path):
    png = tmp_path / "sweep.png"
    res = bench(cli_app, str(smollm_path), *SHORT, "-t", "1,2", "--plot", str(png))
    assert png.is_file() and png.read_bytes()[:4] == b"\x89PNG"
    assert "tg8" in res.stdout and "roofline" in res.stdout
    assert "threads" in res.stdout  # the terminal plot's x axis


@pytest.mark.parametrize("model", ["gemma_path", "smollm_path"])
def test_tune_saves_a_profile_that_run_picks_up(cli_app, model, request, data_dir):
    path = request.getfixturevalue(model)
    res = runner.invoke(cli_app, ["tune", str(path), *SHORT, "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["core_sets"] == [_cpulist(allowed_cpus())]
    gen, prompt = data["gen"], data["prompt"]
    assert 1 <= gen["n_threads"] <= len(allowed_cpus()) and gen["tg_ts"] > 0 and prompt["pp_ts"] > 0
    assert [t["phase"] for t in data["trials"]][0] == "scan"
    profile = json.loads((data_dir / "profiles").glob("*.json").__next__().read_text())
    assert profile["n_threads"] == gen["n_threads"] and profile["n_ubatch"] == prompt["n_ubatch"]
    assert profile == data["profile"] and data["profile_path"].startswith(str(data_dir))
    hist = json.loads(runner.invoke(cli_app, ["bench", "--history", "--json"]).stdout)
    assert {e["kind"] for e in hist["entries"]} == {"tune"}

    from edgepilot.tuned.profiles import load_profile

    assert load_profile(path).n_threads == gen["n_threads"]
    # whether weight repacking pays is measured where this CPU repacks something (Gemma's Q4_K on AVX2)
    trial = data["repack"]
    if trial["repacked_bytes"]:
        assert set(trial["pp_ts"]) == {"on", "off"} and min(trial["tg_ts"].values()) > 0
    else:
        assert trial["pp_ts"] == {} and "repacks none" in trial["note"]
    assert profile["repack"] == trial["pays"]
    assert any(n.startswith("repacking") for n in data["notes"])


def test_tune_without_repacking_saves_a_profile_without_it(cli_app, gemma_path, data_dir):
    res = runner.invoke(cli_app, ["tune", str(gemma_path), *SHORT, "--no-repack", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["repack"] is None and data["profile"]["repack"] is False
    from edgepilot.tuned.decide import decide

    decision = decide(gemma_path)
    assert decision.settings.repack is False and "--no-repack" in decision.plan.llama_cpp_args


def test_tune_table_and_png(cli_app, smollm_path, tmp_path):
    png = tmp_path / "tune.png"
    args = ["tune", str(smollm_path), *SHORT, "--plot", str(png), "--no-save"]
    res = runner.invoke(cli_app, args, env={"COLUMNS": "50"})
    assert res.exit_code == 0, res.output
    assert "generation" in res.stdout and "prompt" in res.stdout and "profile saved" not in res.stdout
    assert png.is_file()
    # at 50 columns each setting is a table row (#, phase, test and t/s on one line), not a block of lines
    rows = re.findall(
        r"^\s*\d+ +(scan|confirm|prompt-threads|flash-attn|ubatch|final) +(tg|pp) .*\d\.\d\d",
        res.stdout,
        re.M,
    )
    settings = re.search(r"^(\d+) settings?, ", res.stdout, re.M)
    assert settings and len(rows) == int(settings[1]), res.stdout


@pytest.mark.parametrize("command", ["bench", "tune"])
def test_plot_into_a_missing_folder_is_refused_before_measuring(cli_app, tmp_path, command):
    target = tmp_path / "no" / "such" / "sweep.png"
    res = runner.invoke(cli_app, [command, "-p", "8", "-n", "2", "-r", "1", "--plot", str(target)])
    assert res.exit_code == 2 and "does not exist" in res.stderr and res.stderr.count("\n") == 1
    assert not (tmp_path / "no").exists()


def test_tune_bad_input(cli_app):
    res = runner.invoke(cli_app, ["tune", "-n", "0"])
    assert res.exit_code == 2 and res.stderr.startswith("edgepilot: error:")


def _cpulist(cpus):
    from edgepilot.device.cpusets import cpulist

    return cpulist(cpus)
