"""llama-bench's JSON as two real versions print it (samples/SOURCE.md), read into one record and into
edgepilot's bench rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgepilot.bench.runner import BenchRequest
from edgepilot.bench.tool_bench import bench_jobs, to_row, units
from edgepilot.engine.llama_bench import PROGRESS, UNIT, BenchJob, parse_output, parse_record

SAMPLES = Path(__file__).resolve().parent / "samples"


def test_debian_0_7_json_array():
    records = parse_output((SAMPLES / "llama-bench-0.7.0-debian.json").read_text())
    tests = [(r.n_prompt, r.n_gen, r.n_threads) for r in records]
    assert tests == [(16, 0, 1), (0, 4, 1), (16, 0, 2), (0, 4, 2)]
    first = records[0]
    assert first.model_type == "llama 256M Q4_1" and first.model_n_params == 134515008
    assert first.samples_ts == [146.623, 139.058] and first.samples_ns == [109123666, 115059835]
    assert first.avg_ts == pytest.approx(142.840361) and first.stddev_ts == pytest.approx(5.34895)
    assert first.flash_attn is None  # -1: auto, what this version does without -fa
    assert first.use_mmap is True  # load_mode "auto" maps the file
    assert first.repack is True
    assert (first.build_commit, first.build_number) == ("Debian", 11669)
    assert first.n_gpu_layers == -1 and first.n_batch == 2048 and first.n_ubatch == 512


def test_b5163_jsonl_lines():
    records = parse_output((SAMPLES / "llama-bench-b5163-readme.jsonl").read_text())
    assert [(r.n_prompt, r.n_gen) for r in records] == [(512, 0), (0, 128)]
    pp, tg = records
    assert pp.flash_attn is False and pp.use_mmap is True
    assert pp.repack is None  # older than --repack: it does not say
    assert tg.samples_ts == [120.038, 120.203, 118.624, 120.377, 119.982]
    assert tg.avg_ns == 1068078400 and tg.build_commit == "8cf427ff"


def test_pinned_build_jsonl_with_flash_attention_as_numbers():
    records = parse_output((SAMPLES / "llama-bench-0.5.0-dev-pinned.jsonl").read_text())
    assert [(r.n_prompt, r.n_gen, r.flash_attn) for r in records] == [
        (16, 0, False),
        (0, 4, False),
        (16, 0, True),
        (0, 4, True),
    ]
    assert records[3].samples_ts == [63.465, 64.8851] and records[0].build_commit == "unknown"


def test_progress_lines_announce_each_warm_up_and_repetition():
    """What bench's progress counts: of llama-bench's --progress lines, the warm-ups and repetitions."""
    lines = (SAMPLES / "llama-bench-0.5.0-dev-pinned.progress.txt").read_text().splitlines()
    found = [m for m in map(PROGRESS.search, lines) if m]
    assert len(found) == len(lines) == 16
    units = [m for m in found if UNIT.search(m.group(3))]
    assert len(units) == 4 * (2 + 1)  # 4 tests x (2 repetitions + warm-up); "starting" is not one
    assert units[0].group(1, 2, 3) == ("1", "4", "warmup prompt run")


def test_newer_spellings_of_the_same_settings():
    line = json.loads((SAMPLES / "llama-bench-0.7.0-debian.json").read_text())[1]
    assert parse_record({**line, "flash_attn": 1}).flash_attn is True
    assert parse_record({**line, "flash_attn": 0}).flash_attn is False
    assert parse_record({**line, "load_mode": "none"}).use_mmap is False
    old = {k: v for k, v in line.items() if k not in ("samples_ts", "samples_ns")}
    assert parse_record(old).samples_ts == [line["avg_ts"]]  # before samples lists: the mean alone


def test_not_a_result_is_a_value_error():
    with pytest.raises(ValueError, match="not a llama-bench result"):
        parse_record({"build_commit": "x"})
    assert parse_output("| model | size |\n") == []  # markdown: no result to read


def test_rows_keep_llama_bench_figures_and_add_edgepilot_keys(tmp_path):
    model = tmp_path / "m.gguf"
    records = parse_output((SAMPLES / "llama-bench-0.7.0-debian.json").read_text())
    job = BenchJob(model, [16], [4], [1, 2], reps=2)
    row = to_row(model, records[1], (0, 1), job)
    assert (row.test, row.kind, row.n_threads, row.n_gen) == ("tg4", "tg", 1, 4)
    assert row.samples_ts == [53.2871, 69.2811] and row.avg_ts == pytest.approx(61.284, abs=1e-3)
    assert row.cpu_mask == "0x3" and row.cores == [0, 1]  # the set the child ran on
    assert row.flash_attn is False  # auto in the record: what was asked for


def test_jobs_one_run_per_core_set_or_one_per_test_with_cooldown(tmp_path):
    req = BenchRequest(n_prompt=[16], n_gen=[4], reps=2, threads=[1, 2], core_sets=[(0,), (0, 1)])
    jobs = bench_jobs(tmp_path / "m.gguf", req)
    assert [(cores, job.threads) for cores, job in jobs] == [((0,), [1, 2]), ((0, 1), [1, 2])]
    assert units(jobs[0][1]) == 2 * 2 * 3  # 2 tests x 2 thread counts x (2 repetitions + warm-up)
    req.cooldown = 5
    jobs = bench_jobs(tmp_path / "m.gguf", req)
    assert len(jobs) == 2 * 2 * 2 and all(units(job) == 3 for _, job in jobs)
    assert (jobs[1][1].n_prompt, jobs[1][1].n_gen, jobs[1][1].threads) == ([0], [4], [1])
