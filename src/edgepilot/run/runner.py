"""Run one prompt through a model with decided settings and measure it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from edgepilot.defaults import DEFAULT_PROMPT
from edgepilot.device.background_watch import BackgroundWatch
from edgepilot.engine import interrupts
from edgepilot.engine.base import GenerationStats
from edgepilot.engine.choice import EngineInfo, choose_engine, open_engine
from edgepilot.engine.preload import Preload, preload, skip_reason
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.engine.speculation import Speculation, speculating_engine
from edgepilot.engine.thermal_guard import ThermalLimit, ThermalReport, guarding
from edgepilot.errors import UserError
from edgepilot.gguf.resolve import resolve_model
from edgepilot.plan.commands import llama_cpp_command
from edgepilot.plan.requested import RequestedSettings
from edgepilot.plan.roofline import generation_share
from edgepilot.plan.settings import EngineSettings
from edgepilot.plan.types import DoesNotFit, FitResult
from edgepilot.tuned.bandwidth_cache import machine_bandwidth
from edgepilot.tuned.calibrate import learn_from_run
from edgepilot.tuned.decide import decide
from edgepilot.tuned.speculation_auto import AutoSpeculation, resolve_auto
from edgepilot.untrusted import read_user_file

MAX_PROMPT_FILE_BYTES = 16 << 20  # far beyond any context window (128k tokens is ~0.5 MiB of text)


@dataclass
class RunResult:
    text: str
    n_prompt: int
    n_gen: int
    prompt_tps: float
    gen_tps: float
    settings: EngineSettings  # as llama.cpp made them (context padded, batch clamped)
    peak_rss_bytes: int
    model: str
    prompt_seconds: float
    gen_seconds: float
    load_seconds: float
    stopped_by: str
    chat_template: bool
    llama_cpp_args: list[str] = field(default_factory=list)
    plan: FitResult | None = None
    # time to first token: from the start of prompt processing to the first generated token (None: -n 0)
    ttft_ms: float | None = None
    preload: Preload | None = None  # the page-cache warm-up before loading (None: off or skipped)
    preload_skipped: str | None = None  # why it did not run, when it was asked for
    engine: EngineInfo | None = None  # which llama.cpp ran it (in-process or its own programs)
    llama_log: list[str] = field(default_factory=list, repr=False, metadata={"json": False})
    notes: list[str] = field(default_factory=list)  # the GPU decision and what the engine had to do
    warnings: list[str] = field(default_factory=list)  # the context's limits, said before the run
    interrupted: bool = False  # Ctrl-C ended the generation: text and figures are what it made until then
    # generation as a share of the memory's read bandwidth limit (on the CPU; None when not known)
    roofline: float | None = None
    bandwidth_gbs: float | None = None
    background: list[str] = field(default_factory=list)  # said while it ran: Android moved it (once a class)
    thermal: ThermalReport | None = None  # --max-temp: the readings, each thread switch, what was said
    # --lookup / --draft: {kind, drafted, accepted, acceptance_rate, tokens_per_step} (None: not speculating)
    speculation: dict[str, Any] | None = None


def read_prompt(prompt: str | None, prompt_file: str | None) -> str:
    if prompt is not None and prompt_file is not None:
        raise UserError("give either -p/--prompt or --prompt-file, not both")
    if prompt_file is not None:
        data = read_user_file(prompt_file, "prompt file", MAX_PROMPT_FILE_BYTES)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise UserError(f"prompt file {prompt_file} is not UTF-8 text") from None
    return DEFAULT_PROMPT if prompt is None else prompt


def run_model(
    model: str | None,
    prompt: str,
    n_predict: int = 128,
    requested: RequestedSettings | None = None,
    sampler: SamplerSettings | None = None,
    raw_prompt: bool = False,
    on_text: Callable[[str], None] | None = None,
    on_stage: Callable[[str], None] | None = None,
    verbose: bool = False,
    force: bool = False,
    budget_bytes: int | None = None,
    warm: bool = True,
    on_preload: Callable[[int, int], None] | None = None,
    engine: str | None = None,
    on_warning: Callable[[str], None] | None = None,
    on_background: Callable[[str], None] | None = None,
    thermal: ThermalLimit | None = None,
    on_thermal: Callable[[str], None] | None = None,
    speculation: Speculation | AutoSpeculation | None = None,
) -> RunResult:
    """warm: read the model into the page cache before loading it, when it fits memory (engine.preload).
    engine: "auto", "inprocess" or "tools" (engine.choice). on_warning: told each of the plan's warnings
    (a context above the trained one, a rounded one) before the model loads. on_background: told, while it
    runs, when Android moves the process to a class it kills first (device/background_watch.py).
    thermal: --max-temp; on_thermal is told when generation moves to fewer threads and back
    (engine/thermal_guard.py)."""
    if n_predict < 0:
        raise UserError("-n must be 0 or more")
    stage = on_stage or (lambda _msg: None)
    auto_note = None
    if isinstance(speculation, AutoSpeculation):  # what tune kept for this kind of text, or plain
        text_kind = "rewrite" if raw_prompt else "chat"
        speculation, auto_note = resolve_auto(speculation, resolve_model(model), text_kind)
    engine = speculating_engine(engine, speculation)
    info = choose_engine(engine, gpu=requested is not None and requested.wants_gpu, progress=stage)
    stage("locating model")
    path = resolve_model(model)
    stage("planning memory")
    # A rough token count (about 3 bytes per token) so the context holds the prompt and the reply.
    ctx_needed = len(prompt.encode("utf-8")) // 3 + n_predict + 64
    decision = decide(
        path, requested, ctx_needed=ctx_needed, budget_bytes=budget_bytes, engine=info,
        speculation=speculation,
    )  # fmt: skip
    plan = decision.plan
    if not plan.fits and not force:
        raise DoesNotFit(plan)
    for warning in plan.warnings if on_warning is not None else []:
        on_warning(warning)
    settings = plan.settings
    # before pinning (the kept figure is for every CPU this process may use): measured once per device
    bandwidth = machine_bandwidth() if settings.on_cpu else None
    on_phase = decision.pin()  # before llama.cpp starts threads: they inherit the set
    warmed, skipped = None, skip_reason(plan.fits, settings.use_mmap) if warm else None
    if warm and skipped is None:
        stage(f"preloading {path.name}")
        warmed = preload(path, on_preload)
    stage(f"loading {path.name}")
    pieces: list[str] = []

    watch = BackgroundWatch(on_background)
    with (
        watch,
        open_engine(info, path, settings, verbose, decision.cpus, decision.prompt_cpus, speculation) as llama,
        guarding(thermal, [llama], on_thermal) as guard,
    ):
        formatted = None if raw_prompt else llama.chat_prompt(prompt)
        tokens = llama.tokenize(formatted if formatted is not None else prompt)
        stage("generating")
        with interrupts.stops_generation() as stopped:  # Ctrl-C keeps what was generated

            def collect(text: str) -> bool:
                pieces.append(text)
                if on_text is not None:
                    on_text(text)
                return stopped()  # True ends the generation here

            stats = llama.generate(tokens, n_predict, sampler=sampler, on_text=collect, on_phase=on_phase)
            interrupted = stopped()
        peak = llama.peak_rss_bytes()
        if llama.kind == "tools" and speculation is None:  # a draft: not the plan
            learn_from_run(info, path, plan, llama, peak, stats.n_prompt + stats.n_gen)
        return RunResult(
            text="".join(pieces),
            n_prompt=stats.n_prompt,
            n_gen=stats.n_gen,
            prompt_tps=round(stats.prompt_tps, 2),
            gen_tps=round(stats.gen_tps, 2),
            # llama.cpp pads the context (to 256 cells) and clamps the batch to it: report what it made.
            settings=replace(
                settings, n_ctx=llama.load.n_ctx, n_batch=llama.load.n_batch, n_ubatch=llama.load.n_ubatch
            ),
            peak_rss_bytes=peak,
            model=str(path),
            prompt_seconds=round(stats.prompt_seconds, 4),
            gen_seconds=round(stats.gen_seconds, 4),
            load_seconds=round(llama.load.seconds, 4),
            stopped_by=stats.stopped_by,
            chat_template=formatted is not None,
            llama_cpp_args=llama_cpp_command(
                path,
                settings,
                cpus=decision.cpus,
                prompt_cpus=decision.prompt_cpus,
                extra=["-n", str(n_predict), *getattr(llama, "speculation_argv", [])],
            ),
            plan=plan,
            ttft_ms=None if stats.first_token_seconds is None else round(stats.first_token_seconds * 1e3, 2),
            preload=warmed,
            preload_skipped=skipped,
            engine=info,
            llama_log=llama.load.log,
            notes=plan.engine_notes
            + plan.gpu_notes
            + list(getattr(llama, "notes", []))
            + nothing_generated(
                stats, "".join(pieces), n_predict, raw_prompt, formatted is not None, interrupted
            )
            + [note for note in (auto_note, decision.speculation_note) if note],
            warnings=list(plan.warnings),
            interrupted=interrupted,
            roofline=generation_share(path, settings, stats.n_prompt, stats.n_gen, stats.gen_tps, bandwidth),
            bandwidth_gbs=round(bandwidth.gb_per_s, 2) if bandwidth else None,
            background=watch.notes,
            thermal=guard.report() if guard is not None else None,
            speculation=None if stats.speculation is None else stats.speculation.to_json(),
        )


def nothing_generated(
    stats: GenerationStats, text: str, n_predict: int, raw: bool, templated: bool, interrupted: bool
) -> list[str]:
    """Why a run made no text, as a note (none when it made some). llama-server counts an end-of-generation
    token it stopped at: one token and no text is the same as none."""
    if text:
        return []
    if n_predict == 0:
        return ["no text generated: -n 0 asks for none (the prompt was processed and timed)"]
    if interrupted:
        return ["no text generated: stopped by Ctrl-C before the first token"]
    if stats.stopped_by == "eog":
        other = (
            "without --raw (the chat template)" if raw else "--raw (plain continuation)" if templated else ""
        )
        return [
            "no text generated: the model's first token was end-of-generation (to it the text reads as "
            f"finished): rephrase the prompt{', or try ' + other if other else ''}"
        ]
    if stats.stopped_by == "context":
        return [
            f"no text generated: the prompt's {stats.n_prompt} tokens fill the context; use a larger --ctx "
            "or a shorter prompt"
        ]
    if stats.n_gen:
        return [f"no text generated: the {stats.n_gen} tokens generated have no text (special tokens)"]
    return [f"no text generated (llama.cpp stopped: {stats.stopped_by})"]
