"""The speed-up speculation is predicted to give (bench/spec_costs.py: the verify-cost curve and a draft's
cost per token, measured in-process) against the one llama-server measures, for draft pairs made by
`edgepilot quantize` (SmolLM2 135M as F16 and Q8_0 targets, a Q4_0 draft) and for n-gram lookup.

    python benchmarks/spec_predict.py                # 5 alternating rounds, -n 128, draft length 4
    python benchmarks/spec_predict.py --rounds 9 --draft-max 2 --json

Per candidate: the target's cost curve and the draft's one-token cost in this process (medians of 5 rounds),
then llama-server plain and speculating in alternating rounds (greedy, one /completion per round, its
`timings.predicted_per_second`; a new server per run), the acceptance from llama-server's own counts. The
prediction uses the measured costs and that acceptance; the measured speed-up is the medians' ratio. For
lookup, two predictions: each verify step priced on the curve, the steps found by replaying the text the run
generated (what tune uses), and the older one from the run's counts alone (one mean batch per step).
`--only lookup` measures lookup alone (no quantized draft pairs: a few minutes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edgepilot.bench.spec_costs import (  # noqa: E402
    acceptance_per_token,
    lookup_batches,
    measure_costs,
    predict_draft,
    predict_lookup,
    predict_steps,
)
from edgepilot.engine.native_tools import find_tool  # noqa: E402
from edgepilot.engine.server_engine import ServerEngine  # noqa: E402
from edgepilot.engine.speculation import Speculation  # noqa: E402
from edgepilot.engine.unix_http import UnixClient  # noqa: E402
from edgepilot.plan.settings import EngineSettings  # noqa: E402
from edgepilot.store.quantize import quantize_model  # noqa: E402
from run_speed import smollm2_path  # noqa: E402
from speculation import PARAGRAPH  # noqa: E402

PROMPTS = {
    "rewrite": f"{PARAGRAPH}\n\n{PARAGRAPH}\n\n",
    "story": "Write a long story about a robot who learns to paint. Once upon a time,",
}


def served(model: Path, settings: EngineSettings, spec: Speculation | None, prompt: str, n_gen: int):
    """(t/s, drafted, accepted, n_gen, (prompt tokens, generated tokens)) of one greedy /completion on a
    fresh llama-server."""
    with ServerEngine(model, settings, tool=find_tool("llama-server"), speculation=spec) as server:
        tokens = server.tokenize(prompt)
        body = {
            "prompt": tokens,
            "n_predict": n_gen,
            "temperature": 0,
            "cache_prompt": False,
            "return_tokens": True,
        }
        status, data = UnixClient(server.socket_path).request("POST", "/completion", body)
        if status != 200:
            raise SystemExit(f"llama-server answered {status}: {data[:300]!r}")
        answer = json.loads(data)
        t = answer["timings"]
        return (float(t["predicted_per_second"]), int(t.get("draft_n") or 0),
                int(t.get("draft_n_accepted") or 0), int(t["predicted_n"]),
                (tokens, list(answer.get("tokens") or [])))  # fmt: skip


def trial(target: Path, spec: Speculation, settings, prompt: str, n_gen: int, rounds: int) -> dict:
    plain, spec_ts, counts, text = [], [], [0, 0, 0], None
    for r in range(rounds):
        for name in ("plain", "spec") if r % 2 == 0 else ("spec", "plain"):
            ts, drafted, accepted, n, said = served(
                target, settings, None if name == "plain" else spec, prompt, n_gen
            )
            (plain if name == "plain" else spec_ts).append(ts)
            if name == "spec":
                counts, text = [counts[0] + drafted, counts[1] + accepted, counts[2] + n], said
    return {"plain_ts": statistics.median(plain), "spec_ts": statistics.median(spec_ts), "counts": counts,
            "text": text}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--draft-max", type=int, default=4)
    ap.add_argument("--only", choices=["lookup"], help="measure lookup alone")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    settings = EngineSettings(n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=2, n_threads_batch=2)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        made = quantize_model(str(smollm2_path()), ["Q8_0", "Q4_0"], out_dir=tmp, threads=2)
        files = {"F16": Path(made.reference), **{v.type: Path(v.path) for v in made.variants}}
        if args.only == "lookup":
            del files["Q4_0"]
        costs = {name: measure_costs(path, settings) for name, path in files.items()}
        for target_name in ("F16", "Q8_0"):
            target = files[target_name]
            for kind, prompt in PROMPTS.items():
                candidates = [("lookup", Speculation("lookup"))]
                if args.only is None:
                    draft = Speculation("draft", files["Q4_0"], args.draft_max)
                    candidates.insert(0, (f"Q4_0 draft, k={args.draft_max}", draft))
                for label, spec in candidates:
                    got = trial(target, spec, settings, prompt, args.n, args.rounds)
                    drafted, accepted, n = got["counts"]
                    if spec.kind == "draft":
                        a = acceptance_per_token(accepted / drafted if drafted else 0.0, args.draft_max)
                        predicted = predict_draft(costs[target_name], costs["Q4_0"], a, args.draft_max)
                        by_counts = None
                    else:
                        prompt_tokens, generated = got["text"]
                        batches = lookup_batches(prompt_tokens, generated)
                        predicted = predict_steps(costs[target_name], batches, len(generated))
                        by_counts = predict_lookup(costs[target_name], drafted, accepted, n)
                    measured = got["spec_ts"] / got["plain_ts"]
                    row = {"target": target_name, "text": kind, "candidate": label}
                    row["predicted_from_counts"] = None if by_counts is None else round(by_counts, 3)
                    row.update(accepted=f"{accepted}/{drafted}", predicted=round(predicted or 0, 3))
                    row.update(measured=round(measured, 3), plain_ts=round(got["plain_ts"], 1))
                    row.update(drafted=drafted, kept=accepted, n_gen=n, spec_ts=round(got["spec_ts"], 2))
                    rows.append(row)
                    print(rows[-1], file=sys.stderr)
        curve = {name: {b: round(s * 1e3, 2) for b, s in c.seconds.items()} for name, c in costs.items()}
    if args.json:
        print(json.dumps({"rows": rows, "curve_ms": curve}, indent=2))
        return 0
    print("verify batch cost, ms (batch size: ms):")
    for name, c in curve.items():
        print(f"  {name}: " + ", ".join(f"{b}: {ms}" for b, ms in c.items()))
    print("pred: tune's prediction (lookup: each step priced); counts: lookup's from its counts alone")
    head = ("target", "text", "candidate", "kept", "pred", "counts", "meas", "m/p")
    print("{:6} {:8} {:16} {:>9} {:>6} {:>6} {:>6} {:>5}".format(*head))
    for r in rows:
        ratio = r["measured"] / r["predicted"] if r["predicted"] else float("nan")
        counts = "-" if r["predicted_from_counts"] is None else f"{r['predicted_from_counts']:.2f}"
        print(f"{r['target']:6} {r['text']:8} {r['candidate']:16} {r['accepted']:>9} "
              f"{r['predicted']:6.2f} {counts:>6} {r['measured']:6.2f} {ratio:5.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
