"""`edgepilot run`: thin CLI over edgepilot.run.runner.run_model."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from edgepilot.cli import flags
from edgepilot.cli.app import app, console, emit, err_console, user_errors
from edgepilot.cli.doctor_cmd import report_engine_failure
from edgepilot.cli.fit_render import render_fit
from edgepilot.cli.format import mib
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.plan.requested import RequestedSettings
from edgepilot.plan.settings import MAX_TOKENS_SETTING

if TYPE_CHECKING:
    from edgepilot.run.runner import RunResult


def render_summary(result: RunResult, out: Console) -> None:
    s = result.settings
    out.print()
    out.print(
        f"[bold]prompt[/] {result.n_prompt} tok @ {result.prompt_tps:.1f} t/s · "
        f"[bold]generation[/] {result.n_gen} tok @ {result.gen_tps:.1f} t/s · "
        f"[bold]peak memory[/] {mib(result.peak_rss_bytes)} · "
        f"ctx {s.n_ctx} · threads {s.n_threads} · kv {s.type_k}/{s.type_v}",
        style="dim",
        soft_wrap=True,
    )


@app.command()
@user_errors
def run(
    model: str | None = flags.DEFAULT_MODEL,
    prompt: str | None = typer.Option(None, "-p", "--prompt", help="Prompt text"),
    prompt_file: str | None = typer.Option(None, "--prompt-file", help="Read the prompt from a file"),
    n_predict: int = typer.Option(128, "-n", "--n-predict", help="Tokens to generate at most"),
    ctx: int | None = flags.CTX,
    batch: int | None = flags.BATCH,
    ubatch: int | None = flags.UBATCH,
    kv: str | None = flags.KV,
    flash_attn: bool | None = flags.FLASH_ATTN,
    threads: int | None = flags.THREADS,
    no_mmap: bool = flags.NO_MMAP,
    no_repack: bool = flags.NO_REPACK,
    temp: float = typer.Option(0.8, "--temp", help="Sampling temperature (0 = greedy)"),
    seed: int | None = typer.Option(None, "--seed", help="Sampling seed (default: random)"),
    raw: bool = typer.Option(False, "--raw", help="Do not wrap the prompt in the model's chat template"),
    force: bool = flags.FORCE,
    budget: str | None = flags.BUDGET,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show llama.cpp's own log"),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of streaming"),
) -> None:
    """Plan settings, load the model and stream a completion; ends with prompt/generation speed."""
    from edgepilot.engine.inprocess import EngineError
    from edgepilot.plan.types import DoesNotFit
    from edgepilot.run.runner import read_prompt, run_model  # loads llama.cpp: only when running

    flags.check_range("--temp", temp, 0.0, 100.0)
    flags.check_range("--seed", seed, 0, 2**32 - 1)
    flags.check_range("-n", n_predict, 0, MAX_TOKENS_SETTING)
    text = read_prompt(prompt, prompt_file)
    requested = RequestedSettings.from_flags(ctx, batch, ubatch, kv, flash_attn, no_mmap, threads, no_repack)
    sampler = SamplerSettings(temperature=temp, **({} if seed is None else {"seed": seed}))

    def stream(piece: str) -> None:
        sys.stdout.write(piece)
        sys.stdout.flush()

    status = err_console.status("starting") if err_console.is_terminal and not verbose else None
    stage_update = (lambda msg: status.update(msg)) if status else None
    if status:
        status.start()
    try:

        def on_text(piece: str) -> None:
            if status:
                status.stop()
            stream(piece)

        result = run_model(
            model,
            text,
            n_predict=n_predict,
            requested=requested,
            sampler=sampler,
            raw_prompt=raw,
            on_text=None if as_json else on_text,
            on_stage=stage_update,
            verbose=verbose,
            force=force,
            budget_bytes=flags.size_or_none(budget),
        )
    except DoesNotFit as refusal:
        if status:
            status.stop()
        render_fit(refusal.plan, err_console)
        raise
    except EngineError as failure:  # llama.cpp refused: say why and what to do (the doctor), exit 2
        if status:
            status.stop()
        raise report_engine_failure(failure, model, requested) from None
    finally:
        if status:
            status.stop()
    emit(result, as_json, lambda r, out: render_summary(r, out))


__all__ = ["run", "console"]
