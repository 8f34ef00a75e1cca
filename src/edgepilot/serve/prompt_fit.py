"""A chat request's prompt within its token budget, counted from the newest message back.

fit_conversation (engine/conversation.py) renders the whole conversation again after each turn it drops, so
a request of thousands of short messages cost thousands of renders (2,001 of them held the engine for 57 s).
Here each message is tokenized once, newest first, and counting stops as soon as the budget is passed: the
older messages could not fit and are dropped unread. fit_conversation is then left a conversation about the
size of the budget, and drops at most a turn or two more, exactly.
"""

from __future__ import annotations

from edgepilot.engine.base import Engine
from edgepilot.engine.conversation import Rendered, fit_conversation, render


def message_overhead(engine: Engine) -> int:
    """The tokens the chat template adds around each message (role markers, separators)."""
    one, _ = render(engine, [("user", "")])
    two, _ = render(engine, [("user", ""), ("user", "")])
    return max(0, len(two) - len(one))


def drop_unreachable(
    engine: Engine, messages: list[tuple[str, str]], budget: int, overhead: int
) -> tuple[list[tuple[str, str]], int]:
    """(the messages that may fit `budget` tokens, how many older ones were dropped unread). A leading system
    message and the newest message are always kept; the first message over the budget is kept too, for
    fit_conversation to decide on exactly."""
    head = 1 if messages and messages[0][0] == "system" else 0

    def cost(i: int) -> int:
        role, content = messages[i]
        return len(engine.tokenize(content, add_special=False)) + overhead

    used = sum(cost(i) for i in range(head))
    start = head
    for i in range(len(messages) - 1, head - 1, -1):
        used += cost(i)
        if used > budget:
            start = i
            break
    if start > head and start < len(messages) - 1 and messages[start][0] == "assistant":
        start += 1  # a reply whose question was dropped goes with it, as fit_conversation drops turns
    return messages[:head] + messages[start:], start - head


def fit_within(
    engine: Engine, messages: list[tuple[str, str]], n_ctx: int, room: int, overhead: int
) -> Rendered:
    """fit_conversation's result, at a cost bounded by the budget rather than by the request's length."""
    kept, unread = drop_unreachable(engine, messages, n_ctx - room, overhead)
    r = fit_conversation(engine, kept, n_ctx, room)
    if not unread:
        return r
    dropped = unread + r.dropped
    head = bool(messages) and messages[0][0] == "system"
    note = (
        f"context full: dropped the {dropped} oldest message{'s' if dropped != 1 else ''}"
        f"{' after the system prompt' if head else ''} to fit {n_ctx} tokens"
    )
    return Rendered(r.tokens, r.messages, r.templated, dropped, [note])
