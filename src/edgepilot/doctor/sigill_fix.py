"""The fix for an illegal instruction: which build ran, and a command that works on this CPU.

A SIGILL means the build uses instructions this CPU does not run: a native build made elsewhere, an ARM
-march above the core, or a native build here on a VM that lists AMX without granting its tiles. So
"rebuild with GGML_NATIVE=ON" is the wrong advice wherever the build that crashed was native. What the doctor
reads: what llama.cpp says it was compiled with (`system_info: ... CPU : AVX2 = 1 | AMX_INT8 = 1`), the CPU's
flags (probe), and, for a command that ran here, the CPU check of the program or library it ran
(engine/cpu_check.py, in a child): when it runs without repacking, the same command with `--no-repack` is the
fix that works now, checked to differ from what failed; the rebuild with this CPU's portable flags
(device/build_isa.py) is the fix that lasts.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot.device.build_isa import beyond_portable, cmake_args
from edgepilot.doctor.evidence import Evidence
from edgepilot.engine.cpu_check import EngineCheck, built_with
from edgepilot.program_path import which

ALL_VARIANTS = "-DGGML_CPU_ALL_VARIANTS=ON -DGGML_BACKEND_DL=ON"


@dataclass
class SigillFix:
    fix: str
    evidence: list[str] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)


def _program(argv0: str) -> Path | None:
    found = which(argv0) if os.sep not in argv0 else argv0
    return Path(found) if found and os.path.isfile(found) else None


def _check_of(ev: Evidence) -> EngineCheck | None:
    """The CPU check of what the failed command ran, when it ran on this machine."""
    from edgepilot.engine.cpu_check import check_engine

    if ev.elsewhere or not ev.command or ev.cmd is None:
        return None
    if ev.cmd.tool == "llama.cpp":
        program = _program(ev.command[0])
        return check_engine("tools", program) if program is not None else None
    if ev.cmd.tool == "edgepilot":
        from edgepilot.engine.choice import choose_engine

        try:
            info = choose_engine(load=False)
        except Exception:  # no engine here to check: the rebuild advice stands alone
            return None
        target = info.library if info.kind == "inprocess" else info.path
        return check_engine(info.kind, Path(target)) if target else None
    return None


def _cpu(ev: Evidence) -> tuple[str, list[str]]:
    cpu = ev.probe.cpu if ev.probe is not None else None
    return (cpu.isa, list(cpu.features)) if cpu is not None else ("unknown", [])


def _rebuild(kind: str, isa: str, features: list[str], tried_portable: bool) -> str:
    """The rebuild for this CPU: never the native build (it may be what crashed)."""
    if tried_portable:  # the portable set crashed too: let ggml pick kernels at run time
        return f"rebuild llama.cpp with kernels picked at run time: `cmake -B build {ALL_VARIANTS}`"
    cmake = f"`cmake -B build {cmake_args(isa, features)}`"
    if isa == "unknown":  # a log from another device: its flags are not known here
        return f"rebuild llama.cpp without native flags: {cmake}, or on the device with `edgepilot build`"
    if not kind:
        return f"rebuild llama.cpp with this CPU's portable flags: {cmake}"
    from edgepilot.engine.cpu_fix import rebuild_command

    own = rebuild_command(kind, isa, features)
    return f"rebuild with this CPU's portable flags: `{own}` (llama.cpp itself: {cmake})"


def sigill_fix(ev: Evidence) -> SigillFix:
    """The fix for a SIGILL, with what it rests on; `commands` are run-ready and differ from what failed."""
    isa, features = _cpu(ev)
    compiled = built_with(ev.lines)
    evidence: list[str] = []
    if compiled:
        evidence.append(f"the build that ran was compiled with: {', '.join(compiled)}")
    beyond = beyond_portable(compiled, features) if features else []
    if beyond:
        evidence.append(f"not in this CPU's portable set: {', '.join(beyond)}")
    check = _check_of(ev)
    kind = check.engine if check is not None else ("tools" if ev.cmd and ev.cmd.tool == "llama.cpp" else "")
    tried_portable = bool(compiled) and bool(features) and not beyond
    rebuild = _rebuild(kind, isa, features, tried_portable)
    if check is None or check.full.outcome == "not-run":
        return SigillFix(rebuild, evidence)
    evidence.append(f"edgepilot's CPU check of {check.target}: {check.full.detail}")
    if check.plain is not None:
        evidence.append(f"then {check.plain.detail}")
    repacking = ev.cmd is None or ev.cmd.settings.repack is not False
    if check.repack_crashes and repacking and ev.command:
        now = [*ev.command, "--no-repack"]
        fix = f"it runs without the repacked kernels: `{shlex.join(now)}`; the lasting fix: {rebuild}"
        return SigillFix(fix, evidence, [now])
    return SigillFix(rebuild, evidence, [["edgepilot", "build"]] if kind == "tools" else [])
