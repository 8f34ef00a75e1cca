"""A sustained bench as a picture: tokens/s over time (left axis) and the CPU temperature (right axis).

Terminal: plotext, as bench's thread sweep (plot.py). PNG: matplotlib, the `plot` extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.bench.plot import require_matplotlib, write_png

if TYPE_CHECKING:
    from edgepilot.bench.sustained import SustainedReport

MINUTES_FROM = 600.0  # runs this long are drawn against minutes


def _time(report: SustainedReport) -> tuple[list[float], str]:
    """Each window's start, in seconds or (long runs) minutes, and the axis label."""
    starts = [w.start_s for w in report.windows]
    if starts and starts[-1] >= MINUTES_FROM:
        return [s / 60 for s in starts], "minutes"
    return starts, "seconds"


def _temps(report: SustainedReport, xs: list[float]) -> list[tuple[float, float]]:
    return [(x, w.temp_c) for x, w in zip(xs, report.windows, strict=True) if w.temp_c is not None]


def _ticks(xs: list[float], most: int) -> list[float]:
    """Window starts to mark on the time axis: every k-th, at most `most` (the first always)."""
    step = -(-len(xs) // most)
    return xs[::step]


def worth_charting(report: SustainedReport) -> bool:
    return len(report.windows) > 1


def terminal_chart(
    report: SustainedReport, title: str, width: int = 100, height: int = 14, color: bool = True
) -> str | None:
    """The windows as text; None if plotext (6) is not installed."""
    try:
        import plotext
    except ImportError:
        return None
    fig = getattr(plotext, "figure", None)
    if fig is None or not hasattr(fig, "signal"):
        return None  # plotext 5 has another API; the table says it all anyway
    xs, unit = _time(report)
    speeds = [w.tokens_per_s for w in report.windows]
    temps = _temps(report, xs)
    fig.clear()
    fig.draw(fig.signal(xs, speeds).lines())
    fig.label("t/s", axis="y")
    if temps:
        # dots, so that the two read apart without colour (a pipe, the docs); the title says which is which
        # (a legend box would cover a quarter of a 50-column chart)
        hot = fig.signal([x for x, _ in temps], [c for _, c in temps], yside="right", marker="·")
        fig.draw(hot.lines())
        fig.label("°C", axis="y", side="right")
    fig.plot_size(width, height)
    what = "t/s (line) and °C (dots) over time" if temps else "t/s over time"
    full = f"{title} · {what}"
    fig.title(full if len(full) <= width else what)  # plotext drops a title wider than the chart
    fig.label(unit, axis="x")
    ticks = _ticks(xs, max(2, (width - 10) // 8))
    fig.ruler("x").ticks(ticks, [f"{t:.0f}" if unit == "seconds" else f"{t:.3g}" for t in ticks])
    text = fig.build().string(colorless=not color)
    fig.clear()
    return text


def save_sustained_png(report: SustainedReport, path: Path, title: str) -> Path:
    pyplot = require_matplotlib()
    xs, unit = _time(report)
    temps = _temps(report, xs)
    fig, ax = pyplot.subplots(figsize=(7.2, 4.2))
    ax.plot(xs, [w.tokens_per_s for w in report.windows], marker="o", color="tab:blue", label="tokens / s")
    if report.steady_ts is not None:
        ax.axhline(report.steady_ts, color="tab:blue", linestyle=":", alpha=0.6, label="steady")
    if report.fell_at_s is not None:
        fell = report.fell_at_s / 60 if unit == "minutes" else report.fell_at_s
        ax.axvline(fell, color="grey", linestyle="--", alpha=0.6, label="fell")
    ax.set_xlabel(unit)
    ax.set_ylabel("tokens / s")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    top = ax
    if temps:
        hot = top = ax.twinx()
        celsius = [c for _, c in temps]
        hot.plot([x for x, _ in temps], celsius, color="tab:red", linestyle="--", label="CPU °C")
        hot.set_ylabel("°C")
        more, names = hot.get_legend_handles_labels()
        handles, labels = handles + more, labels + names
    top.legend(handles, labels, fontsize=8, loc="lower left", framealpha=0.9)  # above the twin axis's line
    ax.set_title(title, fontsize=10)
    return write_png(pyplot, fig, path)
