"""A line that wraps on a phone screen (40 or 50 columns) keeps its indentation: the continuations of an
indented item (the doctor's evidence and fix, probe's notes) never start left of its first line, so they
never read as a new item."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

NARROW_WIDTHS = (40, 50)
WIDE = 1000  # nothing wraps: one line per item


def render(fn, result, width: int) -> list[str]:
    buf = io.StringIO()
    fn(result, Console(width=width, file=buf, color_system=None, legacy_windows=False))
    return buf.getvalue().splitlines()


def _chars(line: str) -> str:
    return re.sub(r"\s", "", line)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def spans(item: str, lines: list[str]) -> list[list[str]]:
    """Every run of consecutive lines that is `item` wrapped (its characters but the spaces, in order)."""
    want = _chars(item)
    found = []
    for start, first in enumerate(lines):
        if not _chars(first) or not want.startswith(_chars(first)):
            continue
        got, end = "", start
        while end < len(lines) and want.startswith(got + _chars(lines[end])) and len(got) < len(want):
            got += _chars(lines[end])
            end += 1
        if got == want:
            found.append(lines[start:end])
    return found


def check_wrapped(fn, result) -> int:
    """Each indented item of the wide rendering, found wrapped in the narrow ones: its continuations are
    indented at least as much as its first line. How many wrapped items were checked."""
    items = [line.rstrip() for line in render(fn, result, WIDE) if line.strip() and _indent(line)]
    checked = 0
    for width in NARROW_WIDTHS:
        lines = render(fn, result, width)
        for item in items:
            for span in spans(item, lines):
                if len(span) < 2 or not _indent(span[0]):
                    continue
                checked += 1
                first = _indent(span[0])
                for more in span[1:]:
                    shown = "\n".join(lines)
                    assert _indent(more) >= first, f"{more!r} of {item!r} at {width}:\n{shown}"
    return checked


def test_doctor_evidence_and_fix_keep_their_indentation(gemma_path):
    from edgepilot.cli.doctor_cmd import render_diagnosis
    from edgepilot.doctor.diagnose import diagnose

    logs = Path(__file__).resolve().parents[1] / "logs"
    checked = 0
    for log in sorted(logs.glob("*.txt")):
        d = diagnose(log.read_text(errors="replace").splitlines(), model=str(gemma_path), root=None)
        checked += check_wrapped(render_diagnosis, d)
    assert checked > 50  # most evidence and fix lines are longer than a phone screen


def test_probe_notes_keep_their_indentation(devices):
    from edgepilot.cli.probe_render import render_probe
    from edgepilot.device.probe import probe

    checked = 0
    for tree in sorted(p for p in devices.iterdir() if p.is_dir()):
        checked += check_wrapped(render_probe, probe(tree))
    assert checked > 20


@pytest.mark.parametrize(
    ("line", "width", "hang"),
    [
        ("   evidence: a long line", 40, 13),  # under the text after the label
        ("note: overcommit mode unknown", 40, 6),
        ("  - an item", 40, 4),
        ("1. oom-killed — the kernel killed it", 40, 3),
        ("  FUSE (Android shared storage): slow", 40, 2),  # a label of several words: its indentation
        ("   evidence: a long line", 30, 3),  # the label would leave too little room
        ("plain prose that wraps", 40, 0),
    ],
)
def test_hanging_indent(line, width, hang):
    from edgepilot.cli.narrow import hanging_indent

    assert hanging_indent(line, width) == hang
