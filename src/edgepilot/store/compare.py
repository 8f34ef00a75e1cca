"""`edgepilot compare FILES...`: size, predicted vs measured peak memory, speed and quality of model variants.

Each file is measured in processes of its own: its quality in compare_child.py (without llama-cpp-python:
llama.cpp's llama-perplexity in its KL-divergence mode, compare_tool.py), its memory and speed by
`edgepilot run` itself with a prompt that fills --ctx (the settings decision, tuned.decide, is the one `fit`
uses, so the measured peak is the very thing `fit` predicts; pp and tg are run's prompt and generation
speed). Quality is measured against the most precise file (highest bits per weight: the F16
reference `edgepilot quantize` makes): perplexity on a text (by default one the project ships) and the KL
divergence of each file's next-token distributions from the reference's.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from edgepilot.datadir import data_dir, writable_data_folder
from edgepilot.device.commands import run_output
from edgepilot.engine.choice import choose_engine
from edgepilot.errors import UserError
from edgepilot.gguf.resolve import resolve_model
from edgepilot.gguf.tokenizer_id import differences, tokenizer_digests
from edgepilot.plan.requested import RequestedSettings
from edgepilot.safe_write import write_failure
from edgepilot.store import quality
from edgepilot.store.compare_types import Compared, CompareResult
from edgepilot.store.quantize import bits_per_weight, describe_source
from edgepilot.tuned.decide import decide

__all__ = ["CompareResult", "Compared", "compare_models"]

DATA_FIX = "set EDGEPILOT_DATA_DIR to a folder you can write"
CHILD_OUTPUT = 4 << 20  # one JSON object (a run's report, its notes)
CHILD_TIMEOUT_S = 3600  # a 1B model's pp + quality on a slow phone core takes minutes, not hours
MAX_FILES = 32


def _check_sizes(ctx: int, ppl_ctx: int, chunks: int, n_gen: int) -> None:
    for flag, value, low, high in (
        ("--ctx", ctx, 64, 1 << 20),
        ("--ppl-ctx", ppl_ctx, 16, 1 << 16),
        ("--chunks", chunks, 1, 10_000),
        ("--n-gen", n_gen, 1, 4096),
    ):
        if not low <= value <= high:
            raise UserError(f"{flag} {value}: out of range ({low} to {high})")
    if n_gen + 16 > ctx:
        raise UserError(f"--n-gen {n_gen} leaves no room for a prompt in --ctx {ctx}")


def _check_tokenizers(paths: list[Path], ref_index: int) -> None:
    """KL divergence compares distributions token id by token id: every file needs the reference's tokenizer
    (a vocabulary of the same size is not enough; the token strings, merges and model must be the same)."""
    try:
        digests = [tokenizer_digests(p) for p in paths]
    except OSError as exc:
        raise UserError(f"cannot read a model's tokenizer: {exc.strerror or exc}") from None
    for i, p in enumerate(paths):
        differ = differences(digests[ref_index], digests[i])
        if differ:
            raise UserError(
                f"{p.name} does not share the tokenizer of {paths[ref_index].name} ({', '.join(differ)} "
                "differ): compare measures variants of one model"
            )


def _child(args: list[str], name: str, stdin: str | None = None) -> dict:
    """The one JSON object `python ARGS` prints on stdout (read bounded); a UserError with its reason
    otherwise."""
    data = None if stdin is None else stdin.encode()
    done = run_output(
        [sys.executable, *args], CHILD_TIMEOUT_S, CHILD_OUTPUT, input=data, shown=f"measuring {name}"
    )
    if done.reason is not None:
        raise UserError(f"{done.reason}; stopped")
    assert done.returncode is not None
    if done.returncode < 0:
        raise UserError(
            f"measuring {name}: the process was killed by signal {-done.returncode} (out of memory?)"
        )
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        raise UserError(f"measuring {name} failed: {tail[0]}") from None
    if not isinstance(result, dict):
        raise UserError(f"measuring {name} failed: its output is not a JSON object")
    if "error" in result:
        raise UserError(f"measuring {name} failed: {result['error']}")
    return result


def _memory_run(
    path: Path, prompt_file: Path, ctx: int, n_gen: int, threads: int | None, engine: str
) -> dict:
    """`edgepilot run` itself with a prompt that fills the context: the process `fit` predicts the peak of.
    --force: a variant that does not fit the budget is still measured (the table marks it)."""
    args = ["-m", "edgepilot", "run", str(path), "--prompt-file", str(prompt_file), "-n", str(n_gen)]
    args += ["--ctx", str(ctx), "--raw", "--temp", "0", "--force", "--json", "--engine", engine]
    if threads is not None:
        args += ["--threads", str(threads)]
    return _child(args, path.name)


def _reference_note(path: Path, file_type: str | None, origin: str | None) -> str:
    if origin:
        return f"reference = {origin}"
    kind = file_type or "unknown type"
    return f"reference = {path.name} ({kind}): the most bits per weight of the files given"


def compare_models(
    files: list[str],
    text_file: str | None = None,
    ctx: int = 512,
    ppl_ctx: int = 256,
    max_chunks: int = 4,
    n_gen: int = 32,
    threads: int | None = None,
    plot: str | None = None,
    on_progress: Callable[[str], None] | None = None,
    engine: str | None = None,
) -> CompareResult:
    """engine: "auto", "inprocess" or "tools" (quality by llama-perplexity, memory and speed by
    `edgepilot run --engine tools`)."""
    say = on_progress or (lambda _msg: None)
    if not files:
        raise UserError("give at least one model file")
    if len(files) > MAX_FILES:
        raise UserError(f"{len(files)} files: compare at most {MAX_FILES} at once")
    _check_sizes(ctx, ppl_ctx, max_chunks, n_gen)
    if plot is not None:
        from edgepilot.store.compare_plot import check_plot_target

        check_plot_target(plot)
    scratch = writable_data_folder(data_dir(), "scratch files")  # before minutes of measuring
    text_name, text = quality.read_text(text_file)
    quality.check_text(text_name, text, ppl_ctx)  # before any model loads: an empty text is one line, fast
    paths = [resolve_model(f) for f in files]
    info = choose_engine(engine, tool="llama-perplexity")
    # without the binding, `edgepilot run` measures through llama-server: the plan is for its llama.cpp, and
    # its tokenizer cuts the prompt that fills the context
    runner = choose_engine("tools") if info.kind == "tools" else None
    server = Path(str(runner.path)) if runner else None
    kinds = [describe_source(p) for p in paths]
    bpw = [bits_per_weight(p) for p in paths]
    ref_index = max(range(len(paths)), key=lambda i: bpw[i])  # the first of equals
    _check_tokenizers(paths, ref_index)
    order = [ref_index] + [i for i in range(len(paths)) if i != ref_index]
    requested = RequestedSettings(n_ctx=ctx, n_threads=threads)
    decisions = [decide(p, requested, engine=runner) for p in paths]
    note = _reference_note(paths[ref_index], kinds[ref_index][0], kinds[ref_index][1])
    say(note)
    measured: dict[int, dict] = {}
    # On disk, not in RAM (on Linux /tmp is often tmpfs): n_vocab x 4 bytes per scored position
    try:
        work = tempfile.TemporaryDirectory(prefix="compare-", dir=scratch)
    except OSError as exc:
        raise write_failure(exc, "scratch files", scratch / "compare", DATA_FIX) from None
    with work as tmp:
        ref_file = str(Path(tmp) / ("reference.kld" if server else "reference-logprobs.npy"))
        text_path = Path(tmp) / "text.txt"
        text_path.write_text(text, encoding="utf-8")
        for step, i in enumerate(order, 1):
            say(f"[{step}/{len(paths)}] {paths[i].name}: memory, speed, quality")
            job = {
                "model": str(paths[i]),
                "threads": decisions[i].settings.n_threads,
                "fill_tokens": decisions[i].settings.n_ctx - n_gen - 8,
                "text": text,
                "ppl_ctx": ppl_ctx,
                "max_chunks": max_chunks,
                "reference_logprobs": ref_file,
                "write_reference": i == ref_index,
            }
            if server is not None:
                from edgepilot.store.compare_tool import measure

                m = measure(Path(str(info.path)), server, job, text_path)
            else:
                m = _child(["-m", "edgepilot.store.compare_child"], paths[i].name, json.dumps(job))
            prompt_file = Path(tmp) / "fill-prompt.txt"
            prompt_file.write_text(m.pop("fill_prompt"), encoding="utf-8")
            n_ctx = decisions[i].settings.n_ctx
            m["run"] = _memory_run(paths[i], prompt_file, n_ctx, n_gen, threads, info.kind)
            measured[i] = m
            kl = f", KL {m['kl_mean']:.5f}" if i != ref_index and "kl_mean" in m else ""
            say(f"  peak {m['run']['peak_rss_bytes'] / 2**20:.1f} MiB, PPL {m['perplexity']:.3f}{kl}")
    rows = []
    for i, p in enumerate(paths):
        m, plan = measured[i], decisions[i].plan
        predicted = plan.memory.peak_rss_bytes
        rows.append(
            Compared(
                name=p.name,
                path=str(p),
                file_type=kinds[i][0],
                file_bytes=p.stat().st_size,
                bits_per_weight=round(bpw[i], 3),
                reference=i == ref_index,
                predicted_peak_bytes=predicted,
                measured_peak_bytes=m["run"]["peak_rss_bytes"],
                peak_error=(predicted - m["run"]["peak_rss_bytes"]) / m["run"]["peak_rss_bytes"],
                pp_tps=m["run"]["prompt_tps"],
                tg_tps=m["run"]["gen_tps"],
                n_prompt=m["run"]["n_prompt"],
                perplexity=m["perplexity"],
                ppl_stderr=m["ppl_stderr"],
                kl_mean=m.get("kl_mean"),
                kl_max=m.get("kl_max"),
                same_top=m.get("same_top"),
                settings=decisions[i].settings,
                fits=plan.fits,
            )
        )
    ref_m = measured[ref_index]
    result = CompareResult(
        reference=str(paths[ref_index]),
        reference_note=note,
        text=text_name,
        text_tokens=ref_m["n_text_tokens"],
        ppl_ctx=ppl_ctx,
        n_scored=ref_m["n_scored"],
        n_ctx=decisions[ref_index].settings.n_ctx,
        n_gen=n_gen,
        rows=rows,
        engine=info,
    )
    if any(not r.fits for r in rows):
        result.notes.append(
            "a file marked * does not fit this device's budget at this context: measured anyway"
        )
    if plot is not None:
        from edgepilot.store.compare_plot import write_png

        write_png(result, plot)
        result.plot = plot
    return result
