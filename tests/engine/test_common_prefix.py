"""The tokens two texts share from the start (engine/base.py's common_prefix): what a chat turn keeps of the
cache and what a draft model's cache keeps of the target's text each step, on contexts of thousands of
tokens, equal to the plain token-by-token count wherever the texts part."""

from __future__ import annotations

import random

from edgepilot.engine.base import PREFIX_BLOCK, common_prefix


def _plain(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def test_the_shared_start_is_found_wherever_the_texts_part():
    cached = list(range(5000)) + [7, 8, 9]
    cases = [
        [*range(5000), 7, 1],  # a draft step: the target kept one of the draft's tokens
        [*range(5000), 7, 8, 9, 10],  # it kept them all and chose one more
        list(range(5000)),
        [*range(10), 99, *range(11, 5000)],  # changed far back (a new turn)
        list(range(PREFIX_BLOCK)),
        [],
    ]
    for text in cases:
        assert common_prefix(cached, text) == common_prefix(text, cached) == _plain(cached, text)
    rng = random.Random(7)
    for _ in range(300):
        a = [rng.randrange(3) for _ in range(rng.randrange(0, 3 * PREFIX_BLOCK))]
        cut = rng.randrange(0, len(a) + 1)
        b = a[:cut] + [rng.randrange(3) for _ in range(rng.randrange(0, 50))]
        assert common_prefix(a, b) == _plain(a, b)
