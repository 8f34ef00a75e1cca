"""Human rendering of `bench --sustained`: one line per window, then the steady speed and the fall."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

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
    for w in report.windows:
        temp = "-" if w.temp_c is None else f"{w.temp_c:.0f}"
        table.add_row(f"{w.start_s:.0f}s", f"{w.tokens_per_s:.1f}", temp, _mhz(w.freq_mhz))
    out.print(table)
    if report.steady_ts is None:
        out.print("no window finished", markup=False)
        return
    out.print(f"first {report.first_ts:.1f} t/s, steady {report.steady_ts:.1f} t/s", markup=False)
    if report.fell_at_s is None:
        out.print("speed held (never 10 % below the first windows)", markup=False)
    else:
        fell = f"fell at {report.fell_at_s:.0f} s; steady is {report.drop_pct:.0f} % below the start"
        out.print(fell, markup=False)
    if report.partial:
        out.print(f"stopped by Ctrl-C after {len(report.windows)} windows", markup=False)
    if report.run_id is not None:
        out.print(f"saved as run {report.run_id}", style="dim", markup=False)
