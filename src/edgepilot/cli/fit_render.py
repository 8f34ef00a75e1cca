"""Show a memory plan: what takes the memory (table + bars), the verdict, the commands, the alternatives
(rich is imported to render, so `fit --json` never loads it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgepilot.cli.format import mib

if TYPE_CHECKING:
    from rich.console import Console

    from edgepilot.plan.settings import EngineSettings
    from edgepilot.plan.types import FitResult, OpenCLAdvice

BAR_WIDTH = 30


def _bar(part: int, whole: int) -> str:
    filled = round(BAR_WIDTH * part / whole) if whole > 0 else 0
    return "█" * min(filled, BAR_WIDTH)


def _work_note(s: EngineSettings) -> str:
    what = "flash attention's scratch" if s.flash_attn else "the scores as f16 for V"
    return f"{what}, outside the reserve"


def render_fit(plan: FitResult, out: Console) -> None:
    from rich.text import Text

    from edgepilot.cli.budget_line import print_account
    from edgepilot.cli.narrow import Column, print_command, print_items, print_records, say
    from edgepilot.plan.context_limits import padded_ctx

    m, s = plan.memory, plan.settings
    verdict = Text("fits", style="green") if plan.fits else Text("does not fit", style="red")
    say(out, plan.model, style="bold")  # a path wider than the screen stays whole
    peak = f": predicted peak {mib(m.peak_rss_bytes)}"
    of_budget = f" of a {mib(plan.budget_bytes)} budget"
    if verdict.cell_len + len(peak + of_budget) > out.width:
        of_budget = ""  # the account below starts with the budget
    out.print(Text.assemble(verdict, peak + of_budget))
    print_account(out, plan.budget.account_terms or [plan.budget.account])
    weights_kind = "mapped file pages" if s.use_mmap else "anonymous copy (--no-mmap)"
    cells_kv = padded_ctx(s.n_ctx)  # llama.cpp's cells: the context padded
    rows = [
        ("weights", m.weights_bytes, weights_kind),
        ("repacked weights", m.repack_bytes, "CPU_REPACK copy for this CPU's fast kernels"),
        ("KV cache", m.kv_bytes, f"{cells_kv} cells, {s.type_k}/{s.type_v}"),
        ("compute (touched)", m.compute_touched_bytes, f"of {mib(m.compute_reserved_bytes)} reserved"),
        ("CPU work buffer", m.compute_work_bytes, _work_note(s)),
        ("output", m.output_bytes, "logits row"),
        ("runtime", m.runtime_bytes, "interpreter, llama.cpp, vocabulary"),
    ]
    if not m.compute_work_bytes:
        rows[4:5] = []
    if m.device_bytes:
        rows[0] = ("weights (CPU)", m.weights_bytes, weights_kind)
        rows[1:2] = []  # no CPU_REPACK while a GPU is in use
        rows += [
            (f"on {name}", size, f"{s.n_gpu_layers} layers: weights, KV, compute (RAM: UMA)")
            for name, size in m.device_bytes.items()
        ]
        rows.append(("GPU driver", m.driver_bytes, "its libraries and compiled pipelines"))
    columns = [
        Column("what"),
        Column("MiB", numeric=True),
        Column("share of peak", numeric=True, decorative=True),
        Column("note", style="dim"),
    ]
    cells: list[list[str | Text]] = [
        [name, f"{size / 2**20:.1f}", _bar(size, m.peak_rss_bytes), note] for name, size, note in rows
    ]
    cells.append(
        [
            Text("peak (RSS)", style="bold"),
            Text(f"{m.peak_rss_bytes / 2**20:.1f}", style="bold"),
            "",
            "what lmkd / the OOM killer see",
        ]
    )
    print_records(out, columns, cells, stack_when_narrow=False)
    # not a row: it is no part of the peak, and under it a smaller figure would read as a contradiction
    say(
        out,
        f"reserved by llama.cpp: {mib(m.reserved_bytes)} (its logged buffers, what --fit counts); the peak "
        "holds only the pages a run touches, plus the runtime and work buffer",
        style="dim",
    )
    threads = f"threads {s.n_threads}" + (
        f" (prompt {s.n_threads_batch})" if s.n_threads_batch and s.n_threads_batch != s.n_threads else ""
    )
    print_items(
        out,
        [
            f"settings: ctx {s.n_ctx}",
            f"batch {s.n_batch}",
            f"ubatch {s.n_ubatch}",
            f"kv {s.type_k}/{s.type_v}",
            f"flash attn {'on' if s.flash_attn else 'off'}",
            f"mmap {'on' if s.use_mmap else 'off'}",
            f"repack {'on' if s.repack and s.on_cpu else 'off'}",
            threads,
            *([f"device {s.device}", f"gpu layers {s.n_gpu_layers}"] if not s.on_cpu else []),
        ],
    )
    if plan.engine is not None:
        e = plan.engine
        where = "in-process" if e.get("kind") == "inprocess" else "llama.cpp's programs"
        say(out, f"engine: {where} · {e.get('version') or 'version unknown'}")
    for trade in plan.trade_offs:
        say(out, f"{'to fit' if plan.fits else 'tried, still over'}: {trade}", style="yellow")
    say(out, f"largest context that fits: {plan.max_ctx or 'none'}{_at_trained(plan)}")
    from edgepilot.engine.child_env import shown_keep_out

    # a copy keeps the GPU drivers out of a CPU run as edgepilot's own runs do
    print_command(out, "llama.cpp:", [*shown_keep_out(plan.llama_cpp_args), *plan.llama_cpp_args])
    print_command(out, "edgepilot:", plan.edgepilot_args)
    if plan.alternatives:
        print_records(
            out,
            [Column("option"), Column("peak MiB", numeric=True), Column("fits")],
            [
                [a.description, f"{a.peak_rss_bytes / 2**20:.0f}", "yes" if a.fits else "no"]
                for a in plan.alternatives
            ],
            title="alternatives",
            stack_when_narrow=False,
        )
    if plan.opencl is not None:
        render_opencl(plan.opencl, out)
    for warning in plan.warnings:
        say(out, f"warning: {warning}", style="yellow")
    for note in plan.notes:
        if note not in plan.warnings:
            say(out, f"note: {note}", style="dim")


def _at_trained(plan: FitResult) -> str:
    """The search stops at the trained context: said, so a larger --ctx that fits is no contradiction."""
    trained = plan.n_ctx_train
    if not (trained and plan.max_ctx and plan.max_ctx >= trained // 256 * 256):
        return ""
    return " (the model's trained context: the search goes no higher)"


def render_opencl(a: OpenCLAdvice, out: Console) -> None:
    """The GPU path on the OpenCL device: the offloaded run, the weight types, the requantization."""
    from edgepilot.cli.narrow import print_command, say

    if a.offload is None:  # a device ggml-opencl refuses (Mali): why, once
        say(out, f"OpenCL GPU: {a.device}: not usable by llama.cpp's OpenCL backend", style="bold")
        for reason in a.reasons:
            say(out, f"  · {reason}")
        return
    o = a.offload
    say(out, f"GPU path: {a.device} (OpenCL, {o.device})", style="bold")
    fits = f"fits up to ctx {o.max_ctx}" if o.fits else f"does not fit (ctx {o.max_ctx or 'none'} would)"
    say(out, f"  · all {o.n_gpu_layers} layers offloaded: predicted peak {mib(o.peak_rss_bytes)} ({fits})")
    total = sum(int(v["bytes"]) for v in a.weight_types.values()) or 1
    mix = ", ".join(
        f"{name} {int(v['bytes']) / total:.0%} {v['speed']}"
        for name, v in sorted(a.weight_types.items(), key=lambda kv: -int(kv[1]["bytes"]))
    )
    say(out, f"  · kernels fast for {', '.join(a.fast_types)}; this model's matrices: {mix}")
    for reason in a.reasons:
        say(out, f"  · {reason}")
    if a.llama_quantize_args:
        say(
            out,
            f"{a.slower_share:.0%} of its matrix weights are of slower types: requantize to pure "
            f"{a.recommended_quant} for this GPU (from an F16 original if you have one: requantizing adds "
            "error), then fit that file:",
            style="yellow",
        )
        print_command(out, "llama.cpp:", a.llama_quantize_args)
        print_command(out, "edgepilot:", a.edgepilot_quantize_args)
    elif a.fast:
        say(out, "  · every matrix weight is of a type its kernels are fast for")
    print_command(out, "offloaded:", o.llama_cpp_args)
    for note in o.notes:
        say(out, f"note: {note}", style="dim")
