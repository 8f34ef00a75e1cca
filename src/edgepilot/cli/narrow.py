"""Output that fits the terminal, from a 40-column phone in portrait to a 120-column desktop.

What every renderer shares: the width and the narrow threshold, prose that rich wraps, commands wrapped with
shell line continuations (still copy-pasteable), and record tables that become one block per record when
the full table does not fit. Numbers never wrap or get an ellipsis: numeric columns are as wide as their
widest cell, and only name and note columns fold.

A str handed to these functions is data, never markup, and is printed through edgepilot.shown (a file name's
escape sequence shows as `\x1b`); a Text is the caller's to build from shown() pieces.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from edgepilot.shown import shell_word, shown

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import ProgressColumn
    from rich.table import Table
    from rich.text import Text

NARROW = 70  # below this: decorative columns go, records are stacked
TEXT_FLOOR = 10  # a name or note column folds, but not narrower than this
COMMAND_INDENT = 2  # a command under its label
CONTINUATION_INDENT = 4  # the lines after a ` \`
HANG_ROOM = 20  # a wrapped line hangs under its marker only if this much room is left for the text

# what a line's continuations align under: its indentation, then a list marker (`- `, `· `, `1. `) or a
# one-word label (`evidence: `, `note: `)
_MARKER = re.compile(r"( *)(?:[-·•*] |\d{1,2}\. |[^\s:]{1,20}: )?")


def is_narrow(out: Console) -> bool:
    return out.width < NARROW


def say(out: Console, text: str | Text, style: str | None = None) -> None:
    """A line of prose (str: data, never markup) wrapped at the width with a hanging indent: its
    continuations start under the text after its indentation and marker, so they never read as new items.
    A word longer than the room (a path) is never split: it overflows its line, whole."""
    from rich.text import Text

    line = Text(shown(text), style=style or "") if isinstance(text, str) else text
    hang = hanging_indent(line.plain, out.width)
    if line.cell_len <= out.width:
        out.print(line)
        return
    head, body = line.divide([hang])
    pieces = [body[p] for p in _word_lines(body.plain, out.width - hang)]  # a word is never split
    blank = Text(" " * hang, style=line.style)
    floor = len(_MARKER.match(line.plain).group(1))  # the item's own indentation
    if head.plain.strip() and pieces[0].cell_len > out.width - hang:  # a long word: not beside its marker
        head.rstrip()
        out.print(head)
        head = _lead(blank, pieces[0].cell_len, out.width, floor)
    for n, piece in enumerate(pieces):
        lead = head if n == 0 else _lead(blank, piece.cell_len, out.width, floor)
        out.print(Text.assemble(lead, piece), soft_wrap=True)


def _lead(lead: Text, word: int, width: int, floor: int) -> Text:
    """The indentation before a continuation: less of it (down to the item's own, `floor`) for a word too
    long to follow it, so that the word still fits the screen when it can; else it overflows, whole."""
    from rich.text import Text

    if lead.cell_len + word <= width:
        return lead
    return Text(" " * max(width - word, floor), style=lead.style)


def hanging_indent(plain: str, width: int) -> int:
    """The column a wrapped line's continuations start at: under the text after its marker, else under its
    first character, whichever leaves HANG_ROOM columns (0 when neither does)."""
    m = _MARKER.match(plain)
    indent = len(m.group(1))
    for hang in (m.end(), indent):
        if width - hang >= HANG_ROOM and hang < len(plain):
            return hang
    return 0


def print_items(out: Console, items: Sequence[str | Text], style: str = "", sep: str = " · ") -> None:
    """Short items (`label figures`) joined by sep, packed into lines of the width: an item is never split
    (a wider one alone on its line is wrapped by rich)."""
    from rich.text import Text

    line = Text(style=style)
    for item in items:
        piece = item if isinstance(item, Text) else Text(shown(item))
        if line.plain and line.cell_len + len(sep) + piece.cell_len > out.width:
            out.print(line)
            line = Text(style=style)
        if line.plain:
            line.append(sep)
        line.append_text(piece)
    if line.plain:
        out.print(line)


def command_lines(argv: Sequence[str], width: int, indent: int = 0) -> list[str]:
    """argv shell-quoted in lines of at most `width` columns, each but the last ending with ` \\`.

    A flag stays with its value when both fit on a line; a single token longer than the width (a long path)
    is the only thing that may exceed it, never cut (a cut path could not be pasted)."""
    tokens = [shell_word(a) for a in argv]
    groups: list[list[str]] = []
    i = 0
    while i < len(tokens):
        if tokens[i].startswith("-") and i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
            groups.append(tokens[i : i + 2])
            i += 2
        else:
            groups.append([tokens[i]])
            i += 1
    pad = " " * indent
    more = " " * (indent + CONTINUATION_INDENT)
    pieces = [p for g in groups for p in _fitting(g, width - len(more) - 2)]
    lines: list[str] = []
    current = pad + pieces[0] if pieces else pad
    for n, piece in enumerate(pieces[1:], 2):
        room = width if n == len(pieces) else width - 2  # room for the ` \\` unless it is the last
        if len(current) + 1 + len(piece) <= room:
            current += " " + piece
        else:
            lines.append(current + " \\")
            current = more + piece
    lines.append(current)
    return lines


def _fitting(group: list[str], room: int) -> list[str]:
    """A flag and its value as one piece when it fits a continuation line, else as two."""
    joined = " ".join(group)
    return [joined] if len(joined) <= room else group


def print_command(out: Console, label: str, argv: Sequence[str], style: str = "cyan") -> None:
    """`label command` on one line when it fits; else the label, then the command wrapped with ` \\`."""
    from rich.text import Text

    joined = " ".join(shell_word(a) for a in argv)
    one = f"{label} {joined}" if label else joined
    if len(one) <= out.width:
        out.print(Text(one, style=style), soft_wrap=True)
        return
    indent = 0
    if label:
        out.print(Text(label, style=style))
        indent = COMMAND_INDENT
    for line in command_lines(argv, out.width, indent):
        out.print(Text(line, style=style), soft_wrap=True)


def progress_columns(*figures: ProgressColumn) -> tuple[ProgressColumn, ...]:
    """A progress line on one line at any width, for Progress(..., expand=True): the description (data, never
    markup) and the bar share what the figures (a count, the elapsed time) leave, 2:1, and the description is
    the one cut (with an ellipsis); the figures never are. rich's own layout drops the figures first."""
    from rich.progress import BarColumn, TextColumn
    from rich.table import Column as TableColumn

    text = TableColumn(ratio=2, no_wrap=True, overflow="ellipsis")
    bar = BarColumn(bar_width=None, table_column=TableColumn(ratio=1))
    return (TextColumn("{task.description}", markup=False, table_column=text), bar, *figures)


@dataclass(frozen=True)
class Column:
    header: str
    numeric: bool = False  # right-justified, never wrapped or cut
    decorative: bool = False  # left out below NARROW columns (bars)
    style: str = ""
    short: str = ""  # the header below NARROW columns when the table does not fit with the full one


def print_records(
    out: Console,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str | Text]],
    *,
    title: str | None = None,
    row_styles: Sequence[str | None] | None = None,
    stack_when_narrow: bool = True,
) -> None:
    """A table when it fits the width (boxed, else compact), else one block per record: the first column
    (the name) on its own line, then `header value` pairs. Cells and the title that are str are data, never
    markup (the title's lines are its own).

    Below NARROW columns a table is made to fit before records are stacked: decorative columns go, columns
    with no value in any row go, a value every row shares is said once under the title, and headers take
    their short form. There a word (a file name, a path) is never split: a table that would fold one is not
    used, unless stack_when_narrow is False (tables whose text columns are prose notes)."""
    from rich.text import Text

    styles = list(row_styles) if row_styles is not None else [None] * len(rows)
    cells = [[c if isinstance(c, Text) else Text(shown(c)) for c in row] for row in rows]
    heading = Text("\n".join(map(shown, title.split("\n")))) if title else None
    keep = [i for i, c in enumerate(columns) if not (c.decorative and is_narrow(out))]
    cols = [columns[i] for i in keep]
    cells = [[row[i] for i in keep] for row in cells]
    if not is_narrow(out):
        if not _print_table(out, cols, cells, styles, heading, whole_words=False):
            _stacked(out, cols, cells, styles, heading)
        return
    whole_words = stack_when_narrow
    if _print_table(out, cols, cells, styles, heading, whole_words):
        return
    cols, cells, shared = _without_shared(cols, cells)
    if shared:
        said = Text(" · ".join(f"{h} {v}" for h, v in shared), style="dim")
        heading = Text.assemble(heading, "\n", said) if heading else said
    if _print_table(out, cols, cells, styles, heading, whole_words):
        return
    short = [Column(c.short or c.header, c.numeric, c.decorative, c.style) for c in cols]
    if short != cols and _print_table(out, short, cells, styles, heading, whole_words):
        return
    _stacked(out, cols, cells, styles, heading)


def _print_table(
    out: Console,
    cols: list[Column],
    cells: list[list[Text]],
    styles: list[str | None],
    heading: Text | None,
    whole_words: bool,
) -> bool:
    """The roomiest table that fits the width (boxed with headers on one line, boxed with headers wrapped at
    spaces, compact), printed; False when none does."""
    for compact, whole in ((False, True), (False, False), (True, False)):
        table = _table(cols, cells, styles, heading, compact, whole, whole_words)
        if _needed(table, cols, cells, whole, whole_words) <= out.width:
            out.print(table)
            return True
    return False


def _without_shared(
    cols: list[Column], cells: list[list[Text]]
) -> tuple[list[Column], list[list[Text]], list[tuple[str, str]]]:
    """The columns without those that say the same in every row (the first, the record's name, stays): an
    empty or `-` one is left out, any other value is returned as (header, value) to be said once."""
    if len(cells) < 2:
        return cols, cells, []
    keep, shared = [0], []
    for i, col in enumerate(cols[1:], 1):
        values = {row[i].plain.strip() for row in cells}
        if len(values) > 1:
            keep.append(i)
        elif (value := values.pop()) not in ("", "-"):
            shared.append((col.header, value))
    return [cols[i] for i in keep], [[row[i] for i in keep] for row in cells], shared


def _longest_word(text: Text) -> int:
    from rich.cells import cell_len

    return max((cell_len(w) for w in text.plain.split()), default=0)


def _widths(col: Column, column_cells: list[Text], whole: bool, whole_words: bool) -> tuple[int, int]:
    """(width a numeric column takes, floor of a text column); whole: the header on one line; whole_words:
    a text column is at least as wide as its longest word."""
    longest_word = len(col.header) if whole else max((len(w) for w in col.header.split()), default=1)
    widest = max((c.cell_len for c in column_cells), default=0)
    if col.numeric:
        return max(widest, longest_word), 0
    floor = max(min(widest, TEXT_FLOOR), min(longest_word, TEXT_FLOOR), 1)
    if whole_words:
        floor = max(floor, longest_word, *(_longest_word(c) for c in column_cells))
    return 0, floor


def _table(
    cols: list[Column],
    cells: list[list[Text]],
    styles: list[str | None],
    title: Text | None,
    compact: bool,
    whole: bool,
    whole_words: bool,
) -> Table:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    if title is not None:
        title = Text.assemble(title, style="table.title")  # a Text title does not get the table's style
    if compact:
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, padding=0)
    else:
        table = Table(title=title, title_justify="left")
    for i, col in enumerate(cols):
        fixed, floor = _widths(col, [row[i] for row in cells], whole, whole_words)
        if col.numeric:
            justify = "left" if col.decorative else "right"
            table.add_column(col.header, justify=justify, width=fixed, overflow="fold", style=col.style)
        else:
            table.add_column(col.header, overflow="fold", min_width=floor, style=col.style)
    for row, style in zip(cells, styles, strict=True):
        table.add_row(*row, style=style)
    return table


def _needed(table: Table, cols: list[Column], cells: list[list[Text]], whole: bool, whole_words: bool) -> int:
    """The narrowest the table renders in without cutting a number (text columns at their floor)."""
    total = table._extra_width  # borders and separators (rich has no public measure for this)
    for i, col in enumerate(cols):
        fixed, floor = _widths(col, [row[i] for row in cells], whole, whole_words)
        total += (fixed or floor) + table._get_padding_width(i)
    return total


def _stacked(
    out: Console, cols: list[Column], cells: list[list[Text]], styles: list[str | None], title: Text | None
) -> None:
    """One block per record: its name, then its `header value` pairs (print_pairs), words never split."""
    from rich.text import Text

    if title:
        out.print(Text.assemble(title, style="bold"))
    for row, style in zip(cells, styles, strict=True):
        name = row[0].copy()
        name.stylize("bold")
        _print_words(out, name, "", "", style or "")
        pairs = [(c.header, cell) for c, cell in zip(cols[1:], row[1:], strict=True) if cell.plain.strip()]
        print_pairs(out, pairs, indent=2, style=style or "")


def print_pairs(
    out: Console,
    pairs: Sequence[tuple[str, str | Text]],
    *,
    indent: int = 0,
    gap: int = 1,
    label_style: str = "dim",
    style: str = "",
) -> None:
    """`label value` lines, the values aligned after the widest label and wrapped at spaces only: a value
    with a word too long to follow its label starts on the next line, and a word longer than the screen is
    printed whole (a split file name could not be copied). A str value is data, never markup."""
    from rich.cells import cell_len
    from rich.text import Text

    width = max((cell_len(label) for label, _ in pairs), default=0)
    for label, value in pairs:
        text = value if isinstance(value, Text) else Text(shown(value))
        lead = Text.assemble(" " * indent, (label.ljust(width), label_style), " " * gap)
        if _longest_word(text) > out.width - lead.cell_len:
            out.print(Text.assemble(" " * indent, (label, label_style)), style=style)
            more = " " * (indent + CONTINUATION_INDENT)
            _print_words(out, text, more, more, style, indent)
        else:
            _print_words(out, text, lead, " " * lead.cell_len, style, indent)


def _print_words(out: Console, text: Text, first: str | Text, rest: str, style: str, floor: int = 0) -> None:
    """text after `first` (as wide as `rest`, which leads its continuation lines), wrapped at spaces, never
    inside a word: a word longer than the room is a line of its own, wider than the screen if it must."""
    from rich.text import Text

    for n, line in enumerate(_word_lines(text.plain, out.width - len(rest))):
        piece = text[line]
        if n == 0 and isinstance(first, Text):  # a label: the value's first line stays beside it
            lead = first
        else:  # an indentation: less of it for a word too long to follow it
            lead = _lead(Text(first if n == 0 else rest), piece.cell_len, out.width, floor)
        out.print(Text.assemble(lead, piece), style=style, soft_wrap=True)


def _word_lines(plain: str, room: int) -> list[slice]:
    """The lines of plain packed word by word into `room` columns, as slices (the spaces at a break
    dropped)."""
    from rich.cells import cell_len

    lines: list[slice] = []
    start, end = 0, None  # the first line keeps what comes before its first word (an indentation)
    for word in re.finditer(r"\S+", plain):
        if end is not None and cell_len(plain[start : word.end()]) > room:
            lines.append(slice(start, end))
            start = word.start()
        end = word.end()
    lines.append(slice(start, end if end is not None else len(plain)))
    return lines
