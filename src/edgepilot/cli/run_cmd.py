"""`edgepilot run`: thin CLI over edgepilot.run.runner.run_model."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

import click

from edgepilot.cli import flags
from edgepilot.cli.app import app, emit, err_console, user_errors
from edgepilot.cli.format import mib
from edgepilot.defaults import DEFAULT_PROMPT
from edgepilot.errors import UserError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from edgepilot.plan.requested import RequestedSettings
    from edgepilot.run.runner import RunResult


def render_summary(result: RunResult, out: Console) -> None:
    from rich.text import Text

    from edgepilot.cli.narrow import print_items, say

    s = result.settings
    if not result.interrupted:  # else the line was ended before "(stopped)"
        out.print()
    if result.plan is not None and result.plan.profile:
        say(out, result.plan.profile, style="dim")
    for note in result.notes:
        say(out, note, style="yellow")
    items: list[Text] = []
    if result.ttft_ms is not None:
        items.append(Text.assemble(("first token", "bold"), f" {result.ttft_ms:.0f} ms"))
    items += [
        Text.assemble(("prompt", "bold"), f" {result.n_prompt} tok @ {result.prompt_tps:.1f} t/s"),
        Text.assemble(("generation", "bold"), f" {result.n_gen} tok @ {result.gen_tps:.1f} t/s"),
        Text.assemble(("peak memory", "bold"), f" {mib(result.peak_rss_bytes)}"),
        *_speculation_item(result),
        *_bandwidth_item(result),
        *_thermal_item(result),
        Text(f"ctx {s.n_ctx}"),
        Text(f"threads {s.n_threads}{_while_hot(result)}"),
        Text(f"kv {s.type_k}/{s.type_v}"),
    ]
    if not s.on_cpu:
        items.append(Text(f"{s.device} -ngl {s.n_gpu_layers}"))
    if _engine_note(result):
        items.append(Text(_engine_note(result).removeprefix(" · ")))
    print_items(out, items, style="dim")


def _speculation_item(result: RunResult) -> list[Text]:
    """--lookup / --draft: how many drafted tokens the model kept, and tokens per verify step."""
    from rich.text import Text

    spec = result.speculation
    if not spec:
        return []
    rate, per_step = spec["acceptance_rate"], spec["tokens_per_step"]
    kept = f"{spec['accepted']}/{spec['drafted']} kept" + (f" ({rate:.0%})" if rate is not None else "")
    steps = f", {per_step:.2f} tok/step" if per_step is not None else ""
    return [Text.assemble((spec["kind"], "bold"), f" {kept}{steps}")]


def _bandwidth_item(result: RunResult) -> list[Text]:
    """Generation as a share of what the memory can read (bench says what a share means)."""
    from rich.text import Text

    if result.roofline is None:
        return []
    return [Text.assemble(("bandwidth", "bold"), f" {result.roofline:.0%} of limit")]


def _thermal_item(result: RunResult) -> list[Text]:
    """--max-temp: the hottest reading and how often the thread count changed (each said once already)."""
    from rich.text import Text

    t = result.thermal
    if t is None or t.peak_c is None:
        return []
    n = sum(s.n_threads is not None for s in t.switches)  # llama-server's crossings change no threads
    moves = f", {n} thread switch{'es' if n != 1 else ''}" if n else ""
    if t.switches and not n:
        moves = ", threads unchanged"
    return [Text.assemble(("cpu", "bold"), f" peak {t.peak_c:g} °C (limit {t.max_temp_c:g}){moves}")]


def _while_hot(result: RunResult) -> str:
    t = result.thermal
    return f" ({t.fewer_threads} while hot)" if t and t.switches and t.fewer_threads else ""


def _engine_note(result: RunResult) -> str:
    e = result.engine
    return f" · llama-server {e.version or '(version unknown)'}" if e and e.kind == "tools" else ""


class ThrottledOut:
    """Streamed text flushed at most every FLUSH_SECONDS (and at the end): a flush per token is a write
    system call per token, measurable against llama-completion on a small model; 50 ms is below what a
    reader notices. The text is unchanged."""

    FLUSH_SECONDS = 0.05

    def __init__(self, out: TextIO) -> None:
        self._out, self._last = out, time.perf_counter()

    def write(self, piece: str) -> None:
        self._out.write(piece)
        now = time.perf_counter()
        if now - self._last >= self.FLUSH_SECONDS:
            self._out.flush()
            self._last = now

    def flush(self) -> None:
        self._out.flush()


@app.command()
@flags.DEFAULT_MODEL
@click.option("-p", "--prompt", help=f"Prompt text (default: {DEFAULT_PROMPT!r})", metavar="TEXT")
@click.option("--prompt-file", help="Read the prompt from a file", metavar="FILE")
@click.option("-n", "--n-predict", default=128, help="Tokens to generate at most", metavar="N")
@flags.settings_flags
@flags.speculation_flags
@click.option("--temp", default=0.8, help="Sampling temperature (0 = greedy)", metavar="N")
@click.option("--seed", type=int, help="Sampling seed (default: random)", metavar="N")
@click.option("--raw", is_flag=True, help="Do not wrap the prompt in the model's chat template")
@flags.FORCE
@flags.BUDGET
@flags.NO_PRELOAD
@flags.VERBOSE
@flags.ENGINE
@flags.MAX_TEMP
@flags.WATCH_ROOT
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of streaming")
@click.option(
    "--rpc",
    help="HOST:PORT,... of `edgepilot rpc-server` helpers (runs the built llama-completion)",
    metavar="HOST:PORT,...",
)
@click.option(
    "--tensor-split",
    help="Share of the layers per --rpc helper (see `edgepilot cluster plan`)",
    metavar="SHARES",
)
@user_errors
def run(
    model: str | None,
    prompt: str | None,
    prompt_file: str | None,
    n_predict: int,
    requested: RequestedSettings,
    speculation: Any,
    temp: float,
    seed: int | None,
    raw: bool,
    force: bool,
    budget: str | None,
    no_preload: bool,
    verbose: bool,
    engine: str | None,
    max_temp: str | None,
    watch_root: str,
    as_json: bool,
    rpc: str | None,
    tensor_split: str | None,
) -> None:
    """Plan settings, load the model and stream a completion; ends with prompt/generation speed."""
    from edgepilot.cli.doctor_cmd import report_engine_failure
    from edgepilot.cli.fit_render import render_fit
    from edgepilot.engine.base import EngineError
    from edgepilot.engine.sampling import SamplerSettings
    from edgepilot.engine.thermal_guard import thermal_limit
    from edgepilot.plan.settings import MAX_TOKENS_SETTING
    from edgepilot.plan.types import DoesNotFit
    from edgepilot.run.runner import read_prompt, run_model  # loads llama.cpp: only when running

    thermal = thermal_limit(max_temp, watch_root)
    flags.check_range("--temp", temp, 0.0, 100.0)
    flags.check_range("--seed", seed, 0, 2**32 - 1)
    flags.check_range("-n", n_predict, 0, MAX_TOKENS_SETTING)
    text = read_prompt(prompt, prompt_file)
    if (rpc or tensor_split) and thermal is not None:
        raise UserError("--max-temp with --rpc: llama-completion's threads are fixed; leave one out")
    if (rpc or tensor_split) and speculation is not None:
        raise UserError("--lookup or --draft with --rpc: llama-completion over RPC runs without speculation")
    if rpc or tensor_split:
        return _run_rpc(model, text, n_predict, requested, temp, seed, rpc, tensor_split, as_json)
    sampler = SamplerSettings(temperature=temp, **({} if seed is None else {"seed": seed}))

    stream = ThrottledOut(sys.stdout)

    err = err_console()
    status = err.status("starting") if err.is_terminal and not verbose else None

    def stage_update(message: str) -> None:  # names the model file: text, never markup
        from rich.text import Text

        from edgepilot.shown import shown

        if status:
            status.update(Text(shown(message)))

    if status:
        status.start()
    try:

        def on_text(piece: str) -> None:
            nonlocal status
            if status:
                status.stop()
                status = None
            stream.write(piece)

        def warn(text: str) -> None:  # before the model loads: said once, on stderr
            from edgepilot.cli.narrow import say

            if not as_json:
                say(err, f"warning: {text}", style="yellow")

        def background(note: str) -> None:  # from a watch's thread, while tokens stream: its own lines
            from edgepilot.cli.narrow import say

            stream.flush()
            if sys.stdout.isatty():  # the streamed line ends first
                err.print()
            say(err, note, style="yellow")

        def preloading(done: int, total: int) -> None:
            if status:
                status.update(f"preloading into the page cache: {mib(done)} of {mib(total)}")
            elif done >= total and not as_json:
                err.print(f"preloaded {mib(total)} into the page cache", style="dim", markup=False)

        result = run_model(
            model,
            text,
            n_predict=n_predict,
            requested=requested,
            sampler=sampler,
            raw_prompt=raw,
            on_text=None if as_json else on_text,
            on_stage=stage_update if status else None,
            verbose=verbose,
            force=force,
            budget_bytes=flags.size_or_none(budget),
            warm=not no_preload,
            on_preload=preloading,
            engine=engine,
            on_warning=warn,
            on_background=background,
            thermal=thermal,
            on_thermal=background,
            speculation=speculation,
        )
    except DoesNotFit as refusal:
        if status:
            status.stop()
        render_fit(refusal.plan, err)
        raise
    except EngineError as failure:  # llama.cpp refused: say why and what to do (the doctor), exit 2
        if status:
            status.stop()
        raise report_engine_failure(failure, model, requested) from None
    finally:
        stream.flush()
        if status:
            status.stop()
    if result.interrupted and not as_json:  # the line ends where Ctrl-C stopped it, as chat's answers do
        sys.stdout.write("\n")
        sys.stdout.flush()
        err.print("(stopped)", markup=False)
    emit(result, as_json, render_summary)
    if result.interrupted:  # what was made is shown; the status still says a Ctrl-C ended it
        raise click.exceptions.Exit(130)


def _run_rpc(
    model: str | None,
    text: str,
    n_predict: int,
    requested: RequestedSettings,
    temp: float,
    seed: int | None,
    rpc: str | None,
    tensor_split: str | None,
    as_json: bool,
) -> None:
    from edgepilot.engine.rpc_args import parse_rpc, parse_tensor_split
    from edgepilot.run.rpc import run_over_rpc

    helpers = parse_rpc(rpc)
    if not helpers:
        raise UserError("--tensor-split needs --rpc HOST:PORT,...")
    split = parse_tensor_split(tensor_split, len(helpers))

    def stream(piece: str) -> None:
        sys.stdout.write(piece)
        sys.stdout.flush()

    result = run_over_rpc(
        model, text, n_predict, requested, helpers, split, temp, seed, None if as_json else stream
    )
    if as_json:
        emit(result, True, lambda _r, _c: None)
    else:
        sys.stdout.write("\n")
        err_console().print(
            f"{result.wall_seconds:.1f} s over {len(helpers)} RPC helper{'s' if len(helpers) > 1 else ''}",
            style="dim",
        )
