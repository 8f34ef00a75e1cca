"""Every table and summary at 40, 50, 80 and 120 columns (a phone in portrait to a desktop): no line wider
than the screen (but a single token that is wider by itself, such as a long path), no number cut with an
ellipsis, every figure of the real result whole, and the full table where there is room for it."""

from __future__ import annotations

import io
import re
from dataclasses import replace
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

WIDTHS = (40, 50, 80, 120)


def render(fn, result, width: int) -> str:
    buf = io.StringIO()
    fn(result, Console(width=width, file=buf, color_system=None, legacy_windows=False))
    return buf.getvalue()


def check(text: str, width: int, figures: list[str]) -> None:
    for line in text.splitlines():
        if cell_len(line) > width:
            token = line.strip().removesuffix("\\").strip()
            assert token and not re.search(r"\s", token), f"line over {width} columns:\n{line}\n{text}"
    assert not re.search(r"\S…", text), f"something cut at {width} columns:\n{text}"
    for figure in figures:
        assert figure in text, f"{figure!r} not whole at {width} columns:\n{text}"


def on_one_line(text: str, *parts: str) -> bool:
    return any(all(p in line for p in parts) for line in text.splitlines())


def each_width(fn, result, figures: list[str]) -> dict[int, str]:
    shown = {w: render(fn, result, w) for w in WIDTHS}
    for w, text in shown.items():
        check(text, w, figures)
    return shown


# -- fit and probe ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fit_plans(gemma_path, devices):
    from edgepilot.tuned.decide import decide

    root = devices / "pixel6a-tensor-g1"
    roomy = decide(gemma_path, root=root).plan
    tight = decide(gemma_path, root=root, budget_bytes=300 * 2**20).plan
    return roomy, tight


def test_fit(fit_plans):
    from edgepilot.cli.fit_render import render_fit

    for plan in fit_plans:
        m = plan.memory
        figures = [
            f"{m.peak_rss_bytes / 2**20:.1f}",
            f"{m.weights_bytes / 2**20:.1f}",
            f"{m.kv_bytes / 2**20:.1f}",
        ]
        figures += [f"{a.peak_rss_bytes / 2**20:.0f}" for a in plan.alternatives]
        shown = each_width(render_fit, plan, figures)
        assert "█" in shown[120] and "█" not in shown[50]  # the bars go first on a narrow screen
        assert on_one_line(shown[120], "weights", f"{m.weights_bytes / 2**20:.1f}", "mapped file pages")
        # the commands copy-paste: joined back, they are the plan's commands
        for text in shown.values():
            assert _joined(text, "llama.cpp:") == " ".join(plan.llama_cpp_args)
    assert fit_plans[1].alternatives  # the tight budget shows the alternatives table


def _joined(text: str, label: str) -> str:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(label))
    first = lines[start].removeprefix(label).strip()
    parts = [first] if first else []
    i = start if first else start + 1
    if not first:
        parts.append(lines[i].strip())
    while parts[-1].endswith("\\"):
        parts[-1] = parts[-1].removesuffix("\\").strip()
        i += 1
        parts.append(lines[i].strip())
    return " ".join(parts)


def test_probe_every_device_tree(devices):
    from edgepilot.cli.probe_render import render_probe
    from edgepilot.device.probe import probe

    trees = sorted(p for p in devices.iterdir() if p.is_dir())
    assert len(trees) >= 8
    for tree in trees:
        found = probe(tree)
        figures = [str(cl.max_mhz) for cl in found.cpu.clusters if cl.max_mhz]
        shown = each_width(render_probe, found, figures)
        if found.cpu.clusters and found.cpu.clusters[0].core:
            cl = found.cpu.clusters[0]
            cpus = ",".join(map(str, cl.cpus))
            assert on_one_line(shown[120], cpus, cl.core, cl.kind), shown[120]
            assert on_one_line(shown[50], cpus, str(cl.max_mhz or "?")), shown[50]  # a table row on a phone


def test_inspect(smollm_path):
    from edgepilot.cli.format import human_bytes
    from edgepilot.cli.inspect_cmd import render
    from edgepilot.gguf.inspect import inspect_model

    info = inspect_model(smollm_path)
    figures = [human_bytes(q.bytes) for q in info.quant_mix] + [
        f"{q.share_of_bytes:.1%}" for q in info.quant_mix
    ]
    shown = each_width(render, info, figures)
    for q in info.quant_mix:  # a table that fits stays a table on a phone (it was 23 lines of records)
        for w in (50, 120):
            assert on_one_line(shown[w], q.ggml_type, human_bytes(q.bytes), f"{q.share_of_bytes:.1%}")
    for text in shown.values():  # the path is never cut: it is printed whole, on its own line if need be
        assert on_one_line(text, str(info.path)), text


# -- quantize and compare (one real run each, small) ------------------------------------------------------


@pytest.fixture(scope="module")
def quantized(smollm_path, tmp_path_factory):
    from edgepilot.store.quantize import quantize_model

    out = tmp_path_factory.mktemp("narrow-quantized")
    return quantize_model(str(smollm_path), ["Q4_0"], out_dir=str(out), threads=2)


def test_quantize(quantized):
    from edgepilot.cli.format import mib
    from edgepilot.cli.quantize_cmd import render_quantize

    v = quantized.variants[0]
    figures = [mib(v.file_bytes), f"{v.bits_per_weight:.2f}", f"{v.seconds:.1f}"]
    shown = each_width(render_quantize, quantized, figures)
    assert on_one_line(shown[120], "Q4_0", mib(v.file_bytes), f"{v.bits_per_weight:.2f}")
    for text in shown.values():
        assert _joined(text, "next:") == f"edgepilot compare {quantized.reference} {v.path}"
    for w in (40, 50):  # a stacked record's file name is never split (before: folded at the screen's edge)
        lines = [ln.split() for ln in shown[w].splitlines()]
        at = next(i for i, words in enumerate(lines) if words[:1] == ["file"])
        assert str(v.path) in (lines[at] + lines[at + 1])[1:2], shown[w]  # beside its label, or under it


def test_compare(quantized):
    from edgepilot.cli.format import mib
    from edgepilot.cli.quantize_cmd import render_compare
    from edgepilot.store.compare import compare_models

    files = [quantized.reference, quantized.variants[0].path]
    result = compare_models(files, ctx=128, ppl_ctx=64, max_chunks=1, n_gen=4, threads=2)
    figures = []
    for r in result.rows:
        figures += [
            mib(r.measured_peak_bytes),
            mib(r.predicted_peak_bytes),
            f"{r.perplexity:.3f} ± {r.ppl_stderr:.3f}",
        ]
        figures += [f"{r.pp_tps:.1f}", f"{r.tg_tps:.1f}", f"{r.peak_error:+.1%}"]
    shown = each_width(render_compare, result, figures)
    r = result.rows[-1]
    # a long file name may fold inside its cell at 120; the record's figures share one row
    assert on_one_line(shown[120], mib(r.measured_peak_bytes), f"{r.perplexity:.3f} ± {r.ppl_stderr:.3f}")
    assert not on_one_line(shown[50], r.name, mib(r.measured_peak_bytes))


# -- bench, history, tune ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def benched(smollm_path):
    from edgepilot.bench.runner import BenchRequest, run_bench

    req = BenchRequest(n_prompt=[16], n_gen=[4], reps=1, threads=[1, 2], warmup=False)
    return run_bench(smollm_path, req)


def test_bench(benched):
    from edgepilot.cli.bench_render import render_bench

    figures = [f"{r.avg_ts:.2f} ± {r.stddev_ts:.2f}" for r in benched.rows]
    shown = each_width(render_bench, benched, figures)
    r = benched.rows[0]
    assert on_one_line(shown[120], r.test, f"{r.avg_ts:.2f} ± {r.stddev_ts:.2f}")


def test_history(benched):
    from edgepilot.bench.history import history
    from edgepilot.cli.bench_render import render_history

    h = history(benched.device.fingerprint, benched.device.description, benched.model.key, "SmolLM2")
    assert h.entries
    figures = [f"{e.avg_ts:.2f} ± {e.stddev_ts:.2f}" for e in h.entries] + [
        f"{e.best_ts:.2f}" for e in h.entries
    ]
    shown = each_width(render_history, h, figures)
    for e in h.entries:  # a table even at 50 columns: shared settings said once, not a block per row
        for w in (50, 120):
            assert on_one_line(shown[w], e.test, f"{e.avg_ts:.2f} ± {e.stddev_ts:.2f}", f"{e.best_ts:.2f}")


def test_tune(smollm_path):
    from edgepilot.bench.tune import TuneRequest, run_tune
    from edgepilot.cli.bench_render import render_tune

    req = TuneRequest(n_prompt=16, n_gen=4, reps=1, save=False, store=False, repack_trial=False)
    report = run_tune(smollm_path, req)
    figures = [f"{t.ts:.2f}" for t in report.trials] + [f"{report.gen['tg_ts']:.2f}"]
    shown = each_width(render_tune, report, figures)
    for t in report.trials:  # a row per setting at 50 columns too (it was a block of 8 lines each)
        for w in (50, 120):
            assert on_one_line(shown[w], t.phase, t.test, f"{t.ts:.2f}")
    # the longest phase name, two-digit row numbers and rejected rows (a mark, explained once) still fit
    phases = ("prompt-threads", "flash-attn", "scan")
    trials = [replace(t, phase=phases[i % 3], rejected=i % 2 == 0) for i, t in enumerate(report.trials * 4)]
    narrow = render(render_tune, replace(report, trials=trials), 50)
    check(narrow, 50, [f"{t.ts:.2f}" for t in trials])
    for i, t in enumerate(trials, 1):
        assert on_one_line(narrow, f"{i:>2} {t.phase}", f"{t.ts:.2f}"), narrow
    assert "* one repetition: clearly slower" in narrow


# -- models, pull, cluster, doctor, run, serve, build -------------------------------------------------------


def test_models(smollm_path, tmp_path):
    from edgepilot.cli.format import human_bytes
    from edgepilot.cli.models_cmd import render_models
    from edgepilot.store.manifest import list_store, record

    store = tmp_path / "store"
    target = store / "HuggingFaceTB__SmolLM2-135M-Instruct-GGUF" / smollm_path.name
    target.parent.mkdir(parents=True)
    target.write_bytes(smollm_path.read_bytes())
    import hashlib

    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    repo = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
    record(store, repo, smollm_path.name, "main", None, digest, target.stat().st_size)
    listing = list_store(store)
    assert listing.models
    m = listing.models[0]
    shown = each_width(render_models, listing, [human_bytes(m.size)])
    assert on_one_line(shown[120], "HuggingFaceTB", human_bytes(m.size), m.verdict)  # a table row


def test_pull_listing(gemma_path, smollm_path):
    from edgepilot.cli.format import human_bytes, mib
    from edgepilot.cli.models_cmd import render_pull
    from edgepilot.store.pull import Candidate, PullResult
    from edgepilot.tuned.decide import decide

    candidates = []
    for path in (gemma_path, smollm_path):
        plan = decide(path).plan
        size = path.stat().st_size
        candidates.append(
            Candidate(path.name, size, None, plan.fits, "Q4_K_M", plan.memory.peak_rss_bytes, plan.max_ctx)
        )
    result = PullResult(
        "unsloth/gemma-3-270m-it-GGUF", "main", "http://127.0.0.1:1", Path("/tmp"), candidates
    )
    figures = [human_bytes(c.size) for c in candidates] + [mib(c.peak_rss_bytes) for c in candidates]
    shown = each_width(render_pull, result, figures)
    c = candidates[0]
    assert on_one_line(shown[120], c.file, human_bytes(c.size), mib(c.peak_rss_bytes))


def test_cluster_plan(gemma_path):
    from edgepilot.cli.cluster_cmd import render_plan
    from edgepilot.cli.format import mib
    from edgepilot.cluster.plan import Helper, plan_cluster

    helpers = [Helper("192.168.1.20", 50052, 200 * 2**20), Helper("192.168.1.21", 50052, 300 * 2**20)]
    plan = plan_cluster(str(gemma_path), helpers, n_ctx=4096)
    figures = [mib(s.predicted_peak_bytes) for s in plan.helpers] + [
        mib(s.weights_bytes) for s in plan.helpers
    ]
    shown = each_width(render_plan, plan, figures)
    s = plan.helpers[0]
    assert on_one_line(shown[120], s.name, mib(s.weights_bytes), mib(s.predicted_peak_bytes))
    for text in shown.values():
        assert " ".join(plan.helper_commands[0]) in " ".join(
            line.strip().removesuffix("\\").strip() for line in text.splitlines()
        )


def test_doctor(gemma_path):
    from edgepilot.cli.doctor_cmd import render_diagnosis
    from edgepilot.doctor.diagnose import diagnose

    logs = Path(__file__).resolve().parents[1] / "logs"
    for log in sorted(logs.glob("*.txt"))[:12]:
        d = diagnose(log.read_text(errors="replace").splitlines(), model=str(gemma_path), root=None)
        each_width(render_diagnosis, d, [d.top.id])


def test_run_summary(smollm_path):
    from edgepilot.cli.format import mib
    from edgepilot.cli.run_cmd import render_summary
    from edgepilot.engine.sampling import SamplerSettings
    from edgepilot.run.runner import run_model

    result = run_model(
        str(smollm_path), "Hi", n_predict=4, sampler=SamplerSettings(temperature=0.0), warm=False
    )
    figures = [mib(result.peak_rss_bytes), f"{result.gen_tps:.1f} t/s", f"ctx {result.settings.n_ctx}"]
    shown = each_width(render_summary, result, figures)
    assert on_one_line(shown[120], "prompt", "generation", "peak memory")


def test_serve_started(fit_plans):
    from edgepilot.cli.format import mib
    from edgepilot.cli.serve_cmd import render_started
    from edgepilot.serve.server import ServeStarted

    plan = fit_plans[0]
    started = ServeStarted(
        "http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1", "127.0.0.1", 8080, str(plan.model),
        Path(plan.model).name, plan.settings, plan.memory.peak_rss_bytes, plan.budget_bytes,
        False, 1, 2, False,
        ["the worker restarts by itself after a crash or an out-of-memory kill"],
    )  # fmt: skip
    each_width(render_started, started, [mib(plan.memory.peak_rss_bytes), mib(plan.budget_bytes)])


def test_build_print_only():
    from edgepilot.cli.build_cmd import render_build
    from edgepilot.toolchain.builder import build_tools

    result = build_tools("aarch64", print_only=True)
    shown = each_width(render_build, result, [])
    for text in shown.values():
        joined = " ".join(line.strip().removesuffix("\\").strip() for line in text.splitlines())
        assert " ".join(result.cmake_lines[0].split()) in joined


def test_profile_view(smollm_path):
    from edgepilot.cli.bench_render import render_profile
    from edgepilot.tuned.profiles import ProfileView

    view = ProfileView(str(smollm_path), "/nonexistent/profile.json", None)
    each_width(render_profile, view, [])
