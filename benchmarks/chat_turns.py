"""A 10-turn scripted conversation through `edgepilot chat` (the library) and `edgepilot serve` (HTTP), with
and without KV cache reuse: per-turn TTFT and prompt tokens processed.

    python benchmarks/chat_turns.py [MODEL] [--turns 10] [--max-tokens 48] [--rounds 1] [--no-serve]

MODEL defaults to the bundled Gemma 3 270M. Greedy sampling (temperature 0), the same scripted user messages
in every condition; conditions alternate within each round and each figure is the median over rounds.
TTFT: chat's own (cache trim + prompt processing, to the first token's logits); serve's is the worker's
`timings.ttft_ms` (the same measure, inside the server) so HTTP overhead does not blur it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import threading
from pathlib import Path

from edgepilot.chat.session import ChatSession
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.plan.requested import RequestedSettings

TOPICS = [
    "the water cycle",
    "how bread rises",
    "why the sky is blue",
    "how a bicycle stays upright",
    "what a compass does",
    "how bees make honey",
    "why leaves change colour",
    "how a lighthouse works",
    "what causes tides",
    "how a seed grows",
    "how rain forms",
    "why ice floats",
]


def user_message(i: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    return (
        f"Question {i + 1}: in two short sentences, explain {topic}, as you would to a curious ten-year-old."
    )


def chat_run(
    model: str | None, turns: int, max_tokens: int, reuse: bool, ctx: int
) -> list[tuple[int, float]]:
    out = []
    with ChatSession(
        model,
        RequestedSettings(n_ctx=ctx),
        system="You are a helpful assistant.",
        n_predict=max_tokens,
        sampler=SamplerSettings(temperature=0),
        cache_reuse=reuse,
    ) as chat:
        for i in range(turns):
            t = chat.turn(user_message(i))
            out.append((t.n_prompt_new, t.ttft_ms))
    return out


def serve_run(
    model: str | None, turns: int, max_tokens: int, reuse: bool, ctx: int
) -> list[tuple[int, float]]:
    cmd = [sys.executable, "-m", "edgepilot", "serve", *([model] if model else []), "--port", "0", "--json"]
    cmd += ["--ctx", str(ctx), "--max-tokens", str(max_tokens)] + ([] if reuse else ["--no-cache-reuse"])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(300)
        if not line or not line[0].strip():
            raise SystemExit("edgepilot serve did not start")
        port = json.loads(line[0])["port"]
        messages = [{"role": "system", "content": "You are a helpful assistant."}]
        out = []
        for i in range(turns):
            messages.append({"role": "user", "content": user_message(i)})
            body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0}
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            conn.request(
                "POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"}
            )
            reply = json.loads(conn.getresponse().read())
            conn.close()
            usage = reply["usage"]
            out.append((usage["prompt_tokens"] - usage["prompt_tokens_details"]["cached_tokens"],
                        reply["timings"]["ttft_ms"]))  # fmt: skip
            messages.append({"role": "assistant", "content": reply["choices"][0]["message"]["content"]})
        return out
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?")
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--no-serve", action="store_true")
    args = ap.parse_args()
    runs = {"chat": chat_run} if args.no_serve else {"chat": chat_run, "serve": serve_run}
    conds = [(tool, reuse) for tool in runs for reuse in (True, False)]
    results: dict[tuple[str, bool], list[list[tuple[int, float]]]] = {c: [] for c in conds}
    for r in range(args.rounds):
        for tool, reuse in conds if r % 2 == 0 else reversed(conds):  # alternate the order between rounds
            print(f"round {r + 1}: {tool} {'reuse' if reuse else 'no reuse'}", file=sys.stderr)
            results[(tool, reuse)].append(
                runs[tool](args.model, args.turns, args.max_tokens, reuse, args.ctx)
            )

    def cell(c: tuple[str, bool], i: int) -> str:
        new = statistics.median(run[i][0] for run in results[c])
        ttft = statistics.median(run[i][1] for run in results[c])
        return f"{new:>6.0f} {ttft:>8.0f}"

    name = Path(args.model).name if args.model else "bundled Gemma 3 270M"
    print(f"{name}: prompt tokens processed / TTFT ms per turn (median of {args.rounds} round(s))")
    print("turn " + " ".join(f"{t + (' reuse' if r else ' no-reuse'):>15}" for t, r in conds))
    for i in range(args.turns):
        print(f"{i + 1:>4} " + " ".join(cell(c, i) for c in conds))
    for c in conds:
        first = statistics.median(run[0][1] for run in results[c])
        last = statistics.median(run[-1][1] for run in results[c])
        label = f"{c[0]} {'reuse' if c[1] else 'no reuse'}"
        print(f"{label}: TTFT turn {args.turns} / turn 1 = {last / first:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
