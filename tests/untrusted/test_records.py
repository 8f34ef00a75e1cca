"""The bounded readers: an overlong line is skipped chunk by chunk, a log keeps its head and its tail."""

from __future__ import annotations

import io

import pytest

from edgepilot.records import HeadTail, LineTooLong, read_line


class CountingReader(io.BytesIO):
    """Records the largest piece handed out, to show a long line is never held whole."""

    largest = 0

    def readline(self, size: int | None = -1) -> bytes:
        line = super().readline(size)
        self.largest = max(self.largest, len(line))
        return line


def test_an_overlong_line_is_skipped_and_the_next_one_read():
    stream = CountingReader(b"short\r\n" + b"y" * 5_000_000 + b"\nafter\nlast")
    assert read_line(stream, 1000) == b"short"
    with pytest.raises(LineTooLong) as caught:
        read_line(stream, 1000)
    assert caught.value.size == 5_000_001 and caught.value.limit == 1000
    assert stream.largest <= 64 << 10
    assert read_line(stream, 1000) == b"after"
    assert read_line(stream, 1000) == b"last"
    assert read_line(stream, 1000) is None


def test_a_line_of_exactly_the_limit_is_read():
    assert read_line(io.BytesIO(b"abcd\n"), 4) == b"abcd"
    assert read_line(io.BytesIO(b"abcd"), 4) == b"abcd"
    with pytest.raises(LineTooLong):
        read_line(io.BytesIO(b"abcde"), 4)


def _log(n: int) -> bytes:
    return b"".join(b"line %d\n" % i for i in range(n))


@pytest.mark.parametrize("seekable", [True, False])
def test_a_long_log_keeps_head_and_tail(seekable):
    data = _log(100_000)
    f = io.BytesIO(data)
    if not seekable:
        f.seekable = lambda: False  # type: ignore[method-assign]
    lines = HeadTail(1000, 4000).read_from(f).lines(10, 10, 100)
    assert lines[:2] == ["line 0", "line 1"]
    assert lines[-1] == "line 99999"
    assert len(lines) == 21 and "bytes of the log not read" in lines[10]


def test_a_short_log_is_whole_and_a_long_line_is_cut():
    data = _log(5) + b"z" * 500 + b"\n\xff\xfe end\n"
    lines = HeadTail(1 << 20, 1 << 20).read_from(io.BytesIO(data)).lines(100, 100, 100)
    assert lines[:5] == [f"line {i}" for i in range(5)]
    assert lines[5] == "z" * 100 + "…"
    assert lines[6] == "\ufffd\ufffd end"
    assert len(lines) == 7


def test_many_lines_are_cut_to_the_line_limits_without_a_byte_cut():
    lines = HeadTail(1 << 20, 1 << 20).read_from(io.BytesIO(_log(1000))).lines(3, 2, 100)
    assert lines[:3] == ["line 0", "line 1", "line 2"]
    assert lines[-2:] == ["line 998", "line 999"]
    assert len(lines) == 6
