"""A memory cause's fix, made by the planner and checked before the doctor proposes it.

The budget is the one the failed command had (doctor/plan_check.py). A proposed command must fit it by the
plan and differ from what failed: it is read back like any command line (command.parse_command), planned
again under the same budget, and dropped if it does not fit or asks for what already failed. When no context
fits, the fix says so with the figures, and gives the nearest thing that does: llama.cpp's own
llama-completion (the same model without the in-process engine's interpreter), a smaller quantization
(`edgepilot quantize` + the run on its file), or how much more memory the smallest plan needs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.doctor.command import (
    flag_value,
    memory_flags,
    parse_command,
    shell_join,
    with_model,
    with_settings,
)

if TYPE_CHECKING:
    from edgepilot.doctor.evidence import Evidence
    from edgepilot.plan.requested import RequestedSettings
    from edgepilot.plan.settings import EngineSettings
    from edgepilot.plan.types import Alternative, FitResult

MIB = 1 << 20
CTX_STEP = 256
# A budget a run measured (its refusal) moves by a MiB or so from run to run (page cache, other processes):
# a fix planned this much under it is not refused by the next run's own measurement.
RERUN_SLACK = 2 * MIB
MEMORY_FIELDS = ("n_ctx", "n_ubatch", "type_k", "type_v", "flash_attn", "use_mmap", "repack")
RUN_N_PREDICT = (
    "128"  # `edgepilot run`'s -n default: llama-completion's own (-1) never stops at a full context
)


@dataclass
class MemoryFix:
    text: str  # the fix as the doctor prints it
    commands: list[list[str]] = field(default_factory=list)  # to run in order; [] when none (more memory)
    budget_bytes: int = 0  # the budget the commands were planned and checked against
    peak_bytes: int | None = None  # the planner's peak for the last command
    nothing_fits: bool = False  # not even the smallest context fits: the model, not the context, is too large


def mib(n: int | float) -> str:
    return f"{n / MIB:.1f} MiB"


def _changed(a: EngineSettings, b: EngineSettings) -> bool:
    return any(getattr(a, f) != getattr(b, f) for f in MEMORY_FIELDS)


def _describe(s: EngineSettings) -> str:
    parts = [f"ctx {s.n_ctx}", f"kv {s.type_k}", f"ubatch {s.n_ubatch}"]
    parts += [] if s.use_mmap else ["no mmap"]
    parts += [] if s.repack else ["no repack"]
    return ", ".join(parts)


class _Planning:
    """The planner under one budget, for one model, in the failed command's engine."""

    def __init__(self, ev: Evidence, budget: int, stated: int | None = None) -> None:
        self.ev, self.budget = ev, budget
        self.stated = budget if stated is None else stated  # the budget the fix's text names
        self.model = Path(str(ev.model_local))
        self.program = ev.cmd is not None and ev.cmd.tool == "llama.cpp"

    def fit(
        self, requested: RequestedSettings, ctx_target: int | None = None, program: bool | None = None
    ) -> FitResult:
        from edgepilot.plan.fit import fit_model
        from edgepilot.plan.memory_model import program_arithmetic

        lean = self.program if program is None else program
        return fit_model(
            self.model,
            requested,
            budget_bytes=self.budget,
            root=self.ev.root or "/",
            ctx_target=ctx_target,
            arithmetic=program_arithmetic if lean else None,
            own_process=False,
        )

    def settings_that_fit(self, failed: EngineSettings) -> tuple[FitResult, FitResult | None]:
        """(the plan closest to the failed context, else the one at 256 cells; that plan when it fits and
        changes something, else None). What decides memory is opened to the search; the rest is kept."""
        opened = replace(
            self.ev.requested,
            n_ctx=None,
            n_ubatch=None,
            type_k=None,
            type_v=None,
            flash_attn=None,
            use_mmap=None,
            repack=None,
        )
        first = self.fit(opened, ctx_target=failed.n_ctx)
        if first.fits and _changed(first.settings, failed):
            return first, first
        smallest = self.fit(replace(opened, n_ctx=CTX_STEP))
        ok = smallest.fits and _changed(smallest.settings, failed)
        return smallest, smallest if ok else None

    def checked(
        self, argv: list[str], failed: EngineSettings, program: bool | None = None
    ) -> FitResult | None:
        """The proposed command read back and planned again: its plan when it fits and differs from what
        failed, else None. Another program (llama-completion for edgepilot run) differs by itself."""
        if self.ev.command is not None and argv == self.ev.command:
            return None
        again = self.fit(parse_command(argv).settings, program=program)
        other_program = program is not None and program != self.program
        return again if again.fits and (other_program or _changed(again.settings, failed)) else None


def memory_fix(ev: Evidence) -> MemoryFix | None:
    """The fix for the memory causes of this evidence, made once (the three memory rules share it)."""
    if "memory_fix" not in ev.__dict__:
        ev.__dict__["memory_fix"] = _memory_fix(ev)
    return ev.__dict__["memory_fix"]


def _memory_fix(ev: Evidence) -> MemoryFix | None:
    plan = ev.plan
    if plan is None or plan.fit is None or ev.model_local is None:
        return None
    failed: FitResult = plan.fit
    budget, label = plan.budget_bytes, plan.budget_source
    stated = budget
    within = f"{mib(budget)} ({label})"
    if failed.fits:  # killed all the same: plan under the memory it really had, when that is known
        peak = ev.run.peak_rss_bytes if ev.run is not None else None
        if not peak or peak >= budget:
            return None
        budget = stated = peak
        within = f"{mib(budget)} (its peak when it was killed)"
    elif label == "edgepilot run's own budget":
        budget = max(0, budget - RERUN_SLACK)  # planned under it: checked against what the next run measures
    try:
        return _fix(_Planning(ev, budget, stated), failed.settings, within)
    except Exception as exc:  # a planner error must not take the diagnosis down
        ev.checked.append(f"memory fix: failed ({type(exc).__name__}: {exc})")
        return None


def _fix(p: _Planning, failed: EngineSettings, within: str) -> MemoryFix:
    ev = p.ev
    smallest, fitting = p.settings_that_fit(failed)
    if fitting is None:
        return _nearest(p, failed, smallest, within)
    s = fitting.settings
    if ev.command:
        argv = with_settings(ev.command, s)
        again = p.checked(argv, failed)
        if again is not None:
            text = f"run with settings that fit {within}: `{shell_join(argv)}` (planned peak "
            text += f"{mib(again.memory.peak_rss_bytes)})"
            return MemoryFix(text, [argv], p.budget, again.memory.peak_rss_bytes)
    flags = " ".join(memory_flags(s, "edgepilot"))
    llama = " ".join(memory_flags(s, "llama.cpp"))
    text = f"settings that fit {within}: `{flags}` (edgepilot run) / `{llama}` (llama.cpp); "
    text += f"planned peak {mib(fitting.memory.peak_rss_bytes)}"
    return MemoryFix(text, [], p.budget, fitting.memory.peak_rss_bytes)


def _nearest(p: _Planning, failed: EngineSettings, smallest: FitResult, within: str) -> MemoryFix:
    """Nothing fits at any context: say so and by how much, and give the nearest thing that fits."""
    peak = smallest.memory.peak_rss_bytes
    over = max(0, peak - p.stated)  # against the budget the text names, as the refusal counts it
    text = (
        f"nothing fits in {within} at any context: the smallest plan ({_describe(smallest.settings)}) "
        f"peaks at {mib(peak)}, {mib(over)} over"
    )
    options = [o for o in (_program(p, failed), _quantized(p, smallest)) if o is not None]
    # the limit for the command as typed (its own plan's peak), with the slack a re-run is planned under
    typed = p.ev.plan.fit.memory.peak_rss_bytes if p.ev.plan and p.ev.plan.fit else peak
    more = _more_memory(p, max(0, max(peak, typed) - p.budget))
    if not options:
        return MemoryFix(f"{text}; {more}", [], p.budget, None, nothing_fits=True)
    best = options[0]
    text += f". Nearest that fits: {best.text}"
    if len(options) > 1:
        text += f"; or {options[1].text}"
    return MemoryFix(f"{text}; or {more}", best.commands, p.budget, best.peak_bytes, nothing_fits=True)


def _program(p: _Planning, failed: EngineSettings) -> MemoryFix | None:
    """The same model run by llama.cpp's llama-completion: no interpreter (an in-process command only)."""
    ev = p.ev
    if p.program or (ev.cmd is not None and ev.cmd.tool != "edgepilot"):
        return None
    # the failed plan's leaner settings (KV type, ubatch) kept: the program is what differs, and the fix then
    # names the same plan as run's refusal ("nearest that fits")
    opened = replace(
        ev.requested,
        n_ctx=None,
        n_ubatch=failed.n_ubatch,
        type_k=failed.type_k,
        type_v=failed.type_v,
        flash_attn=failed.flash_attn,
    )
    lean = p.fit(opened, ctx_target=failed.n_ctx, program=True)
    if not lean.fits:
        lean = p.fit(replace(opened, n_ctx=CTX_STEP), program=True)
    if not lean.fits:
        return None
    argv = _completion_command(ev, p.model, lean.settings)
    again = p.checked(argv, failed, program=True)
    if again is None:
        return None
    text = f"llama.cpp's own llama-completion, without edgepilot's Python runtime: `{shell_join(argv)}` "
    text += f"(planned peak {mib(again.memory.peak_rss_bytes)})"
    return MemoryFix(text, [argv], p.budget, again.memory.peak_rss_bytes)


def _completion_command(ev: Evidence, model: Path, s: EngineSettings) -> list[str]:
    from edgepilot.defaults import DEFAULT_PROMPT
    from edgepilot.engine.native_tools import ToolMissing, find_tool
    from edgepilot.plan.commands import llama_cpp_command

    try:
        tool = str(find_tool("llama-completion"))
    except ToolMissing:
        tool = "llama-completion"  # `edgepilot build` makes it; the fix's text is still the command
    argv = ev.command or []
    n_predict = flag_value(argv, {"-n", "--n-predict"}) or RUN_N_PREDICT
    prompt_file = flag_value(argv, {"--prompt-file"})
    prompt = (
        ["-f", prompt_file] if prompt_file else ["-p", flag_value(argv, {"-p", "--prompt"}) or DEFAULT_PROMPT]
    )
    return llama_cpp_command(
        str(ev.model or model), s, tool=tool, extra=["-n", n_predict, "-no-cnv", *prompt]
    )


def _quantized(p: _Planning, smallest: FitResult) -> MemoryFix | None:
    """The largest smaller quantization the planner fits (one llama-quantize makes without an importance
    matrix), made by `edgepilot quantize`, then the failed command on its file."""
    from edgepilot.gguf.quant_types import NEEDS_IMATRIX, output_stem

    quants = [a for a in smallest.alternatives if a.kind == "smaller-quant" and a.fits]
    # ternary types (TQ) suit only models trained for them
    usable = [
        a for a in quants if _quant_type(a) not in NEEDS_IMATRIX and not _quant_type(a).startswith("TQ")
    ]
    option: Alternative | None = next(iter(usable), None)
    if option is None:
        return None
    qtype = _quant_type(option)
    model = Path(p.ev.model or str(p.model))
    out_dir = model.parent if os.access(p.model.parent, os.W_OK) else Path(".")
    target = out_dir / f"{output_stem(model)}-{qtype}.gguf"
    quantize = ["edgepilot", "quantize", str(model), "--to", qtype]
    if out_dir != model.parent:
        quantize += ["--out", str(out_dir)]
    argv = p.ev.command or ["edgepilot", "run", str(model)]
    run = with_settings(
        with_model(argv, str(p.ev.cmd.model if p.ev.cmd else model), str(target)), smallest.settings
    )
    text = (
        f"a {qtype} quantization of the same model (planned peak about {mib(option.peak_rss_bytes)}): "
        f"`{shell_join(quantize)}`, then `{shell_join(run)}`"
    )
    return MemoryFix(text, [quantize, run], p.budget, option.peak_rss_bytes)


def _quant_type(option: Alternative) -> str:
    return option.llama_cpp_args[-1] if option.llama_cpp_args else ""


def _more_memory(p: _Planning, over: int) -> str:
    """How much more memory the smallest plan needs, as the figure to give: a larger --memory-limit, or
    memory to free."""
    from edgepilot.plan.budget import CGROUP_FLOOR_SHARE

    run = p.ev.run
    need = -(-over // MIB)
    if run is not None and run.memory_limit_bytes:
        # edgepilot run keeps a share of a cgroup's limit free; llama.cpp's programs use all of it
        grow = over / (1 - CGROUP_FLOOR_SHARE) if not p.program else over
        limit = -(-(run.memory_limit_bytes + int(grow)) // MIB)
        kept = "" if p.program else " (edgepilot run keeps part of a limit free)"
        return f"give it a larger limit: `--memory-limit {limit}MiB`{kept}"
    return f"free {need} MiB more (close other apps) or use a smaller model"
