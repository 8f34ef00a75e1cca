"""The quality of one model through llama.cpp's own llama-perplexity (the tools engine), for compare.py: the
figures compare_child.py measures in-process, in the same shape.

llama-perplexity scores what quality.py mirrors (chunks of --ppl-ctx tokens, BOS first, the second half of
each scored). Its KL-divergence mode works in two steps: the reference run saves its next-token
distributions (`--kl-divergence-base FILE`, and prints its perplexity), then each other model reads them
(`--kl-divergence-base FILE --kl-divergence`) and prints perplexity, mean and maximum KL divergence and the
share of positions with the same top token. The memory run's prompt, which fills the context in the model's
own tokens, is cut with llama-server's tokenizer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from edgepilot.device.commands import run_output
from edgepilot.engine.base import EngineError
from edgepilot.engine.child_env import llama_env
from edgepilot.plan.settings import EngineSettings
from edgepilot.store import quality

NUMBER = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))"
FINAL = re.compile(rf"Final estimate: PPL = {NUMBER} \+/- {NUMBER}")
CHUNKS = re.compile(r"(?:computing|calculating perplexity) over (\d+) chunks")
MEAN_PPL = re.compile(rf"Mean PPL\(Q\)\s*:\s*{NUMBER}\s*±\s*{NUMBER}")
MEAN_KLD = re.compile(rf"Mean\s+KLD:\s*{NUMBER}")
MAX_KLD = re.compile(rf"Maximum KLD:\s*{NUMBER}")
SAME_TOP = re.compile(rf"Same top p:\s*{NUMBER}")
TIMEOUT_S = 3600
OUTPUT_BYTES = 16 << 20  # its log and a line of scores per chunk


def _find(pattern: re.Pattern[str], text: str, what: str) -> re.Match[str]:
    m = pattern.search(text)
    if m is None:
        raise ValueError(f"llama-perplexity printed no {what}")
    return m


def parse_base(text: str) -> dict[str, Any]:
    """The reference run's perplexity, its uncertainty and the chunks it scored."""
    final = _find(FINAL, text, "final estimate")
    return {
        "perplexity": float(final[1]),
        "ppl_stderr": float(final[2]),
        "chunks": int(_find(CHUNKS, text, "chunk count")[1]),
    }


def parse_kl(text: str) -> dict[str, Any]:
    """A compared model's perplexity, mean and maximum KL divergence and same-top share (0..1)."""
    ppl = _find(MEAN_PPL, text, "mean perplexity")
    return {
        "perplexity": float(ppl[1]),
        "ppl_stderr": float(ppl[2]),
        "kl_mean": float(_find(MEAN_KLD, text, "mean KL divergence")[1]),
        "kl_max": float(_find(MAX_KLD, text, "maximum KL divergence")[1]),
        "same_top": float(_find(SAME_TOP, text, "same-top share")[1]) / 100,
        "chunks": int(_find(CHUNKS, text, "chunk count")[1]),
    }


ERROR_LINE = re.compile(r"^[\d.]*\s*E\s+(.+)$", re.MULTILINE)  # llama.cpp's log: "0.00.360.694 E what"


def _parsed(parse: Any, text: str, name: str) -> dict[str, Any]:
    """parse(text), or an EngineError with llama-perplexity's own error lines: it exits 0 when it refuses a
    text shorter than two chunks ("you need at least 512 tokens ... tokenizes to only 61 tokens")."""
    try:
        return parse(text)
    except ValueError as exc:
        said = [m.strip() for m in ERROR_LINE.findall(text)][-2:]
        raise EngineError(f"llama-perplexity on {name}: {'; '.join(said) or exc}") from None


def _perplexity(tool: Path, argv: list[str], name: str) -> str:
    done = run_output([str(tool), *argv], TIMEOUT_S, OUTPUT_BYTES, env=llama_env(True, tool), shown=str(tool))
    if not done.started:
        raise EngineError(done.reason or f"cannot start {tool}")
    if done.reason is not None:
        raise EngineError(f"llama-perplexity on {name}: {done.reason}; stopped")
    text = done.stdout + "\n" + done.stderr
    if done.returncode != 0:
        assert done.returncode is not None
        if done.returncode < 0:
            raise EngineError(f"llama-perplexity on {name} was killed by signal {-done.returncode}")
        lines = [ln.strip() for ln in text.splitlines() if "error" in ln.lower() or "failed" in ln.lower()]
        last = (lines or [ln.strip() for ln in text.splitlines() if ln.strip()] or [""])[-1]
        raise EngineError(f"llama-perplexity on {name} failed (exit code {done.returncode}): {last}")
    return text


def fill_prompt(server: Any, text: str, fill_tokens: int) -> tuple[str, int]:
    """(text repeated and cut to at most fill_tokens - 1 tokens of this model, the text's own token count)."""
    n_text = len(server.tokenize(text, add_special=True))
    want = max(fill_tokens - 1, 1)
    repeated = text * (want // max(n_text - 1, 1) + 2)
    lo, hi = 0, len(repeated)  # the longest prefix within `want` tokens, by bisection on characters
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(server.tokenize(repeated[:mid], add_special=False)) <= want:
            lo = mid
        else:
            hi = mid - 1
    return repeated[:lo], n_text


def measure(tool: Path, server_tool: Path, job: dict[str, Any], text_file: Path) -> dict[str, Any]:
    """compare_child.measure's answer through llama-perplexity (and llama-server's tokenizer)."""
    from edgepilot.engine.server_engine import ServerEngine

    name = Path(job["model"]).name
    ppl_ctx = job["ppl_ctx"]
    common = ["-m", job["model"], "-c", str(ppl_ctx), "-b", str(ppl_ctx), "-ub", str(min(512, ppl_ctx))]
    common += ["-t", str(job["threads"]), "-dev", "none", "-ngl", "0"]
    if job["write_reference"]:
        argv = [*common, "-f", str(text_file), "--chunks", str(job["max_chunks"])]
        said = _perplexity(tool, [*argv, "--kl-divergence-base", job["reference_logprobs"]], name)
        out = _parsed(parse_base, said, name)
        out.update(kl_mean=0.0, kl_max=0.0, same_top=1.0)  # against itself, as in-process reports it
    else:
        argv = [*common, "--kl-divergence-base", job["reference_logprobs"], "--kl-divergence"]
        out = _parsed(parse_kl, _perplexity(tool, argv, name), name)
    out["n_scored"] = out.pop("chunks") * (ppl_ctx - 1 - quality.first_scored(ppl_ctx))
    settings = EngineSettings(n_ctx=256, n_batch=256, n_ubatch=256, n_threads=job["threads"])
    with ServerEngine(Path(job["model"]), settings, tool=server_tool) as server:
        out["fill_prompt"], out["n_text_tokens"] = fill_prompt(server, job["text"], job["fill_tokens"])
    return out
