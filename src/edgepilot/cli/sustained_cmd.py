"""`edgepilot bench --sustained DURATION`: the CLI side (flags checked, progress, the history, the table)."""

from __future__ import annotations

from pathlib import Path

from edgepilot.cli.app import emit
from edgepilot.cli.bench_progress import exit_if_stopped, progress_bar, said_stopped
from edgepilot.errors import UserError


def sustained_bench(
    model: str | None,
    duration_text: str,
    window: float | None,
    threads: str | None,
    no_save: bool,
    as_json: bool,
    engine: str | None,
    verbose: bool,
    plot: Path | None = None,
) -> None:
    from edgepilot.bench.ranges import parse_int_list
    from edgepilot.bench.sustained import run_sustained
    from edgepilot.cli.sustained_render import render_sustained
    from edgepilot.gguf.resolve import resolve_model
    from edgepilot.sizes import parse_duration

    duration = parse_duration(duration_text, what="--sustained", minimum=2.0)
    n_threads = None
    if threads:
        counts = parse_int_list(threads, "-t", minimum=1)
        if len(counts) != 1:
            raise UserError("--sustained measures one thread count: give -t N")
        n_threads = counts[0]
    window = window if window is not None else min(10.0, max(2.0, duration / 10))
    path = resolve_model(model)
    if not no_save:
        from edgepilot.bench.store import check_writable

        check_writable()
    with progress_bar("sustained") as update:
        report = run_sustained(path, duration, window, n_threads, update, verbose=verbose, engine=engine)
    if not no_save and report.windows:
        from edgepilot.bench.sustained_store import save_sustained

        save_sustained(report)
    if plot is not None and report.windows:
        from edgepilot.bench.sustained_plot import save_sustained_png
        from edgepilot.cli.sustained_render import chart_title

        report.plot_png = str(save_sustained_png(report, plot, chart_title(report)))
    said_stopped(report.partial)
    emit(report, as_json, render_sustained)
    exit_if_stopped(report.partial)
