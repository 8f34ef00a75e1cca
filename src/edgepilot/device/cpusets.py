"""CPU sets in the kernel's cpulist syntax (`0-3,6`) and as llama.cpp's hex masks."""

from __future__ import annotations

MAX_CPUS = 4096  # the kernel's NR_CPUS ceiling: a larger id in a file is damage, not a CPU


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()  # "²".isdigit() is True, int("²") a ValueError


def parse_cpulist(text: str) -> list[int]:
    """Kernel cpulist syntax: `0-3,6` -> [0, 1, 2, 3, 6]; ValueError if malformed."""
    cpus: list[int] = []
    for part in text.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        if not _digits(lo) or (dash and not _digits(hi)):
            raise ValueError(part)
        first, last = int(lo), int(hi) if dash else int(lo)
        if last < first or last >= MAX_CPUS:
            raise ValueError(part)
        cpus.extend(range(first, last + 1))
    return sorted(set(cpus))


def cpulist(cpus: list[int] | tuple[int, ...] | None) -> str:
    """[0, 1, 2, 3, 6] -> "0-3,6" (the inverse of parse_cpulist)."""
    if not cpus:
        return ""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    start = prev = ordered[0]
    for c in [*ordered[1:], None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if c is not None:
            start = prev = c
    return ",".join(parts)


def cpu_mask(cpus: list[int] | tuple[int, ...] | None) -> str:
    """The hex mask llama-bench's -C/--cpu-mask takes ("0x0" = no mask)."""
    return hex(sum(1 << c for c in cpus or ()))
