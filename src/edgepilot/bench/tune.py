"""`edgepilot tune`: search threads x core set, flash attention and ubatch; save the winner as a profile."""

from __future__ import annotations

import datetime as dt
import math
import time
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from edgepilot.bench.coresets import device_sets
from edgepilot.bench.gpu_trial import DEFAULT_DEADLINE_S, GpuPoint, GpuTrial, trial_gpu, trial_note
from edgepilot.bench.lab import EngineLab
from edgepilot.bench.measure import LLAMA_BENCH_BATCH
from edgepilot.bench.monitor import Sensors
from edgepilot.bench.repack_trial import ROUNDS, trial_repack
from edgepilot.bench.request import Progress
from edgepilot.bench.search import Search, SearchConfig, ubatch_candidates
from edgepilot.bench.store import save_report
from edgepilot.bench.tool_lab import ToolLab
from edgepilot.bench.tune_report import TuneReport, as_bench_report, tune_trial
from edgepilot.bench.tune_sustained import (
    SustainedTune,
    apply_choice,
    choose,
    default_window,
    pick_candidates,
    run_sustained_tune,
)
from edgepilot.device.cpu import read_cpu
from edgepilot.device.cpusets import cpulist
from edgepilot.engine.choice import choose_engine
from edgepilot.errors import UserError
from edgepilot.plan.roofline import bytes_per_token, kv_bytes_per_cell, read_per_token, roofline_fraction
from edgepilot.tuned.bandwidth_cache import machine_bandwidth
from edgepilot.tuned.decide import decide
from edgepilot.tuned.identity import MeasuredModel, device_id, model_id
from edgepilot.tuned.pinning import allowed_cpus
from edgepilot.tuned.profiles import Profile, save_profile
from edgepilot.words import count

SUSTAINED_ENGINE = "tune --sustained needs the in-process engine for now (llama-bench: not yet)"


@dataclass
class TuneRequest:
    n_prompt: int = 256
    n_gen: int = 32
    reps: int = 3
    cooldown: float = 0.0
    save: bool = True  # write the profile
    store: bool = True  # keep the measurements in the SQLite history
    repack: bool = True  # False (--no-repack): tune without llama.cpp's weight repacking
    repack_trial: bool = True  # with repacking: measure the tuned settings without it too
    devices: list[str] = field(default_factory=list)  # GPUs to try against the tuned CPU settings
    gpu_deadline_s: float = DEFAULT_DEADLINE_S  # the GPU trial's time, all layer counts together
    gpu_notes: list[str] = field(default_factory=list)  # GPUs left out, and why (a failed driver check)
    sustained_s: float = 0.0  # > 0 (--sustained): the best settings compared over this many seconds
    window_s: float | None = None  # seconds per sustained window (None: default_window)
    # --speculation: candidates measured against plain on llama-server, per kind of text (bench/spec_trial.py)
    speculation: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> TuneRequest:
        if self.n_prompt < 1 or self.n_gen < 1:
            raise UserError("tune needs -p and -n of at least 1")
        if self.reps < 1:
            raise UserError("-r must be at least 1")
        if self.cooldown < 0:
            raise UserError("--cooldown must be 0 or more seconds")
        if self.sustained_s:
            self.window_s = self.window_s or default_window(self.sustained_s)
            if not 1.0 <= self.window_s <= self.sustained_s:
                raise UserError(f"--window must be between 1 s and the duration ({self.sustained_s:g} s)")
        return self


def run_tune(
    path: Path,
    req: TuneRequest,
    progress: Progress | None = None,
    verbose: bool = False,
    engine: str | None = None,
) -> TuneReport:
    """engine: "auto", "inprocess" or "tools" (each setting measured by llama.cpp's llama-bench)."""
    req.validate()
    gpu = bool(req.devices) and not req.sustained_s
    engine_info = choose_engine(engine, tool="llama-bench", gpu=gpu, fresh="failed")  # a crash: again
    if req.sustained_s and engine_info.kind == "tools":
        raise UserError(SUSTAINED_ENGINE)
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    t0 = time.perf_counter()
    report = progress or (lambda _d, _n, _t: None)
    model = model_id(path)
    cpu = read_cpu(Path("/"))
    device = device_id(cpu=cpu)
    allowed = allowed_cpus()
    sets = device_sets(cpu, allowed)
    n_cpus = len(sets[-1])
    estimate = req.reps * (len(sets) + 2 * math.ceil(math.log2(n_cpus + 1)) + 6)
    notes: list[str] = []
    if engine_info.no_repack and req.repack:  # it crashed with repacking on here (engine/cpu_check.py)
        req.repack, req.repack_trial = False, False
        notes.append(engine_info.cpu_note or "weight repacking crashed here: tuned without it")
    ubatches = ubatch_candidates(req.n_prompt)
    if len(ubatches) == 1:
        notes.append(
            f"ubatch not tuned: a {req.n_prompt}-token prompt cannot tell ubatches apart (use -p 256)"
        )
    sensors = Sensors.find()
    temp_start = sensors.temperature()

    bandwidth = machine_bandwidth(cpu=cpu)
    bpt = bytes_per_token(path)

    lab: EngineLab | ToolLab
    if engine_info.kind == "tools":
        tool = Path(str(engine_info.path))
        lab = ToolLab(path, tool, req.n_prompt, req.n_gen, verbose, req.cooldown, repack=req.repack)
    else:
        lab = EngineLab(path, req.n_prompt, req.n_gen, verbose, req.cooldown, repack=req.repack)
    search = Search(sets, lab, SearchConfig(reps=req.reps, ubatches=ubatches))
    sustained: SustainedTune | None = None
    try:
        with lab:

            def on_measure(cand, test):
                desc = (
                    f"{test} · {count(cand.n_threads, 'thread')} on {cpulist(cand.cpus)} · "
                    f"ub {cand.n_ubatch} · fa {int(cand.flash_attn)}"
                )
                report(desc, lab.reps, max(estimate, lab.reps + 1))

            lab.on_measure = on_measure
            result = search.run()
            report("done", lab.reps, lab.reps)
            if req.sustained_s and isinstance(lab, EngineLab):
                picks = pick_candidates(search, result)
                window = req.window_s or default_window(req.sustained_s)
                rounds = max(1, round(req.sustained_s / (window * len(picks))))
                sustained = SustainedTune(req.sustained_s, window, rounds, [])
                run_sustained_tune(lab, picks, sustained, report)
                choose(sustained)
                result = apply_choice(search, result, sustained, picks)
            measurements, loads, info = lab.reps, lab.loads, lab.model_info or {}
        gen, prompt = result.gen, result.prompt
        repack = None
        if req.repack and req.repack_trial and isinstance(lab, ToolLab) and not lab.can_repack():
            notes.append(f"repacking not measured: {lab.tool} has no --repack (an older llama.cpp)")
        elif req.repack and req.repack_trial:
            report("with and without weight repacking", lab.reps, lab.reps + 1)
            measure = partial(lab.repack_round, gen, prompt, req.reps) if isinstance(lab, ToolLab) else None
            repack = trial_repack(path, gen, prompt, req.n_prompt, req.n_gen, req.reps, verbose, measure)
            notes.append(repack.note)
            if isinstance(lab, ToolLab):
                loads = lab.loads  # its runs counted themselves
            elif repack.pp_ts:
                loads += 2 * ROUNDS
        gpu = None
        notes += req.gpu_notes
        if req.devices and isinstance(lab, ToolLab):
            gpu = _try_gpus(path, lab, req, gen, prompt, result.prompt_tps, result.gen_tps, report, notes)
            loads = lab.loads + len(gpu.points) - 1 if gpu else loads
        elif req.devices:
            tries = "" if req.sustained_s else " (`--engine tools` tries it)"
            notes.append(f"no GPU tried: the in-process engine is CPU-only{tries}")
    except KeyboardInterrupt:
        if not search.trials:  # nothing measured: nothing to keep
            raise
        stop = f"stopped by Ctrl-C after {len(search.trials)} settings: no profile saved"
        if sustained is not None:
            sustained.partial = True
            choose(sustained)  # each setting's windows summarized; nothing kept
            windows = sum(len(c.windows) for c in sustained.candidates)
            stop = f"stopped by Ctrl-C after {count(windows, 'sustained window')}: no profile saved"
        stopped = TuneReport(
            model=MeasuredModel.of(
                model, (lab.model_info or {}).get("type", ""), (lab.model_info or {}).get("n_params", 0)
            ),
            device=device,
            core_sets=[cpulist(s) for s in sets],
            gen={},
            prompt={},
            default_tg_ts=None,
            speedup_vs_default=None,
            knee=None,
            trials=[tune_trial(t) for t in search.trials],
            measurements=lab.reps,
            loads=lab.loads,
            seconds=round(time.perf_counter() - t0, 1),
            bandwidth_gbs=round(bandwidth.gb_per_s, 2),
            bytes_per_token=bpt,
            roofline=None,
            profile=None,
            profile_path=None,
            started=started,
            n_prompt=req.n_prompt,
            n_gen=req.n_gen,
            notes=[*notes, stop],
            engine=engine_info,
            partial=True,
            sustained=sustained,
        )
        return _stored(stopped, req)
    chosen = gpu.chosen if gpu else GpuPoint("none", 0, None, None)
    temp_end = sensors.temperature()
    warmed = temp_start is not None and temp_end is not None and temp_end - temp_start >= 5
    if warmed and sustained is None:  # sustained windows are meant to warm it
        notes.append(
            f"the CPU warmed from {temp_start:.0f} to {temp_end:.0f} °C during tuning; "
            "re-run with --cooldown 30 if the figures look uneven"
        )
    if result.knee_at is not None:
        notes.append(f"stopped at the knee: {cpulist(sets[result.knee_at])} was slower than fewer cores")

    speedup = round(result.speedup, 3) if result.speedup else None
    profile = Profile(
        device_fingerprint=device.fingerprint,
        device=device.description,
        model_key=model.key,
        model_name=model.name,
        model_size=model.size,
        n_threads=gen.n_threads,
        n_threads_batch=prompt.n_threads,
        cpus=list(gen.cpus),
        n_ubatch=prompt.n_ubatch,
        flash_attn=gen.flash_attn,
        gen_tps=round(result.gen_tps, 2),
        prompt_tps=round(result.prompt_tps, 2),
        created=started,
        n_prompt=req.n_prompt,
        n_gen=req.n_gen,
        prompt_cpus=list(prompt.cpus) if prompt.cpus != gen.cpus else [],
        repack=repack.pays if repack is not None else req.repack,
        offload_device=chosen.device,
        n_gpu_layers=chosen.n_gpu_layers,
        chosen_by="sustained" if sustained and sustained.kept else "burst",
        sustained_tps=sustained.kept.steady_ts if sustained and sustained.kept else None,
    )
    spec_trial = _speculation(path, profile, req, progress, notes) if req.speculation else None
    if spec_trial is not None:
        profile.speculation = spec_trial.kept()
    profile_path = str(save_profile(profile)) if req.save else None
    tune = TuneReport(
        model=MeasuredModel.of(model, info.get("type", ""), info.get("n_params", 0)),
        device=device,
        core_sets=[cpulist(s) for s in sets],
        gen={
            "n_threads": gen.n_threads,
            "cores": cpulist(gen.cpus),
            "flash_attn": gen.flash_attn,
            "tg_ts": round(result.gen_tps, 2),
        },
        prompt={
            "n_threads": prompt.n_threads,
            "cores": cpulist(prompt.cpus),
            "n_ubatch": prompt.n_ubatch,
            "flash_attn": prompt.flash_attn,
            "pp_ts": round(result.prompt_tps, 2),
        },
        default_tg_ts=round(result.default_tg, 2) if result.default_tg else None,
        speedup_vs_default=speedup,
        default_tg_reps=result.default_reps,
        knee=cpulist(sets[result.knee_at]) if result.knee_at is not None else None,
        trials=[tune_trial(t) for t in result.trials],
        measurements=measurements,
        loads=loads,
        seconds=round(time.perf_counter() - t0, 1),
        bandwidth_gbs=round(bandwidth.gb_per_s, 2) if bandwidth else None,
        bytes_per_token=bpt,
        roofline=roofline_fraction(
            result.gen_tps, read_per_token(bpt, kv_bytes_per_cell(path), req.n_gen / 2), bandwidth
        ),
        profile=asdict(profile),
        profile_path=profile_path,
        started=started,
        n_prompt=req.n_prompt,
        n_gen=req.n_gen,
        notes=notes,
        repack=repack,
        llama_cpp_args=decide(path, profile=profile).plan.llama_cpp_args,
        engine=engine_info,
        gpu=gpu,
        sustained=sustained,
        chosen_by=profile.chosen_by,
        speculation=spec_trial,
    )
    return _stored(tune, req)


def _speculation(path: Path, profile: Profile, req: TuneRequest, progress: Any, notes: list[str]) -> Any:
    """The speculation trial with the tuned settings (None, with a note, when it cannot run here)."""
    from edgepilot.bench.spec_hold import hold_kept
    from edgepilot.bench.spec_lengths import measure_favoured
    from edgepilot.bench.spec_trial import speculation_trial
    from edgepilot.engine.base import EngineError
    from edgepilot.engine.native_tools import find_tool

    try:
        tool = find_tool("llama-server")
        settings = decide(path, profile=profile).plan.settings
        say = (lambda msg: progress(msg, 0, 1)) if progress is not None else None
        n_gen = max(64, req.n_gen)  # drafts need room: a 32-token answer is one or two verify steps
        trial = speculation_trial(path, settings, req.speculation, n_gen=n_gen, progress=say, tool=tool)
        _predicted(trial, path, settings, req.speculation, say, notes)
        measure_favoured(trial, path, settings, req.speculation, say, tool)
        if req.sustained_s:  # judged on the steady speed too
            window = req.window_s or default_window(req.sustained_s)
            cpus = profile.cpus
            hold_kept(trial, path, settings, req.speculation, req.sustained_s, window, say, cpus, notes)
        return trial
    except (EngineError, UserError) as exc:
        notes.append(f"speculation not measured: {exc}")
        return None


def _predicted(trial: Any, path: Path, settings: Any, candidates: dict, say: Any, notes: list[str]) -> None:
    """The speed-up each candidate's acceptance predicts from this device's verify costs, measured in this
    process (bench/spec_costs.py); a note where they cannot be measured here (no in-process llama.cpp)."""
    from edgepilot.bench.spec_costs import DRAFT_SIZES, annotate, measure_costs
    from edgepilot.engine.base import EngineError
    from edgepilot.engine.choice import choose_engine

    try:
        choose_engine("inprocess")  # checked on this CPU first: a library that would crash it is not loaded
        if say is not None:
            say("speculation: the verify batch's cost, in this process")
        costs = measure_costs(path, settings)
        draft = candidates.get("draft")
        draft_costs = measure_costs(draft.draft, settings, sizes=DRAFT_SIZES) if draft else None
    except (EngineError, UserError, OSError) as exc:
        notes.append(f"speculation's speed-up not predicted: {exc}")
        return
    annotate(trial, candidates, costs, draft_costs)


def _stored(tune: TuneReport, req: TuneRequest) -> TuneReport:
    """The tune's measurements kept in the bench history (unless --no-save)."""
    if req.store:
        stored = as_bench_report(tune)
        tune.run_id = save_report(stored, kind="tune")
        tune.db_path = stored.db_path
    return tune


def _try_gpus(
    path: Path,
    lab: ToolLab,
    req: TuneRequest,
    gen: Any,
    prompt: Any,
    prompt_tps: float,
    gen_tps: float,
    report: Progress,
    notes: list[str],
) -> GpuTrial | None:
    """The first device of req.devices against the tuned CPU settings (tune's threads, CPUs, ubatch)."""
    from edgepilot.gguf.arch import arch_params
    from edgepilot.gguf.verdict import header_of

    device = req.devices[0]
    n_layer = arch_params(header_of(path).metadata).n_layer
    base = replace(
        lab.job(gen, "tg", req.reps),
        ubatch=[prompt.n_ubatch],
        threads=[gen.n_threads],
        n_batch=LLAMA_BENCH_BATCH,
    )
    cpu = GpuPoint("none", 0, prompt_tps, gen_tps)
    trial = trial_gpu(
        path,
        lab.tool,
        device,
        n_layer,
        cpu,
        base,
        list(gen.cpus),
        req.n_prompt,
        req.n_gen,
        req.gpu_deadline_s,
        on_step=lambda what: report(f"GPU trial · {what}", lab.reps, lab.reps + 1),
    )
    notes += trial.notes
    notes.append(trial_note(trial, req.n_prompt, req.n_gen))
    if len(req.devices) > 1:
        notes.append(f"only {device} was tried (of {', '.join(req.devices)}): --device NAME picks another")
    return trial
