"""`edgepilot bench` through llama.cpp's own llama-bench (the tools engine: no llama-cpp-python needed).

One llama-bench run per core set measures the whole grid (its `-t 1,2,4` is the thread sweep); the process
is pinned the way the in-process bench pins itself (the child inherits the CPU set). With --cooldown each
test is a run of its own, so the wait for the CPU to cool back happens between tests as in-process.
Sensors are recorded per test: a test's reading runs from the previous result line to its own.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from edgepilot.bench.monitor import Recording, Sensors, cool_down
from edgepilot.bench.request import BenchRequest, Progress, with_reading
from edgepilot.bench.results import BenchRow
from edgepilot.device.cpusets import cpu_mask
from edgepilot.engine.llama_bench import BenchJob, LlamaBenchRecord, run_llama_bench
from edgepilot.engine.native_tools import tool_version


def bench_jobs(path: Path, req: BenchRequest) -> list[tuple[tuple[int, ...] | None, BenchJob]]:
    """(core set, llama-bench job) in the order they run: one per core set, one per test with --cooldown."""
    base = BenchJob(
        model=path,
        n_prompt=req.n_prompt,
        n_gen=req.n_gen,
        threads=req.threads,
        reps=req.reps,
        ubatch=req.ubatch,
        flash_attn=req.flash_attn,
        repack=req.repack,
        n_batch=req.n_batch,
        warmup=req.warmup,
        device=req.device,
        gpu_layers=req.gpu_layers,
    )
    jobs: list[tuple[tuple[int, ...] | None, BenchJob]] = []
    for cores in req.core_sets or [None]:
        if not req.cooldown:
            jobs.append((cores, base))
            continue
        for repack in req.repack:
            for t in req.threads:
                for kind, size in req.tests:
                    one = replace(
                        base,
                        n_prompt=[size if kind == "pp" else 0],
                        n_gen=[size if kind == "tg" else 0],
                        threads=[t],
                        repack=[repack],
                    )
                    jobs.append((cores, one))
    return jobs


def units(job: BenchJob) -> int:
    """Warm-ups and repetitions the job runs (what llama-bench's --progress announces)."""
    tests = sum(1 for p in job.n_prompt if p > 0) + sum(1 for n in job.n_gen if n > 0)
    grid = len(job.threads) * len(job.ubatch) * len(job.flash_attn) * len(job.repack) * len(job.gpu_layers)
    return tests * grid * (job.reps + (1 if job.warmup else 0))


def to_row(path: Path, rec: LlamaBenchRecord, cores: tuple[int, ...] | None, job: BenchJob) -> BenchRow:
    return BenchRow(
        model_filename=str(path),
        model_type=rec.model_type,
        model_size=rec.model_size,
        model_n_params=rec.model_n_params,
        n_batch=rec.n_batch,
        n_ubatch=rec.n_ubatch,
        n_threads=rec.n_threads,
        cpu_mask=cpu_mask(cores),
        type_k=rec.type_k,
        type_v=rec.type_v,
        n_gpu_layers=rec.n_gpu_layers,
        device=job.device,
        flash_attn=rec.flash_attn if rec.flash_attn is not None else job.flash_attn[0],
        use_mmap=rec.use_mmap,
        repack=rec.repack if rec.repack is not None else job.repack[0],
        n_prompt=rec.n_prompt,
        n_gen=rec.n_gen,
        n_depth=rec.n_depth,
        test_time=rec.test_time,
        samples_ns=rec.samples_ns,
        samples_ts=rec.samples_ts,
        avg_ns=rec.avg_ns,
        stddev_ns=rec.stddev_ns,
        avg_ts=round(rec.avg_ts, 3),
        stddev_ts=round(rec.stddev_ts, 3),
        cores=list(cores) if cores else None,
    )


def build_facts(tool: Path, records: list[LlamaBenchRecord]) -> dict[str, str]:
    """What the report's `build` says of the llama.cpp that measured (stored with the results)."""
    version = tool_version(tool)
    facts = {"engine": "tools", "llama-bench": str(tool), "llama.cpp": version.text if version else "unknown"}
    if records:
        facts["build_commit"] = records[0].build_commit
        facts["build_number"] = str(records[0].build_number)
    return facts


class _Collector:
    """Rows of one llama-bench run as its results arrive, each with the sensors' reading of its own test."""

    def __init__(
        self,
        path: Path,
        job: BenchJob,
        cores: tuple[int, ...] | None,
        sensors: Sensors,
        progress: Progress,
        rows: list[BenchRow],
        records: list[LlamaBenchRecord],
    ) -> None:
        self.path, self.job, self.cores, self.sensors, self.progress = path, job, cores, sensors, progress
        self.rows, self.records = rows, records  # the whole bench's: appended as results arrive
        self.done = 0  # units done before this run, plus those announced since
        self.total = 0
        self.announced = 0  # an older llama-bench without --progress announces none: results count then
        self.recording = Recording(sensors).start()

    def on_progress(self, what: str) -> None:
        self.progress(f"llama-bench: {what}", self.done, self.total)
        self.done += 1
        self.announced += 1

    def on_record(self, rec: LlamaBenchRecord) -> None:
        row = with_reading(to_row(self.path, rec, self.cores, self.job), self.recording.stop())
        self.rows.append(row)
        self.records.append(rec)
        if not self.announced:
            self.done += self.job.reps + (1 if self.job.warmup else 0)
            self.progress(f"{row.test} t{rec.n_threads}", self.done, self.total)
        self.recording = Recording(self.sensors).start()


def measure_with_llama_bench(
    path: Path,
    req: BenchRequest,
    tool: Path,
    sensors: Sensors,
    baseline: float | None,
    progress: Progress,
    verbose: bool,
    rows: list[BenchRow],
) -> dict[str, str]:
    """Each result's row is appended to `rows` as llama-bench prints it (an interrupted bench keeps them);
    returns what the report's `build` says of this llama.cpp."""
    jobs = bench_jobs(path, req)
    total = sum(units(job) for _, job in jobs)
    done = 0
    records: list[LlamaBenchRecord] = []
    for i, (cores, job) in enumerate(jobs):
        if i and req.cooldown:
            cool_down(sensors, baseline, req.cooldown, lambda msg, n=done: progress(msg, n, total))
        run = _Collector(path, job, cores, sensors, progress, rows, records)
        run.done, run.total = done, total
        try:
            run_llama_bench(
                tool, job, cpus=cores, on_progress=run.on_progress, on_record=run.on_record, verbose=verbose
            )
        finally:
            run.recording.stop()
        done += units(job)
    return build_facts(tool, records)
