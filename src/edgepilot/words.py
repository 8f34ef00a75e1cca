"""Counted nouns for messages: `1 thread`, `2 threads` (never `1 threads` nor `thread(s)`)."""

from __future__ import annotations

# the nouns whose plural is not noun + "s"
_IRREGULAR = {"entry": "entries"}


def count(n: object, noun: str, plural: str | None = None) -> str:
    """`n noun`, the noun in its plural unless n is 1 (`plural` for one that is not noun + "s"); n may be
    "?" for a count not known."""
    return f"{n} {noun if n == 1 else plural or _IRREGULAR.get(noun, noun + 's')}"
