"""The budget's account (plan.budget.account_terms) on screen: one line when it fits the width, else
wrapped between its terms (never inside one), the continuations indented under it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

HANG = 2


def account_lines(terms: Sequence[str], width: int) -> list[str]:
    lines: list[str] = []
    line = ""
    for term in terms:
        if line and len(line) + 1 + len(term) > width:
            lines.append(line)
            line = " " * HANG + term
        else:
            line = f"{line} {term}" if line else term
    if line:
        lines.append(line)
    return lines


def print_account(out: Console, terms: Sequence[str], style: str = "") -> None:
    from rich.text import Text

    for line in account_lines(terms, out.width):
        out.print(Text(line, style=style), soft_wrap=True)
