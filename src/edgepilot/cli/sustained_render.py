"""Human rendering of `bench --sustained`: one line per window, the steady speed and the fall, the battery's
draw and tokens per joule, then a chart of speed and temperature over time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from edgepilot.shown import shown
from edgepilot.words import count

if TYPE_CHECKING:
    from edgepilot.bench.sustained import SustainedReport


def _mhz(freqs: list[int | None]) -> str:
    return "/".join("-" if f is None else str(f) for f in freqs) or "-"


def render_sustained(report: SustainedReport, out: Console) -> None:
    out.print(shown(f"sustained · {count(report.n_threads, 'thread')} · {report.model.name}"), markup=False)
    table = Table(box=None, pad_edge=False)
    table.add_column("at", justify="right")
    table.add_column("t/s", justify="right")
    table.add_column("°C", justify="right")
    table.add_column("MHz " + "/".join(report.clusters), overflow="fold")
    power = any(w.watts is not None for w in report.windows)
    if power:
        table.add_column("W", justify="right")
    for w in report.windows:
        temp = "-" if w.temp_c is None else f"{w.temp_c:.0f}"
        row = [f"{w.start_s:.0f}s", f"{w.tokens_per_s:.1f}", temp, _mhz(w.freq_mhz)]
        if power:
            row.append("-" if w.watts is None else f"{w.watts:.2f}")
        table.add_row(*row)
    out.print(table)
    if report.steady_ts is None:
        out.print("no window finished", markup=False)
        return
    out.print(f"first {report.first_ts:.1f} t/s, steady {report.steady_ts:.1f} t/s", markup=False)
    if report.fell_at_s is None:
        out.print("speed held (last window within 10 % of the first)", markup=False)
    else:
        fell = f"fell at {report.fell_at_s:.0f} s; steady is {report.drop_pct:.0f} % below the start"
        out.print(fell, markup=False)
    if report.tokens_per_joule is not None:
        line = f"battery draw {report.watts:.2f} W, {report.tokens_per_joule:.1f} tokens per joule"
        out.print(line, markup=False)
    if report.power_note:
        out.print(shown(report.power_note), markup=False)
    if report.partial:
        out.print(f"stopped by Ctrl-C after {len(report.windows)} windows", markup=False)
    _chart(report, out)
    if report.run_id is not None:
        out.print(f"saved as run {report.run_id}", style="dim", markup=False)
    if report.plot_png:
        out.print(f"plot: {shown(report.plot_png)}", style="dim", markup=False)


def chart_title(report: SustainedReport) -> str:
    return f"{report.model.name} · {count(report.n_threads, 'thread')}".strip(" ·")


def _chart(report: SustainedReport, out: Console) -> None:
    from edgepilot.bench.sustained_plot import terminal_chart, worth_charting

    if not worth_charting(report) or out.width < 40:
        return  # the table says it all; a chart this narrow does not
    title = shown(chart_title(report))
    text = terminal_chart(report, title, width=min(out.width, 110), color=out.is_terminal)
    if text:
        out.print(Text.from_ansi(text))
