"""Small helpers the rule modules share: patterns, concrete commands for fixes, numbers in MiB."""

from __future__ import annotations

import re

from edgepilot.doctor.command import shell_join, with_context
from edgepilot.doctor.evidence import Evidence
from edgepilot.doctor.logscan import upto, upto_last
from edgepilot.shown import shell_word

__all__ = ["upto", "upto_last"]  # the rules build their patterns with them

KILLER_LINE = re.compile(
    "|".join(
        (
            r"lowmemorykiller|Out of memory: Kill|oom-kill|invoked oom-killer|Memory cgroup out of memory",
            upto(r"\blmkd\b", r"\bKill\b"),
            upto("am_kill", r"\b(lmk|low ?mem)"),
        )
    ),
    re.I,
)
KILLED_LINE = re.compile(
    r"(^|[\s:])Killed(\s|$)|exited due to signal 9|signal 9 \(Killed\)|killed by signal 9|\bSIGKILL\b|"
    r"Process completed \(signal 9\)",
)
ALLOC_FAIL = re.compile(
    r"failed to allocate|unable to allocate|insufficient memory|bad_alloc|cudaMalloc failed|"
    r"ErrorOutOf(Device|Host)Memory|Cannot allocate memory|"
    r"not enough space in the (context's memory pool|buffer)|"
    r"failed to mmap|mmap failed|MapViewOfFile failed",
    re.I,
)
LOAD_FAIL = re.compile(
    r"failed to load model|error loading model|unable to load model|failed to create context", re.I
)
# Mapping the file failed, or offsets past 4 GiB were miscounted: what a 32-bit process hits with big models.
MAPPING_FAIL = re.compile(
    r"mmap failed|failed to mmap|MapViewOfFile failed|bad_alloc|Cannot allocate memory|"
    r"not within the file bounds",
    re.I,
)
BITS32_TARGET = re.compile(r"armv7|armv8l|armeabi|arm-linux-gnueabi|\bi[3-6]86\b|i[3-6]86-", re.I)
BITS32_LINK = re.compile(r"is 32-bit instead of 64-bit|ELF 32-bit|wrong ELF class", re.I)
SEGV = re.compile(r"SIGSEGV|Segmentation fault|signal 11\b|SEGV_MAPERR|null pointer", re.I)


def mib(n: int | float | None) -> str:
    return "?" if n is None else f"{n / 1048576:.0f} MiB"


def command_with_ctx(ev: Evidence, n_ctx: int) -> str:
    """The user's own command with -c/--ctx set to n_ctx, or the flags when there was no command."""
    if ev.command:
        return f"`{shell_join(with_context(ev.command, n_ctx))}`"
    return f"`-c {n_ctx}` (llama.cpp) / `--ctx {n_ctx}` (edgepilot run)"


def model_name(ev: Evidence) -> str:
    return ev.model or "MODEL.gguf"


def model_word(ev: Evidence) -> str:
    """The model as an argument of a command a fix prints (quoted; $'...' for a control character)."""
    return shell_word(ev.model) if ev.model else "MODEL.gguf"


def round_ctx(n: float) -> int:
    """A context llama.cpp will not pad further: a multiple of 256, at least 256."""
    return max(256, int(n) // 256 * 256)


def suggested_ctx(ev: Evidence) -> tuple[int | None, str]:
    """(context that should fit, where the number comes from): the planner first, else the log's KV size."""
    plan = ev.plan
    if plan is not None and plan.max_ctx > 0:
        return plan.max_ctx, "the memory plan"
    f = ev.facts
    n_ctx = ev.requested.n_ctx or f.n_ctx
    if not n_ctx:
        return None, ""
    per_cell = None
    if f.kv_mib and (f.kv_cells or n_ctx):
        per_cell = f.kv_mib * (1 << 20) / (f.kv_cells or n_ctx)
    elif f.kv_alloc_failed and f.failed_alloc_bytes:
        per_cell = max(f.failed_alloc_bytes) / n_ctx
    available = ev.probe.memory.available_bytes if ev.probe is not None else None
    if per_cell and available:
        # half of what is free for the KV cache: weights, compute buffer and the OS need the rest
        ctx = round_ctx(min(n_ctx / 2, available / 2 / per_cell))
        return ctx, f"the log's KV size ({per_cell / 1024:.0f} KiB per token) and {mib(available)} available"
    if f.n_ctx_train and n_ctx > f.n_ctx_train:
        return round_ctx(f.n_ctx_train), "the model's training context"
    return round_ctx(n_ctx / 4), "a quarter of the context that failed"


def thirty_two_bit_evidence(ev: Evidence) -> list[str]:
    out: list[str] = []
    target = ev.facts.build_target
    if target and BITS32_TARGET.search(target):
        out.append(f"llama.cpp was built for {target}: a 32-bit program")
    out += ev.grep(BITS32_LINK, limit=1)
    cpu = ev.probe.cpu if ev.probe is not None else None
    if cpu is not None and cpu.userland_bits == 32:
        out.append(f"userland: {cpu.arch} ({cpu.userland_bits}-bit) on a {cpu.cpu_bits or '?'}-bit CPU")
    return out
