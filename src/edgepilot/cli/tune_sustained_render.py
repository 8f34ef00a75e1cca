"""`tune --sustained`: each compared setting's burst speed beside the speed it held, the one kept, and why."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from edgepilot.words import count

if TYPE_CHECKING:
    from edgepilot.bench.tune_sustained import SustainedTune


def render_sustained_tune(s: SustainedTune, out: Console) -> None:
    from edgepilot.cli.narrow import Column, print_records, say

    temps = any(w.temp_c is not None for c in s.candidates for w in c.windows)
    heads = ["threads", "cores", "burst t/s", "steady t/s", "change", *(["°C"] if temps else []), ""]
    short = {"threads": "thr"}
    columns = [Column(h, numeric=h not in ("cores", ""), short=short.get(h, "")) for h in heads]
    cells, styles = [], []
    for c in s.candidates:
        change = "-"
        if c.steady_ts is not None and c.burst_ts:
            change = f"{(c.steady_ts / c.burst_ts - 1) * 100:+.0f} %"
        row = [
            str(c.n_threads),
            c.cores,
            f"{c.burst_ts:.2f}",
            "-" if c.steady_ts is None else f"{c.steady_ts:.2f}",
            change,
        ]
        if temps:
            hottest = max((w.temp_c for w in c.windows if w.temp_c is not None), default=None)
            row.append("-" if hottest is None else f"{hottest:.0f}")
        row.append("*" if c.chosen else ("b" if c.burst_pick else ""))
        cells.append(row)
        styles.append("bold" if c.chosen else None)
    windows = f"{count(s.rounds, 'window')} of {s.window_s:g} s each"
    print_records(out, columns, cells, title=f"burst vs sustained · {windows}", row_styles=styles)
    kept = s.kept
    if kept is not None:
        legend = "* kept: the best steady speed"
        say(out, legend if kept.burst_pick else f"{legend} · b: the burst pick", style="dim")
    for c in s.candidates:
        if c.fell_at_s is not None and c.drop_pct is not None:
            fell = f"{count(c.n_threads, 'thread')} fell {c.drop_pct:.0f} % at {c.fell_at_s:.0f} s"
            say(out, fell, style="dim")
    if s.why:
        say(out, f"sustained pick: {s.why}")
