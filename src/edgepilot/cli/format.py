"""Small formatting helpers shared by the renderers."""

from __future__ import annotations


def mib(n_bytes: int | float | None) -> str:
    if n_bytes is None:
        return "?"
    return f"{n_bytes / 1048576:.1f} MiB"


def human_bytes(n_bytes: int | float | None) -> str:
    if n_bytes is None:
        return "?"
    value = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} TiB"


def human_count(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)
