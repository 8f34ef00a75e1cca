"""What the doctor returns. JSON (design.md): `causes[{id, title, evidence[], fix}]`, most likely first."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The fixed vocabulary of design.md, with the title each cause is shown under.
TITLES: dict[str, str] = {
    "killed-by-system": "Killed by the system for memory (Android lmkd or the Linux OOM killer)",
    "out-of-memory-alloc": "A buffer allocation failed: not enough memory for what was asked",
    "context-too-large": "The context (-c) is too large for this device's memory",
    "model-corrupt": "The model file is damaged, incomplete or not a GGUF model",
    "userland-32bit": "A 32-bit userland: too little address space and no AArch64 kernels",
    "slow-storage-fuse": "The model is on slow shared storage (FUSE /sdcard or an SD card)",
    "illegal-instruction": "Illegal instruction: the binary uses CPU features this CPU lacks",
    "vulkan-api-too-old": "The Vulkan driver/loader is older than the 1.2 llama.cpp needs",
    "vulkan-null-function": "The Vulkan driver exports a NULL function (vkGetBufferDeviceAddress)",
    "vulkan-device-lost": "The GPU driver lost the Vulkan device",
    "vulkan-driver-crash": "The Vulkan driver crashed llama.cpp (a signal, not an error message)",
    "gpu-slower-than-cpu": "The GPU is slower than the CPU here: offloading costs speed",
    "speculation-slower-than-plain": "Speculative decoding is slower than plain generation here",
    "thermal-throttling": "The CPU is throttled by heat",
    "too-many-threads": "Too many threads: slow cores hold the fast ones back",
    "background-killed": "Android killed the process in the background (phantom-process killer)",
    "accelerator-unsupported": "The accelerator (OpenCL GPU / NNAPI) is not supported for this model",
    "framework-needs-x86": "The framework needs an x86 CPU (AVX2/AVX512) and does not build or run on ARM",
    "rpc-helper-unreachable": "An RPC helper (rpc-server) could not be reached",
    "rpc-version-mismatch": "An RPC helper runs a different llama.cpp RPC protocol version",
    "rpc-helper-lost": "An RPC helper went away mid-run (killed, crashed or the network dropped)",
    "rpc-link-slow": "The link to the RPC helpers is too slow for the plan (measured against predicted)",
    "engine-library-mismatch": "llama-cpp-python loaded a libllama from another llama.cpp than its own",
    "architecture-unsupported": "The llama.cpp in use does not know this model's architecture",
    "unknown": "No known cause matched",
    "succeeded": "The command succeeded: it exited with status 0",
}

STRONG = 70  # a message that names the cause
LIKELY = 40  # indirect evidence (exit status, device facts plus a generic failure)


@dataclass
class Cause:
    id: str
    title: str
    evidence: list[str]
    fix: str
    score: int = 0  # 0-100: how directly the evidence points here (ranking only)
    # the commands the fix proposes, in order (a quantization before the run), checked by the planner:
    # they fit the budget the failed command had and differ from it (doctor/memory_fix.py); [] when none
    fix_commands: list[list[str]] = field(default_factory=list)


def cause(
    cause_id: str,
    score: int,
    evidence: list[str],
    fix: str,
    title: str | None = None,
    fix_commands: list[list[str]] | None = None,
) -> Cause:
    return Cause(
        id=cause_id,
        title=title or TITLES[cause_id],
        evidence=evidence,
        fix=fix,
        score=score,
        fix_commands=list(fix_commands or []),
    )


@dataclass
class DeviceState:
    """What the device looked like just before or just after a supervised run."""

    available_bytes: int | None
    psi_some_avg10: float | None
    psi_full_avg10: float | None
    hottest_celsius: float | None
    hottest_zone: str | None


@dataclass
class RunRecord:
    """`doctor -- CMD`: how the command ended and what it cost."""

    command: list[str]
    returncode: int  # Python's convention: negative = killed by that signal
    exit_code: int  # the shell's convention: 128 + signal when killed
    signal: int | None
    signal_name: str | None
    wall_seconds: float
    peak_rss_bytes: int | None  # the child's high-water mark (wait4 ru_maxrss)
    before: DeviceState
    after: DeviceState
    memory_limit_bytes: int | None = None
    cgroup: dict[str, Any] = field(default_factory=dict)
    output_lines: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass
class PlanCheck:
    """The memory planner's verdict on the settings that were run (edgepilot.plan.fit)."""

    fits: bool
    budget_bytes: int
    budget_source: str
    n_ctx: int
    peak_rss_bytes: int
    weights_bytes: int
    kv_bytes: int
    compute_reserved_bytes: int
    max_ctx: int
    llama_cpp_args: list[str] = field(default_factory=list)
    budget_account: str = ""  # the budget as a sum that adds up (plan.budget.account_terms), or as given
    # the planner's whole answer, for the fix (doctor/memory_fix.py): not part of the JSON
    fit: Any = field(default=None, repr=False, metadata={"json": False})


@dataclass
class Diagnosis:
    causes: list[Cause]
    checked: list[str]
    exit_code: int | None = None
    signal: int | None = None
    command: list[str] | None = None
    model: str | None = None
    run: RunRecord | None = None
    plan: PlanCheck | None = None

    @property
    def top(self) -> Cause:
        return self.causes[0]
