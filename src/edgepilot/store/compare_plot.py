"""`compare --plot PNG`: quality and memory against file size, one point per variant (matplotlib, the optional
`plot` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.errors import UserError
from edgepilot.file_errors import writable_folder
from edgepilot.safe_write import atomic_write, check_target

if TYPE_CHECKING:
    from edgepilot.store.compare_types import CompareResult

MIB = 1 << 20
PLOT_FIX = "give --plot a path in a folder you can write"


def check_plot_target(path: str) -> None:
    """Before minutes of measuring: a .png name, its folder exists and is writable, matplotlib is there."""
    if Path(path).suffix.lower() != ".png":
        raise UserError(f"--plot {path}: give a file name ending in .png")
    target = Path(path).expanduser()
    writable_folder(target.parent, "the plot", PLOT_FIX, make=False)
    check_target(target, what="--plot")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError("--plot needs matplotlib: pip install 'edgepilot[plot]'") from None


def write_png(result: CompareResult, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    rows = sorted(result.rows, key=lambda r: r.file_bytes)
    sizes = [r.file_bytes / MIB for r in rows]
    labels = [r.file_type or r.name for r in rows]
    fig, axes = pyplot.subplots(1, 3, figsize=(15, 4.4))
    panels = [
        ("perplexity", [r.perplexity for r in rows], "perplexity (lower is better)"),
        (
            "KL divergence",
            [r.kl_mean if r.kl_mean is not None else 0.0 for r in rows],
            "mean KL vs reference",
        ),
        ("peak memory", [r.measured_peak_bytes / MIB for r in rows], "MiB (measured; x = predicted)"),
    ]
    for ax, (title, values, ylabel) in zip(axes, panels, strict=True):
        ax.plot(sizes, values, marker="o")
        for x, y, label in zip(sizes, values, labels, strict=True):
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        ax.set_title(title)
        ax.set_xlabel("file size (MiB)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[2].scatter(sizes, [r.predicted_peak_bytes / MIB for r in rows], marker="x", color="black")
    fig.suptitle(
        f"{Path(result.reference).name}: variants on {result.text} ({result.n_scored} tokens)", fontsize=10
    )
    fig.tight_layout()
    try:
        inputs = [r.path for r in rows]
        with atomic_write(Path(path).expanduser(), inputs=inputs, what="plot", fix=PLOT_FIX) as f:
            fig.savefig(f, format="png", dpi=120)
    finally:
        pyplot.close(fig)
