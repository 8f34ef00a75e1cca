"""A tune's report: its fields, and its measurements as bench rows (for the history) and plot points."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from edgepilot.bench.gpu_trial import GpuTrial
from edgepilot.bench.measure import LLAMA_BENCH_BATCH
from edgepilot.bench.repack_trial import RepackTrial
from edgepilot.bench.results import BenchReport, BenchRow
from edgepilot.bench.search import Trial
from edgepilot.bench.tune_sustained import SustainedTune
from edgepilot.device.cpusets import cpu_mask, cpulist, parse_cpulist
from edgepilot.engine.choice import EngineInfo
from edgepilot.tuned.identity import DeviceId, MeasuredModel, versions


@dataclass
class TuneTrial:
    phase: str
    test: str
    n_threads: int
    cores: str
    n_ubatch: int
    flash_attn: bool
    ts: float  # tokens per second: mean of the faster half of the repetitions
    samples_ts: list[float]
    rejected: bool


@dataclass
class TuneReport:
    model: MeasuredModel
    device: DeviceId
    core_sets: list[str]  # the candidate sets, fastest cluster first
    gen: dict[str, Any]  # n_threads, cores, flash_attn, tg_ts
    prompt: dict[str, Any]  # n_threads, cores, n_ubatch, flash_attn, pp_ts
    default_tg_ts: float | None  # all cores, one thread each (llama.cpp's default on ARM): median if measured
    speedup_vs_default: float | None  # medians over medians; None unless both were repeated (CLAIM_REPS)
    knee: str | None
    trials: list[TuneTrial]
    measurements: int  # repetitions measured
    loads: int
    seconds: float
    bandwidth_gbs: float | None
    bytes_per_token: int | None
    roofline: float | None
    profile: dict[str, Any] | None
    profile_path: str | None
    started: str
    n_prompt: int
    n_gen: int
    notes: list[str] = field(default_factory=list)
    run_id: int | None = None
    db_path: str | None = None
    plot_png: str | None = None
    llama_cpp_args: list[str] = field(default_factory=list)  # the same settings for llama-cli / llama-server
    repack: RepackTrial | None = None  # with and without llama.cpp's weight repacking, if measured
    engine: EngineInfo | None = None  # which llama.cpp measured: in-process, or llama-bench with its version
    gpu: GpuTrial | None = None  # the GPU against the tuned CPU settings, per layer count, if tried
    default_tg_reps: int = 0  # the repetitions behind default_tg_ts
    partial: bool = False  # stopped (Ctrl-C): `trials` are those measured, gen/prompt empty, no profile
    sustained: SustainedTune | None = None  # --sustained: the best settings over windows, burst vs sustained
    chosen_by: str = "burst"  # "sustained": generation's settings were kept for their steady speed
    speculation: Any = None  # --speculation: bench/spec_trial.SpecTrial, per kind of text


def tune_trial(t: Trial) -> TuneTrial:
    c = t.candidate
    return TuneTrial(
        t.phase,
        t.test,
        c.n_threads,
        cpulist(c.cpus),
        c.n_ubatch,
        c.flash_attn,
        round(t.value, 2),
        [round(s, 2) for s in t.samples],
        t.rejected,
    )


def as_bench_report(tune: TuneReport) -> BenchReport:
    """The tune's measurements as bench rows, so they are stored and shown in --history like bench results."""
    rows = []
    for t in tune.trials:
        cpus = parse_cpulist(t.cores) if t.cores else []
        size = tune.n_prompt if t.test == "pp" else tune.n_gen
        rows.append(
            _row(
                tune,
                size,
                t.samples_ts,
                n_batch=LLAMA_BENCH_BATCH,
                n_ubatch=t.n_ubatch,
                n_threads=t.n_threads,
                cpu_mask=cpu_mask(cpus),
                type_k="f16",
                type_v="f16",
                n_gpu_layers=0,
                flash_attn=t.flash_attn,
                use_mmap=True,
                n_prompt=size if t.test == "pp" else 0,
                n_gen=size if t.test == "tg" else 0,
                cores=cpus,
            )
        )
    if tune.speculation is not None:
        rows += _speculation_rows(tune)
    return BenchReport(
        rows=rows,
        model=tune.model,
        device=tune.device,
        build=versions() | _tool_facts(tune.engine),
        bandwidth_gbs=tune.bandwidth_gbs,
        bandwidth_threads=None,
        bytes_per_token=tune.bytes_per_token,
        started=tune.started,
        seconds=tune.seconds,
        partial=tune.partial,
    )


def _tool_facts(info: EngineInfo | None) -> dict[str, str]:
    if info is None or info.kind != "tools":
        return {}
    return {"engine": "tools", "llama-bench": str(info.path), "llama.cpp": info.version or "unknown"}


SWEEP_PHASES = ("scan", "confirm", "prompt-threads")


def sweep_points(report: TuneReport) -> list[tuple[str, str, str, int, float]]:
    """The thread sweep of a tune (before flash attention and ubatch were varied), as plot points."""
    return [
        (t.test, f"{t.test}{report.n_prompt if t.test == 'pp' else report.n_gen}", t.cores, t.n_threads, t.ts)
        for t in report.trials
        if t.phase in SWEEP_PHASES
    ]


def _speculation_rows(tune: TuneReport) -> list[BenchRow]:
    """tune --speculation as bench rows: per kind of text, plain and each candidate at the trial's settings,
    so the history (and the doctor reading it) can compare them."""
    trial = tune.speculation
    st = trial.settings
    rows = []
    for text_kind, k in trial.kinds.items():
        runs = [("plain", k.plain_samples_ts, None)]
        runs += [(name, c.samples_ts, c.acceptance_rate) for name, c in k.candidates.items()]
        for name, samples, acceptance in runs:
            if not samples:
                continue
            rows.append(
                _row(
                    tune,
                    trial.n_gen,
                    samples,
                    n_batch=st.get("n_batch", LLAMA_BENCH_BATCH),
                    n_ubatch=st.get("n_ubatch", LLAMA_BENCH_BATCH),
                    n_threads=st.get("n_threads", 0),
                    cpu_mask="0x0",
                    type_k=st.get("type_k", "f16"),
                    type_v=st.get("type_v", "f16"),
                    n_gpu_layers=st.get("n_gpu_layers", 0),
                    flash_attn=bool(st.get("flash_attn", False)),
                    use_mmap=bool(st.get("use_mmap", True)),
                    n_prompt=0,
                    n_gen=trial.n_gen,
                    # the median, as the trial judged by; the spread as bench rows give it
                    avg_ts=round(statistics.median(samples), 3),
                    stddev_ts=round(statistics.stdev(samples), 3) if len(samples) > 1 else 0.0,
                    device=st.get("device") or "none",
                    repack=bool(st.get("repack", True)),
                    speculation=name,
                    text_kind=text_kind,
                    acceptance_rate=acceptance,
                )
            )
    return rows


def _row(tune: TuneReport, size: int, samples_ts: list[float], **fields: Any) -> BenchRow:
    """A bench row of the tuned model, measured when the tune started: `size` tokens a sample."""
    return BenchRow(
        model_filename=tune.model.path,
        model_type=tune.model.type,
        model_size=tune.model.size,
        model_n_params=tune.model.n_params,
        test_time=tune.started,
        samples_ns=[int(size / s * 1e9) if s else 0 for s in samples_ts],
        samples_ts=samples_ts,
        **fields,
    )
