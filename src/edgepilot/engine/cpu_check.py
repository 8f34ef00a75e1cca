"""The CPU library check: does this llama.cpp run on this CPU, on the paths a run takes?

A llama.cpp compiled for another CPU than the one it runs on dies with SIGILL, and not at load: at the first
prompt batch, inside the matrix multiply. A native x86 build on a VM that lists AMX but does not grant its
tiles runs `tilezero` in the AMX buffer type's kernels; an ARM build with a -march above the core runs a dot
product or i8mm instruction in the repacked GEMMs. So, before a library or program is first used (per file,
CPU flags and LD_PRELOAD), a child process with a deadline loads the bundled model and decodes a 64-token
batch and two tokens (cpu_check_child.py in-process; llama-completion for llama.cpp's programs), with
repacking and the other extra buffer types on, as a run has them. A crash is a verdict, remembered
(cpu_check_store.py); then the same check without them (`--no-repack`) tells whether the run can go on
there. A timeout is not a verdict: the check is run once more with a longer deadline, and never remembered.

    check_engine(kind, target, fresh=False)     the remembered verdict, else a check in a child
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgepilot.engine import cpu_check_store as store
from edgepilot.file_errors import note_once

# The child-run modules (checked_run, gpu_run, cpu_check_child) are imported where a check runs: probe and fit
# read a remembered check without them.
if TYPE_CHECKING:
    from edgepilot.engine.gpu_run import RunResult

# a phone loads the 270M model and decodes 64 tokens in a few seconds, qemu-user in about 30
DEADLINE_ENV = "EDGEPILOT_CPU_CHECK_DEADLINE"
CRASHES = ("SIGILL", "SIGSEGV", "SIGBUS", "SIGABRT", "SIGFPE")
COMPLETION_TOOLS = ("llama-completion", "llama-cli")
_SYSTEM_INFO = r"system_info:.*?\bCPU\s*:(.*)$"  # compiled on first use (re's cache)
_ON = r"\b([A-Z][A-Z0-9_]*)\s*=\s*1\b"


@dataclass
class CpuCheck:
    """One mode's check: `full` (repacking and the extra buffer types on, as a run has them) or `plain`."""

    mode: str  # full | plain
    outcome: str  # ok | crashed | hung | slow | failed | not-run
    detail: str
    seconds: float = 0.0
    signal: str | None = None
    exit_code: int | None = None
    evidence: list[str] = field(default_factory=list)
    built_with: list[str] = field(default_factory=list)  # what llama.cpp says it was compiled with
    target: str = ""
    checked_at: str | None = None
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    @property
    def crashed(self) -> bool:
        return self.outcome == "crashed"


@dataclass
class EngineCheck:
    """probe's `engine.cpu_check`: what the check found for one engine's llama.cpp on this CPU."""

    engine: str  # inprocess | tools
    target: str  # the libllama file or the program
    full: CpuCheck
    plain: CpuCheck | None = None
    key: str = ""

    @property
    def broken(self) -> bool:
        """It crashed on the run's paths, and without repacking too (or that could not be tried)."""
        return self.full.crashed and (self.plain is None or not self.plain.ok)

    @property
    def repack_crashes(self) -> bool:
        """It crashed with repacking on and ran without it: runs go on with --no-repack."""
        return self.full.crashed and self.plain is not None and self.plain.ok

    @property
    def outcome(self) -> str:
        """The verdict of the run's own paths (design.md's vocabulary: ok, slow, crashed, hung, failed,
        not-run); `runs_without_repack` says whether the plain check rescued it."""
        return self.full.outcome

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["outcome"] = self.outcome
        out["runs_without_repack"] = self.repack_crashes
        return out


def built_with(lines: list[str]) -> list[str]:
    """The CPU features a llama.cpp says it was compiled with (its `system_info: ... CPU : AVX2 = 1 |`)."""
    for line in lines:
        m = re.search(_SYSTEM_INFO, line)
        if m:
            return re.findall(_ON, m.group(1))[:64]
    return []


def judge(mode: str, r: RunResult, deadline: float, needs_mark: bool) -> CpuCheck:
    from edgepilot.engine.checked_run import outcome_of
    from edgepilot.engine.cpu_check_child import MARK, N_BATCH

    lines = r.kept + r.tail
    base = {"evidence": r.tail[-12:], "exit_code": r.returncode, "signal": r.signal}
    base["built_with"] = built_with(lines)
    seconds = round(r.seconds, 2)
    what = "with repacking on" if mode == "full" else "without repacking (--no-repack)"
    if r.start_error is not None:
        return CpuCheck(mode, "not-run", r.start_error)
    if r.hung:
        outcome = outcome_of(r)  # slow: still using CPU at the deadline; hung: no progress
        detail = f"the check {what} did not end within {deadline:g} s (killed; not a verdict)"
        return CpuCheck(mode, outcome, detail, seconds, **base)
    if r.signal in CRASHES:
        detail = f"llama.cpp crashed {what}: {r.signal} on a {N_BATCH}-token prompt batch"
        return CpuCheck(mode, "crashed", detail, seconds, **base)
    if r.returncode != 0 or (needs_mark and not any(f"{MARK} ok" in ln for ln in lines)):
        last = r.error_line or (r.tail[-1] if r.tail else "")
        detail = f"the check {what} exited with status {r.returncode}" + (f": {last}" if last else "")
        return CpuCheck(mode, "failed", detail[:400], seconds, **base)
    detail = f"ran a {N_BATCH}-token batch and 2 tokens {what} in {seconds:g} s"
    return CpuCheck(mode, "ok", detail, seconds, **{**base, "evidence": []})


def _child_env() -> dict[str, str]:
    from edgepilot.engine.gpu_check import driver_kept_out_env  # the GPU check's modules: only for a check

    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
    env.update(driver_kept_out_env(), GGML_NO_BACKTRACE="1")
    return env


def _threads() -> int:
    from edgepilot.device.process import allowed_cpus

    return max(1, min(4, len(allowed_cpus())))


def _inprocess_argv(model: Path, repack: bool) -> list[str]:
    child = "edgepilot.engine.cpu_check_child"
    return [sys.executable, "-m", child, str(model), "1" if repack else "0", str(_threads())]


def completion_tool(program: Path) -> Path | None:
    """llama-completion (or an older llama-cli) beside one of llama.cpp's programs."""
    for name in COMPLETION_TOOLS:
        sibling = program if program.name == name else program.parent / name
        if sibling.is_file() and os.access(sibling, os.X_OK):
            return sibling
    return None


def _tools_argv(program: Path, model: Path, repack: bool) -> list[str] | None:
    from edgepilot.engine.cpu_check_child import N_BATCH, N_CTX, check_prompt
    from edgepilot.engine.tool_flags import adapt_args

    argv = [str(program), "-m", str(model), "-p", check_prompt(), "-n", "2", "-c", str(N_CTX)]
    argv += ["-b", str(N_BATCH), "-ub", str(N_BATCH), "-t", str(_threads()), "-no-cnv", "--no-warmup"]
    argv += ["-dev", "none"] + ([] if repack else ["--no-repack"])
    adapted = adapt_args(program, argv)
    if not repack and "--no-repack" not in adapted:
        return None  # an older llama.cpp: no way to turn repacking off
    return adapted


def _run(argv: list[str], mode: str, deadline: float, needs_mark: bool) -> CpuCheck:
    """One mode's check; past its deadline (a loaded machine, a phone under emulation) once more with a
    longer one (engine/checked_run.py)."""
    from edgepilot.engine.checked_run import checked_at_now, run_checked

    checked = run_checked(argv, deadline, _child_env())
    got = judge(mode, checked.result, checked.deadlines[-1], needs_mark)
    got.checked_at = checked_at_now()
    return got


def _bundled_model() -> Path | None:
    from edgepilot.errors import UserError
    from edgepilot.gguf.resolve import bundled_model_path

    try:
        return bundled_model_path()
    except UserError:
        return None


def _cpu_flags() -> list[str]:
    from edgepilot.device.cpu import read_cpu
    from edgepilot.device.fs import LIVE_ROOT

    try:
        return list(read_cpu(LIVE_ROOT).features)
    except Exception:  # a CPU fact we cannot read makes the key coarser, never the check impossible
        return []


def _files(kind: str, target: Path) -> list[Path]:
    """What the check's verdict depends on: the library or program and the CPU backend beside it."""
    beside = sorted(target.parent.glob("libggml-cpu*.so"))[:16] if target.parent.is_dir() else []
    return [target, *beside]


def _kept(kind: str, target: Path, key: str, kept: dict[str, dict[str, Any]]) -> EngineCheck:
    full = CpuCheck(**kept["full"], cached=True)
    plain = CpuCheck(**kept["plain"], cached=True) if "plain" in kept else None
    return EngineCheck(kind, str(target), full, plain, key)


def remembered(kind: str, target: Path) -> EngineCheck | None:
    """What a previous check of this llama.cpp on this CPU found, without running one."""
    key = store.check_key(kind, _files(kind, target), _cpu_flags())
    kept = store.load(key, quiet=True)
    return _kept(kind, target, key, kept) if kept is not None else None


def check_engine(
    kind: str,
    target: Path,
    *,
    fresh: bool = False,
    deadline: float | None = None,
    model: Path | None = None,
    progress: Any = None,
) -> EngineCheck:
    """The check of one engine's llama.cpp: `kind` "inprocess" (target: the libllama file) or "tools"
    (target: one of its programs). Remembered unless fresh; never raises for what llama.cpp does."""
    from edgepilot.engine.checked_run import deadline_from_env

    deadline = deadline or deadline_from_env(DEADLINE_ENV, 120.0)
    key = store.check_key(kind, _files(kind, target), _cpu_flags())
    if not fresh:
        kept = store.load(key)
        if kept is not None:
            return _kept(kind, target, key, kept)
    model = model or _bundled_model()
    if model is None:
        missing = CpuCheck("full", "not-run", "no model to check with (the bundled model package is missing)")
        return EngineCheck(kind, str(target), missing, None, key)
    runner = target if kind == "inprocess" else completion_tool(target)
    if runner is None:
        detail = "no llama-completion or llama-cli beside it to check with"
        return EngineCheck(kind, str(target), CpuCheck("full", "not-run", detail), None, key)
    if progress is not None:
        progress(f"checking llama.cpp on this CPU in a child process (up to {deadline:g} s, once)")
    full = _mode(kind, runner, model, True, deadline)
    plain = None
    if full.crashed:
        if progress is not None:
            progress(f"llama.cpp crashed ({full.signal}); checking it without repacking")
        plain = _mode(kind, runner, model, False, deadline)
    result = EngineCheck(kind, str(target), full, plain, key)
    if full.outcome in store.KEPT_OUTCOMES and (plain is None or plain.outcome in store.KEPT_OUTCOMES):
        modes = {m.mode: {k: v for k, v in asdict(m).items() if k != "cached"} for m in (full, plain) if m}
        why = store.store(key, modes)
        if why:
            note_once(f"the CPU check's result is not kept: {why}")
    return result


def _mode(kind: str, runner: Path, model: Path, repack: bool, deadline: float) -> CpuCheck:
    mode = "full" if repack else "plain"
    if kind == "inprocess":
        got = _run(_inprocess_argv(model, repack), mode, deadline, needs_mark=True)
    else:
        argv = _tools_argv(runner, model, repack)
        if argv is None:
            return CpuCheck(mode, "not-run", f"{runner.name} has no --no-repack (an older llama.cpp)")
        got = _run(argv, mode, deadline, needs_mark=False)
    got.target = str(runner)
    return got
