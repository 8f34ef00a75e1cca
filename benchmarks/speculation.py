"""Speculative decoding measured: n-gram lookup against plain generation on llama-server, on a rewriting
prompt (the text is written again: what lookup is for) and on free text (where it has little to find), and
`edgepilot run --lookup` against llama-server called directly with the same flags; and the same on the
in-process engine (edgepilot's own draft/verify loop, engine/lookup_decoding.py) against its plain loop.

    python benchmarks/speculation.py                 # SmolLM2 135M, 5 alternating rounds, -n 128
    python benchmarks/speculation.py --rounds 9 --json

Per round, in an order that rotates every round: llama-server started with the tools engine's own command
line (plain, then with `--spec-type ngram-simple`), one greedy /completion per prompt over its socket, its
`timings.predicted_per_second` the figure; and `edgepilot run --lookup --temp 0 --raw --json` (the CLI in a
subprocess) on the rewriting prompt; the in-process engine loaded once per round, plain and lookup on each
prompt (greedy, the full -n: generated tokens over generation seconds). Printed: medians of t/s and of the
per-round ratios, with the spread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edgepilot.engine.inprocess import LlamaEngine  # noqa: E402
from edgepilot.engine.native_tools import find_tool  # noqa: E402
from edgepilot.engine.sampling import SamplerSettings  # noqa: E402
from edgepilot.engine.server_engine import ServerEngine  # noqa: E402
from edgepilot.engine.speculation import Speculation  # noqa: E402
from edgepilot.engine.unix_http import UnixClient  # noqa: E402
from edgepilot.plan.settings import EngineSettings  # noqa: E402
from run_speed import smollm2_path  # noqa: E402  (benchmarks/ is not a package)

PARAGRAPH = (
    "The quick brown fox jumps over the lazy dog near the river bank, while the farmer watches from his old "
    "wooden porch and the sun sets slowly behind the hills. Children run home from school, laughing, and the "
    "baker closes his shop after a long day of making bread for the whole village. In the evening the lamps "
    "are lit one by one along the main street, the church bell rings eight times, and the river keeps on "
    "flowing quietly under the stone bridge that the grandfathers of the village built a hundred years ago."
)
PROMPTS = {
    "rewrite": f"{PARAGRAPH}\n\n{PARAGRAPH}\n\n",
    "free": "Write a long story about a robot who learns to paint. Once upon a time,",
}


def direct(model: Path, settings: EngineSettings, spec: Speculation | None, n_gen: int) -> dict[str, float]:
    """t/s of one greedy /completion per prompt on llama-server with the tools engine's command line."""
    out = {}
    with ServerEngine(model, settings, tool=find_tool("llama-server"), speculation=spec) as server:
        for name, prompt in PROMPTS.items():
            body = {"prompt": server.tokenize(prompt), "n_predict": n_gen, "temperature": 0}
            body["cache_prompt"] = False
            status, data = UnixClient(server.socket_path).request("POST", "/completion", body)
            if status != 200:
                raise SystemExit(f"llama-server answered {status}: {data[:300]!r}")
            out[name] = float(json.loads(data)["timings"]["predicted_per_second"])
    return out


def in_process(model: Path, settings: EngineSettings, n_gen: int) -> dict[str, float]:
    """t/s of plain and lookup generation per prompt on the in-process engine (keys like "lookup rewrite")."""
    out, greedy = {}, SamplerSettings(temperature=0)
    with LlamaEngine(model, settings) as engine:
        for name, prompt in PROMPTS.items():
            tokens = engine.tokenize(prompt)
            for kind, spec in (("plain", None), ("lookup", Speculation("lookup"))):
                engine.speculation = spec
                gen = engine.generate(tokens, n_gen, sampler=greedy, stop_at_eog=False)
                out[f"{kind} {name}"] = gen.n_gen / gen.gen_seconds
    return out


def cli_lookup(model: Path, n_gen: int, threads: int) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write(PROMPTS["rewrite"])
        f.flush()
        cmd = [
            sys.executable,
            "-m",
            "edgepilot",
            "run",
            str(model),
            "--prompt-file",
            f.name,
            "-n",
            str(n_gen),
        ]
        cmd += ["--temp", "0", "--raw", "--ctx", "1024", "--threads", str(threads), "--lookup", "--json"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"edgepilot run --lookup failed: {done.stderr[-1500:]}")
    return float(json.loads(done.stdout)["gen_tps"])


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    model = smollm2_path()
    settings = EngineSettings(n_ctx=1024, n_threads=args.threads)
    lookup = Speculation("lookup")
    jobs = {
        "plain": lambda: direct(model, settings, None, args.n_gen),
        "lookup": lambda: direct(model, settings, lookup, args.n_gen),
        "cli": lambda: {"rewrite": cli_lookup(model, args.n_gen, args.threads)},
        "inprocess": lambda: in_process(model, settings, args.n_gen),
    }
    rows: list[dict[str, dict[str, float]]] = []
    names = list(jobs)
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        rows.append({name: jobs[name]() for name in order})
        print(f"round {r + 1}/{args.rounds}: " + json.dumps(rows[-1]), file=sys.stderr)
    ratios = {
        "lookup/plain rewrite": [x["lookup"]["rewrite"] / x["plain"]["rewrite"] for x in rows],
        "lookup/plain free": [x["lookup"]["free"] / x["plain"]["free"] for x in rows],
        "edgepilot/direct lookup": [x["cli"]["rewrite"] / x["lookup"]["rewrite"] for x in rows],
        "in-process lookup/plain rewrite": [
            x["inprocess"]["lookup rewrite"] / x["inprocess"]["plain rewrite"] for x in rows
        ],
        "in-process lookup/plain free": [
            x["inprocess"]["lookup free"] / x["inprocess"]["plain free"] for x in rows
        ],
    }
    if args.json:
        print(json.dumps({"rounds": rows, "ratios": {k: statistics.median(v) for k, v in ratios.items()}}))
        return
    print(f"{model.name}, -n {args.n_gen}, {args.threads} threads, {args.rounds} rounds (median, min-max)")
    for key in ("plain", "lookup"):
        for prompt in PROMPTS:
            print(f"  {key:>6} {prompt:>7}: {spread([x[key][prompt] for x in rows])} t/s")
    for name, values in ratios.items():
        print(f"  {name}: {spread(values)}")


if __name__ == "__main__":
    main()
