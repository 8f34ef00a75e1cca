"""A CPU run with a GPU backend installed and its device visible, against the same run with the device hidden,
and against llama.cpp's own llama-completion: in the packaged lane (Debian's llama.cpp 0.7.x with its Vulkan
backend and Mesa's lavapipe, which ggml sees once GGML_VK_VISIBLE_DEVICES=0), as a Termux user with
`llama-cpp-backend-vulkan` installed has it.

    sudo python benchmarks/gpu_visible.py                   # SmolLM2, 5 alternating rounds
    sudo python benchmarks/gpu_visible.py --rounds 7 -n 64 --model gemma --with-default

Per round, in an order that rotates every round:
- hidden:  `edgepilot run MODEL -n N --json`, lavapipe invisible to ggml;
- visible: the same with GGML_VK_VISIBLE_DEVICES=0;
- raw:     `llama-completion -dev none -ngl 0` with the device visible: the anchor, llama.cpp's own C++ path;
- default (--with-default): `llama-completion -ngl 0` with the device visible, what users ran before
  (op offload to the device; slow, so only when asked).
Printed: medians of generation t/s and of peak RSS, the ratios visible/hidden and visible/raw (per round, then
the median and spread), and each edgepilot run's peak against its plan's peak for that prompt.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "packaged"))
import sidlane as lane  # noqa: E402

PROMPT = "Write a long story about a robot who learns to paint. Once upon a time,"
VISIBLE = {"GGML_VK_VISIBLE_DEVICES": "0"}
EVAL = re.compile(r"eval time =.*?/\s*(\d+) (?:runs|tokens).*?([\d.]+) tokens per second")


def edgepilot(root: Path, model: str, args: argparse.Namespace, env: dict[str, str]) -> dict:
    argv = ["edgepilot", "run", model, "-p", PROMPT, "-n", str(args.n_gen), "--temp", "0", "--raw"]
    argv += ["--ctx", str(args.ctx), "--json"]
    done = lane.run(root, argv, env=env, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"edgepilot run failed: {done.stderr[-1500:]}")
    return json.loads(done.stdout)


def completion(root: Path, model: str, args: argparse.Namespace, dev_none: bool) -> tuple[float, int]:
    """llama-completion's own generation speed and its peak RSS (GNU time's maximum resident set)."""
    argv = ["llama-completion", "-m", model, "-p", PROMPT, "-n", str(args.n_gen), "--temp", "0", "-no-cnv"]
    argv += ["-c", str(args.ctx), "-t", str(args.threads), "--ignore-eos", "-ngl", "0"]
    argv += ["-dev", "none"] if dev_none else []
    script = 'exec 3>&2; "$@" 2>&1 >/dev/null & pid=$!; peak=0; while kill -0 $pid 2>/dev/null; do '
    script += "v=$(sed -n 's/^VmHWM:[[:space:]]*\\([0-9]*\\).*/\\1/p' /proc/$pid/status 2>/dev/null); "
    script += '[ -n "$v" ] && [ "$v" -gt "$peak" ] && peak=$v; sleep 0.05; done; wait $pid; echo "PEAK $peak"'
    done = lane.run(root, ["sh", "-c", script, "sh", *argv], env=VISIBLE, timeout=3600)
    out = done.stdout
    speeds = [float(m.group(2)) for m in EVAL.finditer(out) if "prompt eval" not in m.group(0)]
    peak = re.search(r"PEAK (\d+)", out)
    if not speeds or not peak:
        raise SystemExit(f"llama-completion printed no timings: {out[-1500:]}")
    return speeds[-1], int(peak.group(1)) * 1024


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--model", choices=("smollm", "gemma"), default="smollm")
    ap.add_argument("-n", "--n-gen", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--with-default", action="store_true", help="also llama.cpp's default (-ngl 0, no -dev)")
    args = ap.parse_args()
    root, ready = lane.lane_root()
    if not ready or not lane.is_root():
        raise SystemExit("needs root and the packaged lane: scripts/packaged-lane.sh")
    lane.install_checkout(root)
    model = lane.model_in_root(root, "smollm") if args.model == "smollm" else lane.bundled_model(root)
    kinds = ["hidden", "visible", "raw"] + (["default"] if args.with_default else [])
    tps: dict[str, list[float]] = {k: [] for k in kinds}
    peak: dict[str, list[float]] = {k: [] for k in kinds}
    vs_plan: list[float] = []
    ratio_hidden: list[float] = []
    ratio_raw: list[float] = []
    for r in range(args.rounds):
        order = kinds[r % len(kinds) :] + kinds[: r % len(kinds)]
        got: dict[str, float] = {}
        for kind in order:
            if kind in ("hidden", "visible"):
                res = edgepilot(root, model, args, VISIBLE if kind == "visible" else {})
                got[kind], rss = res["gen_tps"], res["peak_rss_bytes"]
                vs_plan.append(rss / res["plan"]["memory"]["peak_rss_bytes"])
            else:
                got[kind], rss = completion(root, model, args, dev_none=kind == "raw")
            tps[kind].append(got[kind])
            peak[kind].append(rss / 2**20)
        ratio_hidden.append(got["visible"] / got["hidden"])
        ratio_raw.append(got["visible"] / got["raw"])
        print(f"round {r + 1}: " + ", ".join(f"{k} {got[k]:.1f} t/s" for k in kinds), flush=True)
    print(f"\n{args.model}, -n {args.n_gen}, ctx {args.ctx}, {args.rounds} rounds (medians, min-max)")
    for kind in kinds:
        print(f"  {kind:8} generation {spread(tps[kind])} t/s   peak {spread(peak[kind])} MiB")
    print(f"  visible / hidden  {spread(ratio_hidden)}   (1.0: the visible device changes nothing)")
    print(f"  visible / raw     {spread(ratio_raw)}   (llama-completion -dev none: the anchor)")
    print(f"  peak / plan       {spread(vs_plan)}   (the plan is for a prompt that fills the context)")


if __name__ == "__main__":
    main()
