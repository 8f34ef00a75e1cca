"""The memory model on aarch64: predicted vs llama.cpp's logged buffers vs measured peak, on the aarch64 lane.

    scripts/aarch64-lane.sh && python benchmarks/arm_memory.py        # 2 models x mmap/none x repack on/off
    python benchmarks/arm_memory.py --ctx 2048 --short-prompt --models gemma3 --json OUT.json
    python benchmarks/arm_memory.py --cpu dotprod --short-prompt     # the dotprod-only CPU library

Each case runs the cross-built llama-completion under qemu-user (--cpu i8mm, the default: the i8mm library
on QEMU_CPU=max, an i8mm phone's CPU; dotprod: the dotprod-only library on cortex-a76; neon: the NEON-only
library on cortex-a53) with the planner's settings (`-lm mmap|none`, `--repack|--no-repack`, ctx, batch
512, ubatch 512) and a prompt that fills the context (n_ctx - 8 - n_gen tokens, as the planner assumes), 4
tokens generated. Columns, MiB:
- weights: the plain weight buffer (CPU_Mapped with mmap, CPU without) predicted / logged;
- repack: CPU_REPACK predicted / logged; kv, compute, output: predicted / logged;
- peak: the planner's peak minus the interpreter term (memory_model.INTERPRETER_BYTES: a Python process with
  llama_cpp and edgepilot imported, libraries included, which llama-completion does not carry) vs the qemu
  process's ru_maxrss minus qemu's own share: the baseline (the same binary under qemu running `--version`:
  qemu, the same libraries) and what qemu's translation cache grew beyond the baseline's during the run
  (anonymous executable mappings in smaps). Both sides leave out the libraries and count the model's
  buffers, llama.cpp's runtime and vocabulary.
Errors are (predicted - logged) / logged. Emulated prompt processing is slow: ~2-3 min per case at the default
ctx 256 on 2 shared cores (~25 min for the grid), over 20 min per Gemma case at ctx 1024; --short-prompt
runs take ~20 s (buffers as logged, but the peak then touches less than the planner's filled context).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aarch64_lane  # noqa: E402
from edgepilot.device.isa import repack_plan  # noqa: E402
from edgepilot.gguf.arch import arch_params  # noqa: E402
from edgepilot.gguf.gguf_header import read_header  # noqa: E402
from edgepilot.plan.memory_model import INTERPRETER_BYTES, Prediction, predict  # noqa: E402
from edgepilot.plan.settings import EngineSettings  # noqa: E402
from memory_accuracy import PromptMaker, model_paths  # noqa: E402

MIB = 1 << 20
N_GEN = 4
SLACK = 8  # tokens left free: BOS and re-tokenization differences


@dataclass
class Row:
    model: str
    load_mode: str  # mmap | none
    repack: bool
    n_ctx: int
    n_prompt: int
    terms: dict[str, tuple[float, float]]  # term -> (predicted MiB, logged MiB)
    peak_predicted_mib: float
    peak_measured_mib: float
    qemu_peak_mib: float
    qemu_code_mib: float  # qemu's translation cache at its largest (part of qemu_peak_mib)
    layouts_logged: dict[str, int]
    layouts_predicted: list[str]
    wall_s: float

    def error(self, term: str) -> float:
        p, logged = self.terms[term]
        return (p - logged) / logged if logged else (0.0 if p == 0 else float("inf"))

    @property
    def peak_error(self) -> float:
        return (self.peak_predicted_mib - self.peak_measured_mib) / self.peak_measured_mib


def predicted_terms(pred: Prediction, settings: EngineSettings) -> dict[str, float]:
    w = pred.weights
    return {
        "weights": w.weight_buffer_bytes(settings.use_mmap, settings.repack) / MIB,
        "repack": w.repack_buffer_bytes(settings.repack) / MIB,
        "kv": pred.memory.kv_bytes / MIB,
        "compute": pred.memory.compute_reserved_bytes / MIB,
        "output": pred.memory.output_bytes / MIB,
    }


def logged_terms(log: dict[str, Any]) -> dict[str, float]:
    buffers = log["model_buffers_mib"]
    return {
        "weights": buffers.get("CPU_Mapped", 0.0) + buffers.get("CPU", 0.0),
        "repack": buffers.get("CPU_REPACK", 0.0),
        "kv": log["kv_total_mib"],
        "compute": sum(log["compute_buffers_mib"].values()),
        "output": sum(log["output_buffers_mib"].values()),
    }


def run_case(
    lane: aarch64_lane.Lane,
    name: str,
    path: Path,
    settings: EngineSettings,
    plan: dict[str, tuple[str, int]],
    prompt: tuple[Path, int] | None,
    baseline: aarch64_lane.LaneRun,
    cpu: str,
) -> Row:
    header = read_header(path)
    pred = predict(header, arch_params(header.metadata), settings, plan)
    prompt_file = prompt[0] if prompt else None
    qemu_cpu = aarch64_lane.QEMU_CPU_FOR[cpu]
    run = aarch64_lane.run_completion(lane, path, settings, prompt_file, N_GEN, qemu_cpu, cpu)
    if run.returncode != 0:
        tail = "\n".join(run.stderr.splitlines()[-5:])
        raise RuntimeError(f"{name}: llama-completion exited {run.returncode}:\n{tail}")
    predicted, logged = predicted_terms(pred, settings), logged_terms(run.log)
    return Row(
        model=name,
        load_mode="mmap" if settings.use_mmap else "none",
        repack=settings.repack,
        n_ctx=settings.n_ctx,
        n_prompt=prompt[1] if prompt else 2,
        terms={k: (round(predicted[k], 2), round(logged[k], 2)) for k in predicted},
        peak_predicted_mib=round((pred.memory.peak_rss_bytes - INTERPRETER_BYTES) / MIB, 1),
        peak_measured_mib=round(run.engine_peak_bytes(baseline) / MIB, 1),
        qemu_peak_mib=round(run.peak_rss_bytes / MIB, 1),
        qemu_code_mib=round(run.translated_code_bytes / MIB, 1),
        layouts_logged=run.repack_layouts,
        layouts_predicted=sorted(pred.weights.repacked_types) if settings.repack else [],
        wall_s=run.wall_seconds,
    )


def print_table(rows: list[Row], baseline: aarch64_lane.LaneRun) -> None:
    terms = ("weights", "repack", "kv", "compute", "output")
    head = f"{'model':7s} {'load':4s} {'repack':6s} {'ctx':>5s} {'prompt':>6s}"
    head += "".join(f" {t + ' pred/logged':>22s}" for t in terms)
    head += f" {'peak pred/meas':>16s} {'err':>6s} {'qemu peak/code':>15s}"
    print(head)
    for r in rows:
        line = f"{r.model:7s} {r.load_mode:4s} {'on' if r.repack else 'off':6s} {r.n_ctx:5d} {r.n_prompt:6d}"
        for t in terms:
            p, logged = r.terms[t]
            err = r.error(t)
            pct = f"{100 * err:+4.1f}%" if err != float("inf") else "  inf"
            line += f" {p:8.2f}/{logged:8.2f} {pct}"
        line += f" {r.peak_predicted_mib:7.1f}/{r.peak_measured_mib:7.1f} {100 * r.peak_error:+5.1f}%"
        line += f" {r.qemu_peak_mib:7.1f}/{r.qemu_code_mib:5.1f}"
        print(line)
    base, base_code = baseline.peak_rss_bytes / MIB, baseline.translated_code_bytes / MIB
    print(
        f"peak measured = qemu ru_maxrss - {base:.1f} MiB (llama-completion --version under qemu) - the "
        f"growth of qemu's translation cache beyond the {base_code:.1f} MiB it held then; "
        f"peak predicted = planner peak - {INTERPRETER_BYTES / MIB:.0f} MiB (the Python interpreter term)"
    )
    for r in rows:
        if r.repack:
            logged = ", ".join(f"{k} x{n}" for k, n in sorted(r.layouts_logged.items()))
            predicted = ", ".join(r.layouts_predicted)
            print(f"{r.model} {r.load_mode}: layouts logged {logged}; predicted {predicted}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--models", nargs="+", choices=("gemma3", "smollm2"), default=["gemma3", "smollm2"])
    ap.add_argument("--short-prompt", action="store_true", help="prompt 'Hi' instead of filling the context")
    ap.add_argument("--cpu", choices=sorted(aarch64_lane.CPU_VARIANTS), default="i8mm")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    if args.ctx < 256:
        print("arm_memory: --ctx must be at least 256", file=sys.stderr)
        return 2
    problem = aarch64_lane.lane_problem()
    if problem:
        print(f"arm_memory: {problem}", file=sys.stderr)
        return 2
    lane = aarch64_lane.Lane(aarch64_lane.lane_dir())
    plan = repack_plan(aarch64_lane.CPU_VARIANTS[args.cpu])
    baseline = aarch64_lane.baseline(lane, aarch64_lane.QEMU_CPU_FOR[args.cpu], args.cpu)
    paths = model_paths()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="edgepilot-arm-prompts-") as tmp:
        maker = PromptMaker(Path(tmp))
        try:
            prompts = {
                m: None if args.short_prompt else maker.make(paths[m], args.ctx - N_GEN - SLACK)
                for m in args.models
            }
        finally:
            maker.close()
        for m in args.models:
            for use_mmap in (True, False):
                for repack in (True, False):
                    settings = EngineSettings(
                        n_ctx=args.ctx, n_threads=args.threads, use_mmap=use_mmap, repack=repack
                    )
                    row = run_case(lane, m, paths[m], settings, plan, prompts[m], baseline, args.cpu)
                    print(f"# {m} {row.load_mode} repack={row.repack}: {row.wall_s:.0f} s", file=sys.stderr)
                    rows.append(row)
    print_table(rows, baseline)
    if args.json:
        data = {
            "cpu": args.cpu,
            "baseline_mib": baseline.peak_rss_bytes / MIB,
            "baseline_code_mib": baseline.translated_code_bytes / MIB,
            "rows": [asdict(r) for r in rows],
        }
        args.json.write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
