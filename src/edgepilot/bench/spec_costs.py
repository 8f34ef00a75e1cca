"""What speculation costs on this device, measured in this process with llama.cpp's C API, and the speed-up
it predicts (issue 42, part 3).

A verify step decodes the chosen token plus k drafted ones in one batch with logits at every position. How
much that costs against one token is the device's: a bandwidth-bound phone reads the weights once either way
and pays little more; a compute-bound CPU pays almost k+1 times. So the curve is measured: one batch of b
tokens (b = 1 .. 9, and lookup's longer drafts) at a context already `depth` tokens deep, the batch removed
from the cache after each (`llama_memory_seq_rm`), rounds alternating over the sizes, medians.

With the target's curve T(b), the draft model's D(b) and the target's acceptance, the speed-up of a draft
length k is the tokens a step gives over what the step costs, against one token's cost. Each step the draft
first takes in the tokens the last step gave (one batch of about E(k)), then drafts k tokens, decoding k-1
of them (llama.cpp's common_speculative_gen_draft):

    E(k) = (1 - a^(k+1)) / (1 - a)          a: the chance the target keeps a drafted token
    speedup(k) = E(k) * T(1) / (T(k+1) + D(E(k)) + (k-1) * D(1))

Lookup drafts only where an earlier n-gram matches, so its prediction uses what its run showed instead: the
run's text is replayed through llama.cpp's n-gram lookup (engine/lookup_decoding.py's NgramIndex) to find
each step's batch, and the steps' costs are summed on the curve. Where the text is not at hand, the steps
and drafted tokens the run counted give one mean batch (dearer than the mix of no-draft steps and long ones
it stands for: the curve jumps from one token to two).

    measure_costs(model, settings, sizes, depth, rounds) -> Costs
    acceptance_per_token(rate, k) -> a    from llama-server's accepted/drafted at draft length k
    predict_draft(target, draft, a, k) -> speed-up
    lookup_batches(context, generated, m) -> each step's batch size, replayed
    predict_steps(costs, batches, n_gen) -> speed-up
    predict_lookup(costs, drafted, accepted, n_gen) -> speed-up (from the counts alone)
    annotate(trial, candidates, target, draft)   each measured candidate's prediction
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgepilot.plan.settings import EngineSettings

SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 33, 49)  # k+1 for k = 0..8, and lookup's drafts up to 48
DRAFT_SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 9)  # a draft model's batches: what one step gives
DEPTH = 128  # tokens in the cache before each batch: generation after a short prompt


@dataclass
class Costs:
    depth: int
    seconds: dict[int, float] = field(default_factory=dict)  # batch size -> median seconds per decode

    def at(self, size: float) -> float:
        """T(size), linear between measured sizes and along the last two beyond them."""
        sizes = sorted(self.seconds)
        if size <= sizes[0]:
            return self.seconds[sizes[0]]
        for lo, hi in zip(sizes, sizes[1:], strict=False):
            if size <= hi:
                return self.seconds[lo] + (self.seconds[hi] - self.seconds[lo]) * (size - lo) / (hi - lo)
        lo, hi = sizes[-2], sizes[-1]
        return self.seconds[hi] + (self.seconds[hi] - self.seconds[lo]) * (size - hi) / (hi - lo)

    def per_token(self) -> float:
        return self.seconds[min(self.seconds)]


def measure_costs(
    model: Path,
    settings: EngineSettings,
    sizes: tuple[int, ...] = SIZES,
    depth: int = DEPTH,
    rounds: int = 5,
) -> Costs:
    """T(b) for each size: one decode of b tokens with logits at each position, `depth` tokens deep."""
    from edgepilot.engine.inprocess import LlamaEngine
    from edgepilot.engine.llama_binding import llama_cpp
    from edgepilot.engine.verify_batch import fill_with_logits

    with LlamaEngine(model, settings) as engine:
        text = "The farmer watches the hills while the sun sets and the children run home from school. "
        tokens = engine.tokenize(text * (1 + (depth + max(sizes)) // 8))[: depth + max(sizes)]
        engine.eval_prompt(tokens[:depth])
        ctx = engine._ctx  # noqa: SLF001
        memory = llama_cpp.llama_get_memory(ctx)
        batch = llama_cpp.llama_batch_init(max(sizes), 0, 1)
        times: dict[int, list[float]] = {b: [] for b in sizes}
        try:
            for r in range(rounds + 1):  # the first round warms the caches and is not kept
                order = sizes if r % 2 else tuple(reversed(sizes))
                for b in order:
                    fill_with_logits(batch, tokens[depth : depth + b], depth)
                    t0 = time.perf_counter()
                    rc = llama_cpp.llama_decode(ctx, batch)
                    spent = time.perf_counter() - t0
                    llama_cpp.llama_memory_seq_rm(memory, 0, depth, -1)
                    if rc != 0:
                        engine._decode_failed(rc)  # noqa: SLF001
                    if r:
                        times[b].append(spent)
        finally:
            llama_cpp.llama_batch_free(batch)
    return Costs(depth, {b: statistics.median(v) for b, v in times.items()})


def acceptance_per_token(rate: float, k: int) -> float:
    """The chance a drafted token is kept, from the share of drafted tokens kept at draft length k: a step
    keeps drafts until the first the target would not pick, so the share is a(1 - a^k) / (k(1 - a))."""
    if rate <= 0:
        return 0.0
    if rate >= 1:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        a = (lo + hi) / 2
        if _kept_share(a, k) < rate:
            lo = a
        else:
            hi = a
    return (lo + hi) / 2


def _kept_share(a: float, k: int) -> float:
    return sum(a**i for i in range(1, k + 1)) / k


def tokens_per_step(a: float, k: int) -> float:
    """E(k): the drafted tokens a step keeps plus the target's own."""
    return sum(a**i for i in range(k + 1))


def predict_draft(target: Costs, draft: Costs, a: float, k: int) -> float:
    """The speed-up of drafting k tokens per step with a draft model whose own curve is `draft`. Each step
    the draft first takes in the tokens the last step gave (one batch of about E(k) tokens), then drafts k
    tokens, decoding k-1 of them (llama.cpp's common_speculative_gen_draft)."""
    e = tokens_per_step(a, k)
    step = target.at(k + 1) + draft.at(e) + (k - 1) * draft.per_token()
    return e * target.per_token() / step


def predict_lookup(costs: Costs, drafted: int, accepted: int, n_gen: int) -> float | None:
    """The speed-up a lookup run's figures give on this curve (None: nothing generated)."""
    steps = n_gen - accepted
    if steps <= 0 or n_gen <= 0:
        return None
    return n_gen * costs.per_token() / (steps * costs.at(1 + drafted / steps))


def lookup_batches(context: list[int], generated: list[int], m: int | None = None) -> list[int]:
    """The batch each verify step of n-gram lookup decoded while generating `generated` after `context`:
    the token chosen plus its draft, the draft cut where the text did not follow it (as the target's picks
    cut it) and to the room left. The replay of lookup_decoding's loop on a known text."""
    from edgepilot.engine.lookup_decoding import DRAFT_MAX, NgramIndex

    index, budget, at, batches = NgramIndex(list(context)), len(generated), 0, []
    while at < budget:
        pending = generated[at]
        room = budget - at - 1
        draft = index.draft(pending, m=m or DRAFT_MAX)[:room] if room > 0 else []
        batches.append(1 + len(draft))
        index.append(pending)
        at += 1
        for token in draft:
            if generated[at] != token:
                break
            index.append(token)
            at += 1
    return batches


def predict_steps(costs: Costs, batches: list[int], n_gen: int) -> float | None:
    """The speed-up of generating n_gen tokens in these verify steps, each priced on the curve."""
    if not batches or n_gen <= 0:
        return None
    return n_gen * costs.per_token() / sum(costs.at(b) for b in batches)


MAX_DRAFT_LENGTH = 8  # the draft lengths whose speed-up is predicted (1 .. 8)


def annotate(trial: Any, candidates: dict[str, Any], target: Costs, draft: Costs | None) -> None:
    """Each measured candidate of a speculation trial (bench/spec_trial.py) gets the speed-up its measured
    acceptance predicts on these curves; a draft model also the draft length predicted fastest."""
    from edgepilot.plan.speculation_memory import DEFAULT_N_MAX

    for kind in trial.kinds.values():
        for name, c in kind.candidates.items():
            spec = candidates[name]
            if spec.kind == "lookup":
                text = kind.texts.get(name)
                if text is not None:
                    batches = lookup_batches(text[0], text[1], spec.n_max)
                    c.predicted = _rounded(predict_steps(target, batches, len(text[1])))
                else:
                    c.predicted = _rounded(predict_lookup(target, c.drafted, c.accepted, c.n_gen))
            elif draft is not None and c.drafted:
                k = spec.n_max or DEFAULT_N_MAX["draft"]
                a = acceptance_per_token(c.accepted / c.drafted, k)
                c.predicted = _rounded(predict_draft(target, draft, a, k))
                lengths = range(1, MAX_DRAFT_LENGTH + 1)
                c.best_draft_max = max(lengths, key=lambda n: predict_draft(target, draft, a, n))
                c.best_predicted = _rounded(predict_draft(target, draft, a, c.best_draft_max))


def _rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 3)
