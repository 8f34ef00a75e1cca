"""Which engine runs llama.cpp for a command: chosen once, shown by probe and fit, used by run/chat/serve.

- "inprocess": llama-cpp-python in this process (the pinned llama.cpp the memory plan is calibrated on).
  Installed by default on glibc Linux and macOS; on Android it is an extra (it compiles for many minutes).
- "tools": llama.cpp's own programs (llama-server, llama-bench, llama-quantize...), built by `edgepilot build`
  or installed by Termux (`pkg install llama-cpp`), Debian or Homebrew.
"auto" (the default, or $EDGEPILOT_ENGINE) takes the in-process engine when it loads, else the tools.

Commands that run a model load llama.cpp to choose (load=True). probe, fit and --version only look
(load=False): llama-cpp-python installed and its libllama file where it would load it from count, without
importing it (that import loads the library and numpy: most of a command's start-up). `probe --check-engine`
loads it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgepilot.engine.native_tools import (
    PINNED_BINDING,
    ToolMissing,
    find_tool,
    installed_binding,
    tool_version,
    where_to_get,
)
from edgepilot.errors import UserError

if TYPE_CHECKING:
    from edgepilot.engine.base import Engine
    from edgepilot.engine.cpu_check import EngineCheck
    from edgepilot.engine.speculation import Speculation
    from edgepilot.plan.settings import EngineSettings

ENGINE_CHOICES = ("auto", "inprocess", "tools")
ENV_VAR = "EDGEPILOT_ENGINE"


@dataclass(frozen=True)
class EngineInfo:
    """probe's and fit's `engine{kind, path, version}`."""

    kind: str  # "inprocess" | "tools"
    path: str | None  # libllama's directory (in-process) or the program's path (tools)
    version: str | None  # "llama-cpp-python 0.3.36" or what llama-server --version says
    why: str  # how it was chosen, in a few words
    llama_cpp: str | None = (
        None  # the llama.cpp build: "b6580 (abc123)", "0.7.0 (build 11669, commit Debian)"
    )
    pinned: bool = True  # the pinned llama.cpp the memory model is calibrated on (False: another version)
    library: str | None = None  # in-process: the libllama file (loaded, or found where it would load from)
    # in-process: libllama was loaded in this process (False: found by a lookup only); tools: the program ran
    # and said its version
    checked: bool = False
    # the CPU check of this llama.cpp on this CPU (engine/cpu_check.py: EngineCheck.as_json), when one ran or
    # is remembered
    cpu_check: dict[str, Any] | None = None
    # the check saw it crash with repacking on and run without: runs go with --no-repack
    no_repack: bool = False
    # what a run says once about the check (it moved off repacking, or off the other engine), with the fix
    cpu_note: str | None = None


def _binding(load: bool) -> tuple[bool, str, str | None, bool]:
    """Whether the in-process engine is there, why not, its libllama file and whether it was loaded.
    load=False looks without loading llama.cpp: the package and its library file found count (it loads
    where only loading can tell)."""
    from edgepilot.engine import llama_binding

    found = None if load else llama_binding.find_library()
    if found is not None:
        path, why = found
        return path is not None, why, str(path) if path else None, False
    ok, why = llama_binding.binding_available()
    return ok, why, llama_binding.loaded_library() if ok else None, True


def _inprocess_info(why: str, library: str | None, checked: bool) -> EngineInfo:
    from edgepilot.engine.llama_binding import library_dir

    binding = installed_binding() or "unknown"
    return EngineInfo(
        kind="inprocess",
        path=str(Path(library).parent) if library else library_dir(),
        version=f"llama-cpp-python {binding}",
        why=why,
        llama_cpp=f"vendored in llama-cpp-python {binding}",
        pinned=binding == PINNED_BINDING,
        library=library,
        checked=checked,
    )


# Programs of the same package, one of which says its version when the one in use has no --version
# (llama-quantize prints its usage instead).
VERSIONED = ("llama-server", "llama-cli", "llama-bench", "llama-completion")


def _tools_info(tool: Path, why: str) -> EngineInfo:
    v = tool_version(tool)
    for name in VERSIONED if v is None else ():
        sibling = tool.parent / name
        if name != tool.name and sibling.is_file() and os.access(sibling, os.X_OK):
            v = tool_version(sibling)
            if v is not None:
                break
    return EngineInfo(
        kind="tools",
        path=str(tool),
        version=v.text if v else None,
        why=why,
        llama_cpp=v.text if v else None,
        pinned=v is not None and v.source == "built",
        checked=v is not None,
    )


def requested_engine(requested: str | None) -> str:
    choice = (requested or os.environ.get(ENV_VAR) or "auto").strip().lower()
    if choice not in ENGINE_CHOICES:
        source = "--engine" if requested else ENV_VAR
        raise UserError(f"{source} {choice!r} is not an engine: choose one of {', '.join(ENGINE_CHOICES)}")
    return choice


# The programs whose runs multiply matrices on the CPU: the CPU check comes before their first use.
CHECKED_TOOLS = ("llama-server", "llama-bench", "llama-perplexity")
Progress = Callable[[str], None]


def choose_engine(
    requested: str | None = None,
    load: bool = True,
    tool: str = "llama-server",
    gpu: bool = False,
    progress: Progress | None = None,
    check: bool | None = None,
    fresh: bool | str = False,
) -> EngineInfo:
    """The engine for this command; UserError (one line) naming what to install when there is none.
    load=False: decide without loading llama.cpp (probe and fit: an installed binding whose libllama file is
    there counts, and a CPU check is used only when remembered).
    `tool`: the llama.cpp program the command runs through without the in-process engine (bench:
    llama-bench, quantize: llama-quantize ...); the tools engine's path and version are that program's.
    gpu: a GPU device was asked for: auto takes llama.cpp's programs (the in-process build is CPU-only).
    With load, the llama.cpp chosen is checked on this CPU first (engine/cpu_check.py, once per library):
    one that crashes with repacking on runs without it; one that crashes anyway gives way to the other
    engine, or is refused with the rebuild that fixes it. check: run that check (default: with load, for
    the programs that multiply matrices); fresh: run it again even when remembered (probe --check-engine), or
    "failed": only when what is remembered is not a pass (tune)."""
    choice = requested_engine(requested)
    reason = ""
    check = (load and tool in CHECKED_TOOLS) if check is None else check
    crashed: EngineCheck | None = None
    if gpu and choice == "inprocess":
        raise UserError(
            "--engine inprocess runs on the CPU only (its llama.cpp has no GPU backend): use --engine tools "
            "for --device, or --device none"
        )
    if gpu and choice == "auto":
        choice, reason = "tools", "a GPU device was asked for (the in-process engine is CPU-only)"
    if choice in ("auto", "inprocess"):
        found = _binding(False)
        verdict = _cpu_verdict("inprocess", found[2], check, progress, fresh) if found[0] else None
        if verdict is not None and verdict.broken:
            if choice == "inprocess":
                raise UserError(_cpu_fix().refusal(verdict))
            crashed, reason = verdict, "crashed on this CPU in a check"
        else:
            ok, reason, library, loaded = _binding(load) if load else found
            if ok:
                if verdict is None and loaded:
                    verdict = _cpu_verdict("inprocess", library, check, progress, fresh)
                    if verdict is not None and verdict.broken:
                        raise UserError(_cpu_fix().refusal(verdict))
                loads = "llama-cpp-python loads" if loaded else "llama-cpp-python found (not loaded)"
                info = _inprocess_info("asked for" if choice == "inprocess" else loads, library, loaded)
                return _with_verdict(info, verdict)
            if choice == "inprocess":
                fix = "pip install 'edgepilot[inprocess]', or use --engine tools"
                if reason.startswith("has no") and "LLAMA_CPP_LIB_PATH" not in reason:
                    fix = "run `edgepilot build` (it makes the libllama the binding loads)"
                    fix += ", or use --engine tools"
                if "another llama.cpp" in reason:
                    fix = (
                        "unset LLAMA_CPP_LIB_PATH, or use --engine tools to run that llama.cpp's own programs"
                    )
                raise UserError(f"the in-process engine is not available (llama-cpp-python {reason}): {fix}")
    try:
        path = find_tool(tool)
    except ToolMissing:
        if crashed is not None:
            raise UserError(_cpu_fix().refusal(crashed)) from None
        if choice == "tools":
            raise
        raise UserError(
            f"no llama.cpp to run: llama-cpp-python {reason}, and {tool} is not installed; "
            f"{where_to_get(tool)}"
        ) from None
    if gpu and requested_engine(requested) == "auto":
        info = _tools_info(path, reason)
    else:
        info = _tools_info(path, "asked for" if choice == "tools" else f"llama-cpp-python {reason}")
    verdict = _cpu_verdict("tools", str(path), check, progress, fresh)
    if verdict is not None and verdict.broken:
        raise UserError(_cpu_fix().refusal(crashed or verdict))
    info = _with_verdict(info, verdict)
    if crashed is not None:
        info = replace(
            info, cpu_check=crashed.as_json(), cpu_note=_cpu_fix().other_engine_note(crashed, info.kind)
        )
    return info


_checked: dict[tuple[str, str], EngineCheck] = {}


def _cpu_fix() -> Any:
    from edgepilot.engine import cpu_fix  # imported when a check has something to say: start-up stays light

    return cpu_fix


def _cpu_verdict(
    kind: str, target: str | None, run: bool, progress: Progress | None, fresh: bool | str = False
) -> EngineCheck | None:
    """The CPU check of one engine's llama.cpp: run (once per process) when `run`, else only remembered."""
    from edgepilot.engine import cpu_check

    if target is None:
        return None
    if not run:
        return cpu_check.remembered(kind, Path(target))
    key = (kind, target)
    if fresh == "failed" and key not in _checked:  # tune: a remembered crash is checked again
        kept = cpu_check.remembered(kind, Path(target))
        fresh = kept is not None and not kept.full.ok
    if key not in _checked or fresh:
        _checked[key] = cpu_check.check_engine(kind, Path(target), progress=progress, fresh=bool(fresh))
    return _checked[key]


def _with_verdict(info: EngineInfo, verdict: EngineCheck | None) -> EngineInfo:
    if verdict is None:
        return info
    repack_off = verdict.repack_crashes
    note = _cpu_fix().run_note(verdict) if repack_off else None
    return replace(info, cpu_check=verdict.as_json(), no_repack=repack_off, cpu_note=note)


def describe_engine(
    requested: str | None = None,
    load: bool = True,
    gpu: bool = False,
    check: bool = False,
    fresh: bool = False,
) -> tuple[EngineInfo | None, str | None]:
    """For probe and fit: the engine, or why there is none (never raises for a missing engine)."""
    try:
        return choose_engine(requested, load, gpu=gpu, check=check, fresh=fresh), None
    except UserError as exc:
        if requested:  # a bad --engine value is the user's to fix
            raise
        return None, str(exc)


def engine_facts(requested: str | None = None, check: bool = False) -> dict[str, Any]:
    """probe's `engine{kind, path, version, ...}`; kind None with the reason when there is no engine.
    check: run the CPU check of the engine's llama.cpp anew, in a child process (engine/cpu_check.py): a
    llama.cpp that crashes on this CPU ends the child, not probe (else a lookup decides)."""
    from dataclasses import asdict

    info, problem = describe_engine(requested, load=False, check=check, fresh=check)
    if info is not None and check and info.cpu_check is not None:
        ran = info.cpu_check["full"]["outcome"] == "ok" or info.no_repack
        failed = info.cpu_check["full"]["outcome"] == "failed"  # no crash: loading here says why
        loaded_here = describe_engine(requested, load=True)[0] if failed else None
        runs = info.kind == "inprocess" and ran and info.why != "asked for"
        why = "llama-cpp-python runs (checked in a child process)" if runs else info.why
        info = loaded_here or replace(info, checked=ran, why=why)
    if info is not None:
        return asdict(info)
    return {
        "kind": None,
        "path": None,
        "version": None,
        "why": problem,
        "llama_cpp": None,
        "pinned": False,
        "library": None,
        "checked": check,
    }


def _speculate_in_process(engine: Any, spec: Speculation, settings: EngineSettings, verbose: bool) -> None:
    """Our own verify loop on the in-process engine: lookup, or a draft model loaded beside the target."""
    from edgepilot.engine.speculation import advice_args

    if spec.draft is None:
        engine.speculation, engine.speculation_argv = spec, advice_args(spec, settings)
        return
    from edgepilot.engine import draft_decoding

    try:
        engine.drafter = draft_decoding.DraftModel(spec.draft, settings, verbose=verbose)
    except BaseException:
        engine.close()
        raise
    engine.speculation = spec
    engine.speculation_argv = advice_args(spec, settings)


def open_engine(
    info: EngineInfo,
    model: Path,
    settings: EngineSettings,
    verbose: bool = False,
    cpus: list[int] | None = None,
    prompt_cpus: list[int] | None = None,
    speculation: Speculation | None = None,
) -> Engine:
    """Load the model with these settings in the chosen engine (n-gram lookup or a draft model on both)."""
    if info.kind == "inprocess":
        from edgepilot.engine.inprocess import LlamaEngine

        engine = LlamaEngine(model, settings, verbose=verbose)
        if speculation is not None:
            _speculate_in_process(engine, speculation.validate(), settings, verbose)
        return engine
    from edgepilot.engine.server_engine import ServerEngine

    tool = Path(info.path) if info.path else None
    return ServerEngine(
        model,
        settings,
        verbose=verbose,
        cpus=cpus,
        prompt_cpus=prompt_cpus,
        tool=tool,
        speculation=speculation,
    )


def open_session(engine: Engine, reuse: bool = True) -> Any:
    """The engine's multi-turn KV cache: only what is new in each prompt is processed."""
    if engine.kind == "inprocess":
        from edgepilot.engine.session import KVSession

        return KVSession(engine, reuse=reuse)  # type: ignore[arg-type]
    from edgepilot.engine.server_session import ServerSession

    return ServerSession(engine, reuse=reuse)  # type: ignore[arg-type]
