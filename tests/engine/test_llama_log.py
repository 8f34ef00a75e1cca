"""The captured llama.cpp log keeps the newest lines and marks stay valid after old lines are dropped."""

from __future__ import annotations

from edgepilot.engine import llama_log


def test_marks_survive_the_ring_buffer_dropping_old_lines():
    start = llama_log.mark()
    for i in range(llama_log._MAX_LINES + 50):
        llama_log._callback(1, f"line {i}\n".encode(), None)
    assert llama_log.mark() - start == llama_log._MAX_LINES + 50
    recent = llama_log.mark()
    llama_log._callback(1, b"partial ", None)
    llama_log._callback(5, b"line\n", None)  # llama.cpp continues a line with level CONT
    assert llama_log.lines_since(recent) == ["partial line\n"]
    kept = llama_log.lines_since(start)
    assert len(kept) == llama_log._MAX_LINES and kept[-1] == "partial line\n"
