"""`edgepilot bench`: llama-bench's measurement through edgepilot's engine, pinned, with sensors.

In-process (llama-cpp-python) here; without it, llama.cpp's own llama-bench does the measuring (tool_bench.py)
and the report is the same."""

from __future__ import annotations

import datetime as dt
import itertools
import time
from pathlib import Path

from edgepilot.bench.monitor import Recording, Sensors, cool_down
from edgepilot.bench.request import BenchRequest, Progress, with_reading
from edgepilot.bench.results import BenchReport, BenchRow
from edgepilot.bench.store import save_report
from edgepilot.device.cpu import read_cpu
from edgepilot.device.cpusets import cpu_mask, cpulist
from edgepilot.engine.choice import choose_engine
from edgepilot.plan.roofline import bytes_per_token, kv_bytes_per_cell, read_per_token, roofline_fraction
from edgepilot.tuned.bandwidth_cache import machine_bandwidth
from edgepilot.tuned.identity import MeasuredModel, device_id, model_id, versions
from edgepilot.tuned.pinning import allowed_cpus, pinned
from edgepilot.words import count

__all__ = ["BenchRequest", "Progress", "run_bench", "sweep_points", "with_reading"]


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_bench(
    path: Path,
    req: BenchRequest,
    progress: Progress | None = None,
    verbose: bool = False,
    store: bool = True,
    engine: str | None = None,
) -> BenchReport:
    """Measure every combination of the request; keep the results in the SQLite history unless store=False.
    engine: "auto", "inprocess" or "tools" (llama.cpp's llama-bench; engine.choice)."""
    req.validate()
    cpu = read_cpu(Path("/"))
    req.check_threads(cpu.cores or len(allowed_cpus()))
    info = choose_engine(engine, tool="llama-bench", gpu=req.on_gpu)
    if not req.threads:
        from edgepilot.tuned.decide import decide

        req.threads = [decide(path).settings.n_threads]
    started, t_start = _now(), time.perf_counter()
    report_progress = progress or (lambda _d, _n, _t: None)
    model = model_id(path)
    device = device_id(cpu=cpu)
    sensors = Sensors.find()
    baseline = sensors.temperature()
    allowed = allowed_cpus()
    warnings: list[str] = []
    if info.no_repack and req.repack == [True]:  # it crashed with repacking on here (engine/cpu_check.py)
        req.repack = [False]
        warnings.append(info.cpu_note or "weight repacking crashed here: measured without it")
    for cores in req.core_sets or []:
        over = [t for t in req.threads if t > len(cores)]
        if over:
            warnings.append(
                f"{count(max(over), 'thread')} on {count(len(cores), 'pinned CPU')}: threads share cores "
                "(oversubscribed)"
            )
    if not req.core_sets and max(req.threads) > len(allowed):
        warnings.append(
            f"{count(max(req.threads), 'thread')} but this process may use only {count(len(allowed), 'CPU')}"
        )

    bandwidth = machine_bandwidth(cpu=cpu) if req.roofline else None
    bpt = bytes_per_token(path) if req.roofline else None

    build = versions()
    rows: list[BenchRow] = []  # filled as tests finish: a Ctrl-C keeps those
    try:
        if info.kind == "tools":
            from edgepilot.bench.tool_bench import measure_with_llama_bench

            tool = Path(str(info.path))
            build.update(
                measure_with_llama_bench(path, req, tool, sensors, baseline, report_progress, verbose, rows)
            )
        else:
            _measure_inprocess(path, req, sensors, baseline, report_progress, verbose, rows)
        partial = False
    except KeyboardInterrupt:
        if not rows:  # nothing finished: nothing to keep
            raise
        partial = True
        if info.kind == "tools":
            from edgepilot.bench.tool_bench import build_facts

            build.update(build_facts(Path(str(info.path)), []))
        warnings.append(f"stopped by Ctrl-C: {len(rows)} of {planned_tests(req)} tests finished")
    report_progress("done", 1, 1)
    kv_cell = kv_bytes_per_cell(path) if req.roofline else None  # bench's cache is f16 (measure.py)
    for row in rows:
        if row.kind == "tg":  # the context grows from n_depth: on average half the new tokens are in it
            read = read_per_token(bpt, kv_cell, row.n_depth + row.n_gen / 2)
            row.roofline = roofline_fraction(row.avg_ts, read, bandwidth)
    report = BenchReport(
        rows=rows,
        model=MeasuredModel.of(
            model, rows[0].model_type if rows else "", rows[0].model_n_params if rows else 0
        ),
        device=device,
        build=build,
        bandwidth_gbs=round(bandwidth.gb_per_s, 2) if bandwidth else None,
        bandwidth_threads=bandwidth.threads if bandwidth else None,
        bytes_per_token=bpt,
        kv_bytes_per_cell=kv_cell,
        bandwidth_how=bandwidth.how() if bandwidth else None,
        started=started,
        seconds=round(time.perf_counter() - t_start, 2),
        sensors=sensors.notes,
        warnings=warnings,
        engine=info,
        partial=partial,
    )
    if store:
        save_report(report)
    return report


def planned_tests(req: BenchRequest) -> int:
    """The rows a whole run of `req` makes."""
    n_sets = len(req.core_sets) if req.core_sets else 1
    grid = len(req.repack) * len(req.ubatch) * len(req.flash_attn) * len(req.threads) * len(req.gpu_layers)
    return grid * n_sets * len(req.tests)


def _measure_inprocess(
    path: Path,
    req: BenchRequest,
    sensors: Sensors,
    baseline: float | None,
    report_progress: Progress,
    verbose: bool,
    rows: list[BenchRow],
) -> None:
    """Each finished test's row is appended to `rows` (so an interrupted bench keeps them)."""
    from edgepilot.bench.measure import Bencher, bench_settings
    from edgepilot.engine import interrupts
    from edgepilot.engine.inprocess import LlamaEngine

    tests = req.tests
    per_test = req.reps + (1 if req.warmup else 0)
    n_sets = len(req.core_sets) if req.core_sets else 1
    total = len(req.repack) * len(req.ubatch) * len(req.flash_attn) * n_sets * len(req.threads)
    total *= len(tests) * per_test
    done = 0
    first = True
    max_p = max(req.n_prompt, default=0)
    max_n = max(req.n_gen, default=0)
    for repack, ub, fa in itertools.product(req.repack, req.ubatch, req.flash_attn):
        settings = bench_settings(max_p, max_n, req.threads[0], ub, fa, req.n_batch, repack=repack)
        with LlamaEngine(path, settings, verbose=verbose) as engine:
            bencher = Bencher(engine)
            for cores in req.core_sets or [None]:
                with pinned(cores):
                    for t in req.threads:
                        bencher.set_threads(t)
                        for kind, size in tests:
                            label = f"{kind}{size} t{t}" + (f" ub{ub}" if len(req.ubatch) > 1 else "")
                            label += f" fa{int(fa)}" if len(req.flash_attn) > 1 else ""
                            label += f" repack{int(repack)}" if len(req.repack) > 1 else ""
                            if not first and req.cooldown:
                                cool_down(
                                    sensors,
                                    baseline,
                                    req.cooldown,
                                    lambda msg, n=done: report_progress(msg, n, total),
                                )
                            first = False
                            if req.warmup:
                                report_progress(f"{label} warm-up", done, total)
                                bencher.pp(size) if kind == "pp" else bencher.tg(1)
                                done += 1
                            recording = Recording(sensors).start()
                            samples = []
                            for rep in range(req.reps):
                                interrupts.raise_pending()  # a Ctrl-C that landed in llama.cpp's log
                                report_progress(f"{label} rep {rep + 1}/{req.reps}", done, total)
                                samples.append(bencher.pp(size) if kind == "pp" else bencher.tg(size))
                                done += 1
                            reading = recording.stop()
                            rows.append(_row(engine, path, settings, t, kind, size, cores, samples, reading))


def sweep_points(report: BenchReport) -> list[tuple[str, str, str, int, float]]:
    """The rows as plot points (test kind, test, cores, threads, t/s); other settings go in the label."""
    vary_ub = len({r.n_ubatch for r in report.rows}) > 1
    vary_fa = len({r.flash_attn for r in report.rows}) > 1
    points = []
    for r in report.rows:
        label = (
            r.test + (f" ub{r.n_ubatch}" if vary_ub else "") + (f" fa{int(r.flash_attn)}" if vary_fa else "")
        )
        points.append((r.kind, label, cpulist(r.cores) if r.cores else "", r.n_threads, r.avg_ts))
    return points


def _row(engine, path, settings, n_threads, kind, size, cores, samples, reading) -> BenchRow:
    ts = [round(s.ts, 3) for s in samples]
    row = BenchRow(
        model_filename=str(path),
        model_type=engine.load.description,
        model_size=engine.load.model_bytes,
        model_n_params=engine.load.n_params,
        n_batch=settings.n_batch,
        n_ubatch=settings.n_ubatch,
        n_threads=n_threads,
        cpu_mask=cpu_mask(cores),
        type_k=settings.type_k,
        type_v=settings.type_v,
        n_gpu_layers=settings.n_gpu_layers,
        flash_attn=settings.flash_attn,
        use_mmap=settings.use_mmap,
        repack=settings.repack,
        n_prompt=size if kind == "pp" else 0,
        n_gen=size if kind == "tg" else 0,
        test_time=_now(),
        samples_ns=[int(s.seconds * 1e9) for s in samples],
        samples_ts=ts,
        cores=list(cores) if cores else None,
    )
    return with_reading(row, reading)
