"""A conversation as prompt tokens that fit the context: the model's chat template (or a plain transcript for
a model without one), and when history + the new turn + room for the answer exceed the context, the oldest
turns after the system prompt are dropped and the conversation rendered again (chat and serve both do this).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgepilot.engine.base import Engine
from edgepilot.errors import UserError

TRANSCRIPT_STOP = "\nUser:"


class ConversationTooLong(UserError):
    """Even the newest message alone (with the system prompt) leaves no room for an answer."""


def fallback_prompt(messages: list[tuple[str, str]]) -> str:
    """For a model without a chat template llama.cpp knows (usually a base model, like the bundled Gemma 3
    270M): a plain transcript ending where the reply starts. A chat template such a model was never trained
    on (chatml, gemma's turns) makes it echo the question; a transcript it continues."""
    return "".join(f"{role.capitalize()}: {content}\n" for role, content in messages) + "Assistant:"


@dataclass
class Rendered:
    tokens: list[int]
    messages: list[tuple[str, str]]  # what was rendered (after dropping old turns)
    templated: bool  # False: the plain transcript (stop at TRANSCRIPT_STOP, strip the reply's lead space)
    dropped: int = 0  # messages dropped to fit
    notes: list[str] = field(default_factory=list)


def render(engine: Engine, messages: list[tuple[str, str]]) -> tuple[list[int], bool]:
    text = engine.chat_messages_prompt(messages)
    templated = text is not None
    return engine.tokenize(text if templated else fallback_prompt(messages)), templated


def fit_conversation(
    engine: Engine, messages: list[tuple[str, str]], n_ctx: int, answer_room: int
) -> Rendered:
    """The conversation's prompt tokens with at least `answer_room` cells left for the reply, dropping the
    oldest turns after a leading system message as needed (never the last message)."""
    tokens, templated = render(engine, messages)
    if len(tokens) + answer_room <= n_ctx:
        return Rendered(tokens, list(messages), templated)
    head = 1 if messages and messages[0][0] == "system" else 0
    kept = list(messages)
    dropped = 0
    while len(kept) - head > 1 and len(tokens) + answer_room > n_ctx:
        # drop one turn: a message and, when an assistant reply follows it, that reply too
        n = 2 if len(kept) - head > 2 and kept[head + 1][0] == "assistant" else 1
        del kept[head : head + n]
        dropped += n
        tokens, templated = render(engine, kept)
    if len(tokens) + answer_room > n_ctx:
        raise ConversationTooLong(
            f"the last message needs {len(tokens)} tokens and the answer {answer_room} more, but the context "
            f"holds {n_ctx}; send a shorter message or use a larger --ctx"
        )
    note = (
        f"context full: dropped the {dropped} oldest message{'s' if dropped != 1 else ''}"
        f"{' after the system prompt' if head else ''} to fit {n_ctx} tokens"
    )
    return Rendered(tokens, kept, templated, dropped, [note])


def answer_room(n_predict: int, n_ctx: int) -> int:
    """Cells kept free for the reply: n_predict, but at most a quarter of the context (a long answer in a
    small context is cut at the context's end instead of dropping most of the history up front)."""
    return max(1, min(n_predict, n_ctx // 4))
