"""The short lane: a second, small context on the worker's model, so a short request is answered while a long
one runs (engine/turns.py has how the two take turns).

Its memory is the second context's alone (KV cache, the compute pages a small graph touches, the logits row):
the weights are the main context's. It is planned into the worker's peak like serve's HTTP stack, and left
out, with a note, when the budget has no room for it beside the context the main lane would otherwise get.
Which requests take it is the front's call, from an upper bound on their tokens (short_enough).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from edgepilot.plan.planner import Planner, load_model_facts, read_device
from edgepilot.plan.settings import EngineSettings

LANE_HEADER = "x-edgepilot-lane"  # front -> worker: which lane a request takes
SHORT = "short"
# llama-server fills each batch slot by slot in id order, and a slot still reading its prompt fills the batch
# up to n_batch: a short request must be in the first slot for its tokens to go before the long prompt's
# next chunk (in the second, it waits for the whole long prompt).
SHORT_SLOT_ID, MAIN_SLOT_ID = 0, 1
# Upper bounds for a prompt's tokens before it is tokenized: a character is at most 4 byte tokens (byte
# fallback), and a chat template adds a few tokens per message and around the conversation.
TOKENS_PER_CHAR = 4
TOKENS_PER_MESSAGE = 8
TEMPLATE_TOKENS = 64


def short_settings(main: EngineSettings, n_ctx: int) -> EngineSettings:
    """The short lane's context: the main lane's settings at a small context (and its batches within it)."""
    n_batch = min(main.n_batch, n_ctx)
    return replace(main, n_ctx=n_ctx, n_batch=n_batch, n_ubatch=min(main.n_ubatch, n_batch))


def short_lane_bytes(
    model_path: Path, main: EngineSettings, n_ctx: int, root: str | Path = "/", slot: bool = False
) -> int:
    """What the second context adds to the worker's resident memory. slot: llama-server's second slot, whose
    cells join the one KV pool and whose tokens join the main slot's batches (no compute buffer of its
    own)."""
    _, header, arch = load_model_facts(model_path)
    memory = Planner(header, arch, read_device(root)).predict(short_settings(main, n_ctx)).memory
    if slot:
        return memory.kv_bytes + memory.output_bytes
    return memory.kv_bytes + memory.compute_touched_bytes + memory.compute_work_bytes + memory.output_bytes


def pinned_to_slot(body: bytes, short: bool) -> bytes:
    """An admitted body (JSON the front wrote itself) sent to llama-server's slot for its lane."""
    request = json.loads(body)
    request["id_slot"] = SHORT_SLOT_ID if short else MAIN_SLOT_ID
    return json.dumps(request).encode()


def short_enough(chars: int, n_messages: int, max_tokens: int, n_ctx: int) -> bool:
    """Whether a request surely fits the short lane whole: its prompt and its whole answer."""
    bound = TOKENS_PER_CHAR * chars + TOKENS_PER_MESSAGE * n_messages + TEMPLATE_TOKENS
    return bound + max_tokens <= n_ctx
