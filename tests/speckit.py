"""What the speculation tests share: the paragraph a model is asked to write again, and the comparison of
two samplings' shares of one token."""

from __future__ import annotations

import math
from collections import Counter

TEXT = (
    "The quick brown fox jumps over the lazy dog near the river bank, while the farmer watches from his old "
    "wooden porch and the sun sets slowly behind the hills. Children run home from school, laughing, and the "
    "baker closes his shop after a long day of making bread for the whole village."
)
# a short text to be said again, for the slow lanes (qemu, lavapipe): 19 tokens, longer than lookup's 12-token
# n-gram, so lookup drafts from it
LINES = "The quick brown fox jumps over the lazy dog.\nThe farmer watches from his porch.\n"


def share_se(a: Counter, b: Counter, n: int) -> tuple[float, float, float]:
    """The share of the most common token (of both together) in each of two samplings of n, and the standard
    error of their difference."""
    token = (a + b).most_common(1)[0][0]
    pa, pb = a[token] / n, b[token] / n
    pooled = (pa + pb) / 2
    return pa, pb, math.sqrt(max(pooled * (1 - pooled), 1 / n) * 2 / n)
