"""The thread sweep as a picture: tokens/s against threads, one line per core set (and per test).

Terminal: plotext (6 compiles a C++ kernel; not installed on Android). PNG: matplotlib, the `plot` extra.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgepilot.errors import UserError
from edgepilot.safe_write import atomic_write

NO_MATPLOTLIB = "--plot needs matplotlib: pip install 'edgepilot[plot]'"


@dataclass
class Series:
    label: str  # "tg32 · cores 4-7"
    test: str  # "pp" | "tg"
    points: list[tuple[int, float]]  # (threads, tokens/s), threads ascending


def sweep_series(points: list[tuple[str, str, str, int, float]]) -> list[Series]:
    """(test kind, test label, cores, threads, t/s) tuples -> one series per (test, cores), best per x."""
    grouped: dict[tuple[str, str, str], dict[int, float]] = defaultdict(dict)
    for kind, test, cores, threads, ts in points:
        line = grouped[(kind, test, cores)]
        line[threads] = max(ts, line.get(threads, 0.0))
    series = [
        Series(f"{test} · cores {cores or 'all'}", kind, sorted(line.items()))
        for (kind, test, cores), line in grouped.items()
    ]
    return sorted(series, key=lambda s: (s.test != "tg", s.label))


def worth_plotting(series: list[Series]) -> bool:
    return any(len(s.points) > 1 for s in series)


def terminal_plot(
    series: list[Series], title: str, width: int = 100, height: int = 16, color: bool = True
) -> str | None:
    """The sweep as text (one chart per test kind); None if plotext is not installed."""
    try:
        import plotext
    except ImportError:
        return None
    fig = getattr(plotext, "figure", None)  # plotext 6: one module-level figure, built as a string
    if fig is None or not hasattr(fig, "signal"):
        return None  # plotext 5 has another API; the table says it all anyway
    charts = []
    for kind in ("tg", "pp"):
        lines = [s for s in series if s.test == kind]
        if not lines:
            continue
        fig.clear()
        for s in lines:
            fig.draw(fig.signal([x for x, _ in s.points], [y for _, y in s.points]).lines().label(s.label))
        fig.plot_size(width, height)
        x, y, ha, va = legend_corner(lines, width, height)
        fig.legend(x=x, y=y, ha=ha, va=va, relative=True)
        what = f"{'generation' if kind == 'tg' else 'prompt'} t/s vs threads"
        full = f"{title} · {what}"
        fig.title(full if len(full) <= width else what)  # plotext drops a title wider than the chart
        fig.label("threads", axis="x")
        fig.ruler("x").ticks(sorted({x for s in lines for x, _ in s.points}))
        charts.append(fig.build().string(colorless=not color))
    fig.clear()
    return "\n".join(charts)


def legend_corner(lines: list[Series], width: int, height: int) -> tuple[float, float, str, str]:
    """Where the legend goes: (x, y) in data units and its alignments, the canvas corner whose legend box
    covers the fewest points of the lines and never the best one (the fastest setting: what the chart is
    for). plotext's own place, the top left, hides it whenever fewer threads are faster."""
    points = [p for s in lines for p in s.points]
    xs, ys = [x for x, _ in points], [y for _, y in points]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    cols, rows = max(width - 9, 1), max(height - 5, 1)  # the canvas: less the y ticks, title, frame, x axis
    box_w = (max(len(s.label) for s in lines) + 6) / cols  # the box: frame, marker and label, as a fraction
    box_h = (2 * len(lines) + 2) / rows

    def at(x: float, y: float) -> tuple[float, float]:  # 0..1 across, 0..1 up
        return ((x - x0) / (x1 - x0) if x1 > x0 else 0.5), ((y - y0) / (y1 - y0) if y1 > y0 else 0.5)

    samples = []  # the lines as drawn: their points and 20 steps along each segment
    for s in lines:
        for (xa, ya), (xb, yb) in zip(s.points, s.points[1:], strict=False):
            samples += [at(xa + (xb - xa) * k / 20, ya + (yb - ya) * k / 20) for k in range(21)]
        samples += [at(*p) for p in s.points]
    best = at(*max(points, key=lambda p: p[1]))
    corners = []
    for right in (False, True):
        for top in (True, False):

            def inside(u: float, v: float, right: bool = right, top: bool = top) -> bool:
                across = u >= 1 - box_w if right else u <= box_w
                up = v >= 1 - box_h if top else v <= box_h
                return across and up

            covered = sum(inside(u, v) for u, v in samples) + (len(samples) + 1) * inside(*best)
            place = (
                x1 if right else x0,
                y1 if top else y0,
                "right" if right else "left",
                "top" if top else "bottom",
            )
            corners.append((covered, place))
    return min(corners, key=lambda c: c[0])[1]


def check_matplotlib() -> None:
    """Refuse --plot before anything is measured when matplotlib is missing (found, not imported)."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise UserError(NO_MATPLOTLIB)


def require_matplotlib() -> Any:  # matplotlib.pyplot, typed only where it is installed
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot
    except ImportError:
        raise UserError(NO_MATPLOTLIB) from None
    return pyplot


def save_png(series: list[Series], path: Path, title: str) -> Path:
    pyplot = require_matplotlib()
    kinds = [k for k in ("tg", "pp") if any(s.test == k for s in series)]
    fig, axes = pyplot.subplots(1, len(kinds), figsize=(6.4 * len(kinds), 4.4), squeeze=False)
    for ax, kind in zip(axes[0], kinds, strict=True):
        for s in (s for s in series if s.test == kind):
            ax.plot([x for x, _ in s.points], [y for _, y in s.points], marker="o", label=s.label)
        ax.set_title(("generation" if kind == "tg" else "prompt processing") + " speed")
        ax.set_xlabel("threads")
        ax.set_ylabel("tokens / s")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    return write_png(pyplot, fig, path)


def write_png(pyplot: Any, fig: Any, path: Path) -> Path:
    """The figure laid out and written to `path` atomically, then closed."""
    fig.tight_layout()
    try:
        with atomic_write(path, what="plot") as f:
            fig.savefig(f, format="png", dpi=120)
    finally:
        pyplot.close(fig)
    return path
