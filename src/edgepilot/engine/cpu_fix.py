"""What to say when the CPU check (cpu_check.py) finds llama.cpp crashing on this CPU: the note a run says
once, the refusal when nothing runs, and the fix that lasts: a rebuild with the portable flags of this CPU
(device/build_isa.py), never the native build that crashed.
"""

from __future__ import annotations

from edgepilot.device.build_isa import beyond_portable, cmake_args
from edgepilot.engine.cpu_check import EngineCheck


def _cpu() -> tuple[str, list[str]]:
    from edgepilot.device.cpu import read_cpu
    from edgepilot.device.fs import LIVE_ROOT

    try:
        cpu = read_cpu(LIVE_ROOT)
    except Exception:  # unknown facts: the generic portable flags
        return "unknown", []
    return cpu.isa, list(cpu.features)


def rebuild_command(kind: str, isa: str | None = None, features: list[str] | None = None) -> str:
    """The portable rebuild for one engine on this CPU, as a line to paste."""
    if isa is None or features is None:
        isa, features = _cpu()
    if kind == "tools":
        return "edgepilot build"  # its flags are the portable set of this CPU (toolchain/flags.py)
    from edgepilot.engine.native_tools import PINNED_BINDING, installed_binding

    version = installed_binding() or PINNED_BINDING
    return (
        f'CMAKE_ARGS="{cmake_args(isa, features)}" pip install --force-reinstall --no-deps '
        f"--no-cache-dir llama-cpp-python=={version}"
    )


def _why(check: EngineCheck) -> str:
    beyond = beyond_portable(check.full.built_with, _cpu()[1])
    built = f"; it was built with {', '.join(beyond)}" if beyond else ""
    return f"{check.full.detail}{built}"


def run_note(check: EngineCheck) -> str:
    """Said once by a run that goes on without repacking."""
    return (
        f"this llama.cpp crashed on this CPU in a check ({_why(check)}); this run goes without weight "
        f"repacking (--no-repack), which ran; the lasting fix is a portable rebuild: "
        f"{rebuild_command(check.engine)}"
    )


def other_engine_note(check: EngineCheck, other: str) -> str:
    """Said once when the other engine runs instead."""
    name = "llama-cpp-python" if check.engine == "inprocess" else "llama.cpp's programs"
    return (
        f"{name} crashed on this CPU in a check ({_why(check)}): using {other} instead; the lasting fix is "
        f"a portable rebuild: {rebuild_command(check.engine)}"
    )


def refusal(check: EngineCheck) -> str:
    """One line when this engine cannot run here at all."""
    name = "llama-cpp-python" if check.engine == "inprocess" else "llama.cpp's programs"
    plain = f" and without repacking ({check.plain.signal})" if check.plain and check.plain.crashed else ""
    return (
        f"{name} crashes on this CPU ({_why(check)}{plain}): rebuild it for this CPU with "
        f"`{rebuild_command(check.engine)}`"
    )
