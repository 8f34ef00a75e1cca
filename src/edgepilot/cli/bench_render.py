"""Human rendering of `bench`, `bench --history` and `tune` (rich tables, terminal plots)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from edgepilot.cli.format import human_bytes
from edgepilot.shown import shown
from edgepilot.words import count

if TYPE_CHECKING:
    from edgepilot.bench.history import History
    from edgepilot.bench.results import BenchReport
    from edgepilot.bench.tune_report import TuneReport
    from edgepilot.engine.choice import EngineInfo
    from edgepilot.tuned.profiles import ProfileView


SHORT = {"threads": "thr"}  # headers a narrow table may shorten before it stacks its records


def _num(value: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def _plot(points: list, title: str, out: Console) -> None:
    from edgepilot.bench.plot import sweep_series, terminal_plot, worth_plotting

    series = sweep_series(points)
    if not worth_plotting(series):
        return
    if out.width < 40:
        return  # the table says it all; a plot this narrow does not
    width = min(out.width, 110)
    text = terminal_plot(series, shown(title), width=width, color=out.is_terminal)
    if text:
        out.print(Text.from_ansi(text))


def _engine_line(info: EngineInfo | None) -> str:
    if info is None:
        return ""
    if info.kind == "inprocess":
        return f" · in-process ({info.version})"
    return f" · {info.path} ({info.version or 'version unknown'})"


def _roofline_line(
    gbs: float | None, bpt: int | None, tg: float | None, fraction: float | None, tuned: bool = False
) -> str | None:
    """Generation as a share of the memory's limit (fraction counts the weights and the KV cache read)."""
    from edgepilot.plan.roofline import share_words

    if gbs is None or not bpt:
        return None
    if not tg or not fraction:
        bound = f"at most {gbs * 1e9 / bpt:.0f} t/s"
        return f"bandwidth: {human_bytes(bpt)} read per token, memory {gbs:.1f} GB/s → {bound}"
    read = fraction * gbs * 1e9 / tg  # bytes per token
    return (
        f"bandwidth: generation at {fraction:.0%} of what this memory can do: {tg:.1f} t/s × "
        f"{human_bytes(read)} read per token = {fraction * gbs:.1f} of {gbs:.1f} GB/s (at most "
        f"{gbs * 1e9 / read:.0f} t/s); {share_words(fraction, tuned)}"
    )


def render_bench(report: BenchReport, out: Console) -> None:
    from edgepilot.bench.formats import md_cell, md_columns
    from edgepilot.bench.runner import sweep_points
    from edgepilot.cli.narrow import Column, print_records, say

    rows = report.rows
    # model, size, params and backend are the same on every row: they go in the title
    cols = [c for c in md_columns(rows) if c not in ("model", "size", "params", "backend")]
    extra = []
    if any(r.temp_max_c is not None for r in rows):
        extra.append("°C max")
    if any(r.joules_per_token is not None for r in rows):
        extra.append("J/token")
    if any(r.roofline is not None for r in rows):
        extra.append("roofline")
    head = " · ".join(md_cell(rows[0], c) for c in ("model", "size", "params", "backend")) if rows else ""
    cols = ["test", *(c for c in cols if c != "test")]  # the test names a record when they are stacked
    columns = [Column(c, numeric=c not in ("cores", "test", "dev")) for c in cols + extra]
    cells = []
    for r in rows:
        cells.append([md_cell(r, c) for c in cols])
        for c in extra:
            if c == "°C max":
                cells[-1].append(_num(r.temp_max_c))
            elif c == "J/token":
                cells[-1].append(_num(r.joules_per_token, "{:.3f}"))
            else:
                cells[-1].append(_num(r.roofline * 100 if r.roofline is not None else None, "{:.0f}%"))
    print_records(
        out,
        columns,
        cells,
        title=f"{report.model.name} ({head})\n{report.device.description}",
        row_styles=["yellow" if r.throttled else None for r in rows],
    )
    tg_rows = [r for r in rows if r.kind == "tg"]
    best_tg = max(tg_rows, key=lambda r: r.avg_ts) if tg_rows else None
    line = _roofline_line(
        report.bandwidth_gbs,
        report.bytes_per_token,
        best_tg.avg_ts if best_tg else None,
        best_tg.roofline if best_tg else None,
    )
    if line:
        say(out, line, style="dim")
    for r in rows:
        for note in r.notes:
            say(out, f"{r.test} t{r.n_threads}: {note}", style="yellow")
    for w in report.warnings:
        say(out, f"warning: {w}", style="yellow")
    if report.sensors:
        say(out, "no temperature/power figures: " + "; ".join(report.sensors), style="dim")
    _plot(sweep_points(report), report.model.name, out)
    saved = f"saved as run #{report.run_id} in {report.db_path}" if report.run_id else "not saved"
    saved += " (partial)" if report.partial and report.run_id else ""
    png = f" · plot: {report.plot_png}" if report.plot_png else ""
    engine = _engine_line(report.engine)
    say(out, f"{saved} · {report.seconds:.0f} s{engine}{png}", style="dim")


def render_history(h: History, out: Console) -> None:
    from edgepilot.cli.narrow import Column, print_records, say

    if not h.entries:
        where = f" for {h.model}" if h.model else ""
        say(
            out,
            f"no results{where} on this device yet ({h.db_path}); run `edgepilot bench` or `edgepilot tune`",
        )
        if h.other_devices:
            out.print(f"({count(h.other_devices, 'run')} from other devices are stored)", style="dim")
        return
    out.print(Text.assemble(("history", "bold"), f" · {shown(h.device.description)}"))
    right = ("threads", "ub", "fa", "t/s", "Δ prev", "best")
    columns = [
        Column(c, numeric=c in right, short=SHORT.get(c, ""))
        for c in ("test", "threads", "cores", "ub", "fa", "t/s", "Δ prev", "best")
    ]
    by_run: dict[int, list] = {}
    for e in h.entries:
        by_run.setdefault(e.run_id, []).append(e)
    for run_id, entries in by_run.items():
        first = entries[0]
        when = first.started.replace("T", " ").rstrip("Z")
        kind = first.kind + (" (partial)" if first.partial else "")
        title = f"run {run_id} · {kind} · {first.model_name} · {when}"
        cells = [
            [
                e.label,
                str(e.n_threads),
                e.cores or "-",
                str(e.n_ubatch),
                str(int(e.flash_attn)),
                f"{e.avg_ts:.2f} ± {e.stddev_ts:.2f}",
                "-" if e.change is None else f"{e.change:+.1%}",
                f"{e.best_ts:.2f}",
            ]
            for e in entries
        ]
        styles = ["red" if e.change is not None and e.change < -0.05 else None for e in entries]
        print_records(out, columns, cells, title=title, row_styles=styles)
    say(
        out,
        f"{count(h.runs, 'run')} on this device in {h.db_path} "
        "(Δ prev: against the same test with the same settings the time before)",
        style="dim",
    )


def render_tune(r: TuneReport, out: Console) -> None:
    from edgepilot.bench.tune_report import sweep_points
    from edgepilot.cli.narrow import Column, print_command, print_records, say

    heads = ("#", "phase", "test", "threads", "cores", "ub", "fa", "t/s", "")
    numeric = ("#", "threads", "ub", "fa", "t/s")
    columns = [Column(c, numeric=c in numeric, short=SHORT.get(c, "")) for c in heads]
    cells = [
        [
            str(i),
            t.phase,
            t.test,
            str(t.n_threads),
            t.cores,
            str(t.n_ubatch),
            str(int(t.flash_attn)),
            f"{t.ts:.2f}",
            "*" if t.rejected else "",  # a mark, not a note: the table stays narrow
        ]
        for i, t in enumerate(r.trials, 1)
    ]
    styles = ["dim" if t.rejected else None for t in r.trials]
    print_records(
        out, columns, cells, title=f"tune · {r.model.name} · {r.device.description}", row_styles=styles
    )
    if any(t.rejected for t in r.trials):
        say(out, "* one repetition: clearly slower than the best, not repeated", style="dim")
    if r.gpu is not None:
        _render_gpu(r, out)
    _plot(sweep_points(r), r.model.name, out)
    if r.sustained is not None:
        from edgepilot.cli.tune_sustained_render import render_sustained_tune

        render_sustained_tune(r.sustained, out)
    if r.speculation is not None:
        _render_speculation(r.speculation, out)
    if r.partial:  # stopped: the settings measured so far, no choice made
        for note in r.notes:
            say(out, note, style="dim")
        saved = f"saved as run #{r.run_id} (partial) in {r.db_path}" if r.run_id else "not saved"
        say(out, f"{saved} · {r.seconds:.0f} s{_engine_line(r.engine)}", style="dim")
        return
    g, p = r.gen, r.prompt
    fa = "on" if g["flash_attn"] else "off"
    threads = count(g["n_threads"], "thread")
    out.print(
        Text.assemble(
            ("generation", "bold"),
            f" {threads} on CPUs {g['cores']}, flash attention {fa} → {g['tg_ts']:.2f} t/s",
            *_held(r),
        )
    )
    cores = f" on CPUs {p['cores']}" if p["cores"] != g["cores"] else ""
    out.print(
        Text.assemble(
            ("prompt", "bold"),
            f"     {count(p['n_threads'], 'thread')}{cores}, ubatch {p['n_ubatch']} → {p['pp_ts']:.2f} t/s",
        )
    )
    default = f"vs all cores ({r.core_sets[-1]})"
    if r.speedup_vs_default:
        bursts = " in bursts" if r.chosen_by == "sustained" else ""
        say(out, f"{default}: {r.speedup_vs_default:.2f}× generation speed{bursts} (medians)")
    elif r.default_tg_ts is not None:  # one run is no ground for a ratio (it may be an outlier)
        runs = count(r.default_tg_reps, "run")
        say(out, f"{default}: {r.default_tg_ts:.2f} t/s in {runs}: too few for a speed-up", style="dim")
    line = _roofline_line(r.bandwidth_gbs, r.bytes_per_token, g["tg_ts"], r.roofline, tuned=True)
    if line:
        say(out, line, style="dim")
    for note in r.notes:
        say(out, note, style="dim")
    from edgepilot.engine.child_env import shown_keep_out

    if r.llama_cpp_args:  # measured on this machine: a copy keeps its GPU drivers out of a CPU run too
        print_command(out, "llama.cpp:", [*shown_keep_out(r.llama_cpp_args), *r.llama_cpp_args])
    if r.profile_path:
        print_command(out, "edgepilot:", ["edgepilot", "run", r.model.path])
        serve = "serve picks it up; run too, unless a plain tune saved one"
        say(
            out,
            f"({serve})" if r.chosen_by == "sustained" else "(run and serve pick the profile up)",
            style="dim",
        )
    say(
        out,
        f"{count(len(r.trials), 'setting')}, {count(r.measurements, 'measurement')}, "
        f"{count(r.loads, 'model load')} in {r.seconds:.0f} s{_engine_line(r.engine)}",
        style="dim",
    )
    if r.profile_path and r.chosen_by == "sustained":
        say(out, f"profile saved: {r.profile_path} (chosen by sustained speed: serve prefers it)")
    elif r.profile_path:
        say(out, f"profile saved: {r.profile_path} (`edgepilot run` uses it when you give no --threads)")
    if r.plot_png:
        say(out, f"plot: {r.plot_png}", style="dim")


def _held(r: TuneReport) -> tuple[str, ...]:
    kept = r.sustained.kept if r.sustained is not None else None
    return (f", holds {kept.steady_ts:.2f} t/s",) if kept is not None and kept.steady_ts is not None else ()


def _render_gpu(r: TuneReport, out: Console) -> None:
    """The GPU trial: the tuned CPU settings and each layer count on the device, both phases."""
    from edgepilot.cli.narrow import Column, print_records, say

    assert r.gpu is not None
    heads = ("device", "ngl", "pp t/s", "tg t/s", "turn s")
    columns = [Column(c, numeric=c != "device") for c in heads]
    cells, styles = [], []
    for p in r.gpu.points:
        turn = p.turn_seconds(r.n_prompt, r.n_gen)
        cells.append(
            [
                ("CPU" if p.device == "none" else p.device) + (" *" if p is r.gpu.chosen else ""),
                "-" if p.device == "none" else str(p.n_gpu_layers),
                _num(p.pp_ts, "{:.2f}"),
                _num(p.tg_ts, "{:.2f}"),
                "-" if turn == float("inf") else f"{turn:.1f}",
            ]
        )
        styles.append("bold" if p is r.gpu.chosen else None)
    title = f"CPU or GPU · a turn: {r.n_prompt}+{r.n_gen} tokens"
    # five short columns fit a phone's 50: a table even there
    print_records(out, columns, cells, title=title, row_styles=styles, stack_when_narrow=False)
    best = r.gpu.best_prompt, r.gpu.best_gen
    names = ["CPU" if p.device == "none" else f"{p.device} -ngl {p.n_gpu_layers}" for p in best]
    say(out, f"* chosen · fastest prompt: {names[0]} · fastest generation: {names[1]}", style="dim")


def render_profile(view: ProfileView, out: Console) -> None:
    """`tune --show` / `--forget`: short lines that read on a 40-column screen."""
    from pathlib import Path

    from edgepilot.cli.narrow import print_command, say

    p = view.profile
    name = Path(view.model).name
    if view.forgotten:
        when = f" of {p.created[:10]}" if p else ""
        say(out, f"forgot the tuned profile{when} for {name}")
        for removed in filter(None, (view.path, view.sustained_path)):
            print_command(out, "removed:", [removed], style="dim")
        out.print("run, chat and serve now plan without it", style="dim")
        return
    if p is None:
        say(out, f"no tuned profile for {name} on this device")
        print_command(out, "make one:", ["edgepilot", "tune", view.model], style="dim")
        return
    sustained = p.chosen_by == "sustained"
    out.print(f"tuned profile of {p.created[:10]}" + (" (sustained)" if sustained else ""), markup=False)
    cpus = ",".join(str(c) for c in p.cpus)
    held = f", held {p.sustained_tps:.1f}" if sustained and p.sustained_tps is not None else ""
    for label, value in (
        ("model", name),
        ("threads", f"{p.n_threads} on CPUs {cpus}"),
        ("prompt threads", str(p.n_threads_batch)),
        ("ubatch", str(p.n_ubatch)),
        ("flash attention", "on" if p.flash_attn else "off"),
        ("weight repacking", "on" if p.repack else "off"),
        ("measured", f"tg {p.gen_tps:.1f}{held}, pp {p.prompt_tps:.1f} t/s"),
    ):
        say(out, f"  {label}: {value}")
    print_command(out, "file:", [view.path], style="dim")  # a long path on its own line, never cut
    if view.sustained_path:  # run uses the burst profile; serve, running for hours, this one
        print_command(out, "serve uses the one tuned --sustained:", [view.sustained_path], style="dim")
    out.print("--no-profile leaves it out", style="dim")
    out.print("tune --forget removes it", style="dim")


def _render_speculation(trial: Any, out: Console) -> None:
    """tune --speculation: per kind of text, what each candidate measured against plain and what was kept."""
    from edgepilot.bench.spec_trial import candidate_label
    from edgepilot.cli.narrow import say

    head = f"speculation on llama-server, greedy, {trial.rounds} rounds of {trial.n_gen} tokens:"
    say(out, head, style="bold")
    hold = trial.hold
    if hold is not None:  # tune --sustained: the kept ones held against plain in this process
        say(out, f"  then held: {hold.rounds} windows of {hold.window_s:g} s each, in turns with plain")
    for kind, k in trial.kinds.items():
        say(out, f"  {kind} (plain {k.plain_tg_ts:.0f} t/s): {k.why}")
        if hold is not None and k.steady_speedup is not None:
            held = [r for r in hold.runs if r.kind == kind]
            steady = ", ".join(f"{r.name} {r.steady_ts or 0:.1f}" for r in held)
            say(out, f"    steady t/s: {steady}", style="dim")
        for name, c in k.candidates.items():
            name = candidate_label(name, c)
            if c.predicted is not None:
                best = f", fastest at --draft-max {c.best_draft_max}" if c.best_draft_max else ""
                say(
                    out,
                    f"    {name}: predicted {c.predicted:.2f}x, measured {c.speedup:.2f}x{best}",
                    style="dim",
                )
