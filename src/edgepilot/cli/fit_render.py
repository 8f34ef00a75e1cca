"""Show a memory plan: what takes the memory (table + bars), the verdict, the commands, the alternatives
(rich is imported to render, so `fit --json` never loads it)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from edgepilot.cli.format import mib

if TYPE_CHECKING:
    from rich.console import Console

    from edgepilot.plan.types import FitResult

BAR_WIDTH = 30


def _bar(part: int, whole: int) -> str:
    filled = round(BAR_WIDTH * part / whole) if whole > 0 else 0
    return "█" * min(filled, BAR_WIDTH)


def render_fit(plan: FitResult, out: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    m, s = plan.memory, plan.settings
    verdict = "[green]fits[/]" if plan.fits else "[red]does not fit[/]"
    out.print(f"[bold]{escape(str(plan.model))}[/]")
    out.print(
        f"{verdict}: predicted peak {mib(m.peak_rss_bytes)} of a {mib(plan.budget_bytes)} budget "
        f"({escape(plan.budget.source)}, {mib(plan.budget.margin_bytes)} kept free)",
        soft_wrap=True,
    )
    weights_kind = "mapped file pages" if s.use_mmap else "anonymous copy (--no-mmap)"
    rows = [
        ("weights", m.weights_bytes, weights_kind),
        ("repacked weights", m.repack_bytes, "CPU_REPACK copy for this CPU's fast kernels"),
        ("KV cache", m.kv_bytes, f"{s.n_ctx} cells, {s.type_k}/{s.type_v}"),
        ("compute (touched)", m.compute_touched_bytes, f"of {mib(m.compute_reserved_bytes)} reserved"),
        ("output", m.output_bytes, "logits row"),
        ("runtime", m.runtime_bytes, "interpreter, llama.cpp, vocabulary"),
    ]
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("what")
    table.add_column("MiB", justify="right")
    table.add_column("share of peak")
    table.add_column("note", style="dim")
    for name, size, note in rows:
        table.add_row(name, f"{size / 2**20:.1f}", _bar(size, m.peak_rss_bytes), note)
    table.add_row(
        "[bold]peak (RSS)[/]",
        f"[bold]{m.peak_rss_bytes / 2**20:.1f}[/]",
        "",
        "what lmkd / the OOM killer see",
    )
    table.add_row("reserved", f"{m.reserved_bytes / 2**20:.1f}", "", "sum of llama.cpp's buffers (virtual)")
    out.print(table)
    out.print(
        f"settings: ctx {s.n_ctx} · batch {s.n_batch} · ubatch {s.n_ubatch} · kv {s.type_k}/{s.type_v} · "
        f"flash attn {'on' if s.flash_attn else 'off'} · mmap {'on' if s.use_mmap else 'off'} · "
        f"repack {'on' if s.repack else 'off'} · threads {s.n_threads}"
        + (
            f" (prompt {s.n_threads_batch})" if s.n_threads_batch and s.n_threads_batch != s.n_threads else ""
        ),
        soft_wrap=True,
    )
    if plan.engine is not None:
        e = plan.engine
        where = "in-process" if e.get("kind") == "inprocess" else "llama.cpp's programs"
        out.print(f"engine: {where} · {e.get('version') or 'version unknown'}", soft_wrap=True, markup=False)
    for trade in plan.trade_offs:
        out.print(f"to fit: {trade}", style="yellow", soft_wrap=True, markup=False)
    out.print(f"largest context that fits: {plan.max_ctx or 'none'}")
    out.print("llama.cpp:", shlex.join(plan.llama_cpp_args), style="cyan", soft_wrap=True, markup=False)
    out.print("edgepilot:", shlex.join(plan.edgepilot_args), style="cyan", soft_wrap=True, markup=False)
    if plan.alternatives:
        alt = Table(title="alternatives", title_justify="left", show_edge=False)
        alt.add_column("option")
        alt.add_column("peak MiB", justify="right")
        alt.add_column("fits")
        for a in plan.alternatives:
            alt.add_row(a.description, f"{a.peak_rss_bytes / 2**20:.0f}", "yes" if a.fits else "no")
        out.print(alt)
    for note in plan.notes:
        out.print(f"note: {note}", style="dim", soft_wrap=True, markup=False)
