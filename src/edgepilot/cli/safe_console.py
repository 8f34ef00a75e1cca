"""The console human output goes through: what it renders never carries a control or bidi character raw.

The renderers pass data through edgepilot.shown (so a table is measured with the escaped name); this is the
net behind them, for a string from outside that a renderer forgot: it is escaped here, after the layout (a
line it lengthens may wrap at the terminal's edge, but it cannot move the cursor, clear the screen or
reorder the line). rich's own cursor and style codes are control segments and pass untouched.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from edgepilot.shown import is_safe, shown_lines


class SafeConsole(Console):
    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and not is_safe(segment.text):
                yield Segment(shown_lines(segment.text), segment.style)
            else:
                yield segment
