"""`--help` wrapped at the width without splitting a word.

click wraps help with break_long_words (and at hyphens), so at 50 columns `$EDGEPILOT_ENGINE` became
`$EDGEPILOT_` / `ENGINE` and `-ot PATTERN=BUFFER_TYPE` lost its middle. Here a word longer than the room is
printed whole on its own line (the terminal soft-wraps it; copied, it is still one word), as narrow.say does.
The group's classes carry this to every command and subgroup defined with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import click
from click.formatting import iter_rows, measure_table, term_len


def wrap(text: str, width: int, initial: str = "", subsequent: str = "", paragraphs: bool = False) -> str:
    """click.formatting.wrap_text, never inside a word: paragraphs are separated by an empty line, keep the
    indentation of their first line, and one opened by a `\\b` line is left as written."""
    import textwrap  # its regular expressions compile on import: only for help that is shown

    wrapper = textwrap.TextWrapper(
        width,
        initial_indent=initial,
        subsequent_indent=subsequent,
        replace_whitespace=False,
        break_long_words=False,
        break_on_hyphens=False,
    )
    text = text.expandtabs()
    if not paragraphs:
        return wrapper.fill(text)
    pars: list[list[str]] = [[]]
    for line in text.splitlines():
        if line:
            pars[-1].append(line)
        elif pars[-1]:
            pars.append([])
    out = []
    for lines in filter(None, pars):
        extra = " " * (term_len(lines[0]) - term_len(lines[0].lstrip()))
        if lines[0].strip() == "\b":
            raw = lines[1:]
            out.append("\n".join((initial if n == 0 else subsequent) + ln for n, ln in enumerate(raw)))
            continue
        wrapper.initial_indent, wrapper.subsequent_indent = initial + extra, subsequent + extra
        out.append(wrapper.fill(" ".join([lines[0].lstrip(), *lines[1:]])))
    return "\n\n".join(out)


class WholeWordsFormatter(click.HelpFormatter):
    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        self.write(wrap(text, self.width, indent, indent, paragraphs=True) + "\n")

    def write_dl(self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        rows = list(rows)
        widths: Sequence[int] = measure_table(rows)
        if len(widths) != 2:
            raise TypeError("Expected two columns for definition list")
        first_col = min(widths[0], col_max) + col_spacing
        hang = " " * (first_col + self.current_indent)
        for first, second in iter_rows(rows, len(widths)):
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            if term_len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - term_len(first)))
            else:
                self.write("\n" + hang)
            lines = wrap(second, max(self.width - first_col - 2, 10), paragraphs=True).splitlines() or [""]
            self.write(lines[0] + "\n")
            for line in lines[1:]:
                self.write((hang + line if line else "") + "\n")


class Context(click.Context):
    formatter_class = WholeWordsFormatter


class Command(click.Command):
    context_class = Context


class Group(click.Group):
    context_class = Context
    command_class = Command
    group_class = type  # a subgroup is a Group too
