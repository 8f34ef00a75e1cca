"""The quality of one model, measured in a process of its own (`python -m edgepilot.store.compare_child`:
a job as JSON on stdin, one JSON result on stdout), so the parent never holds a model.

Log-probabilities of the scored positions of the text (quality.py); the reference writes them to a .npy
file, every other model reads it for the KL divergence. It also returns the prompt (the text, repeated) that
fills the memory run's context, in this model's own tokens.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np


def measure(job: dict[str, Any]) -> dict[str, Any]:
    from edgepilot.engine.inprocess import LlamaEngine
    from edgepilot.engine.logits import sequence_logprobs
    from edgepilot.plan.settings import EngineSettings
    from edgepilot.store import quality

    text = job["text"]
    out: dict[str, Any] = {}
    ppl_ctx = job["ppl_ctx"]
    qsettings = EngineSettings(
        n_ctx=ppl_ctx, n_batch=ppl_ctx, n_ubatch=min(512, ppl_ctx), n_threads=job["threads"]
    )
    with LlamaEngine(job["model"], qsettings) as engine:
        tokens = engine.tokenize(text)
        add_bos = engine.bos_token() if tokens and tokens[0] == engine.bos_token() else None
        # first: a text shorter than one chunk is refused here (it would never fill the context below)
        pieces = quality.chunks(tokens, ppl_ctx, job["max_chunks"], add_bos)
        # the prompt for the memory run: text that fills its context, less the tokens it will generate
        fill = list(tokens)
        while len(fill) < job["fill_tokens"]:
            fill += tokens[1:]
        out["fill_prompt"] = b"".join(engine.piece(t) for t in fill[1 : job["fill_tokens"]]).decode(
            "utf-8", errors="ignore"
        )
        first = quality.first_scored(ppl_ctx)
        per_chunk = ppl_ctx - 1 - first
        n_vocab = engine.load.n_vocab
        shape = (len(pieces) * per_chunk, n_vocab)
        ref = None
        if job["write_reference"]:
            ref = np.lib.format.open_memmap(
                job["reference_logprobs"], mode="w+", dtype=np.float32, shape=shape
            )
        elif job["reference_logprobs"]:
            ref = np.load(job["reference_logprobs"], mmap_mode="r")
            if ref.shape != shape:
                raise ValueError(
                    f"{job['model']} does not share the reference's vocabulary and tokens "
                    f"({n_vocab} tokens vs {ref.shape[1]}): KL divergence needs the same tokenizer"
                )
        nlls: list[np.ndarray] = []
        kls: list[np.ndarray] = []
        same = 0
        for i, chunk in enumerate(pieces):
            lp = sequence_logprobs(engine, chunk, first)
            targets = chunk[first + 1 :]
            nlls.append(quality.token_nll(lp, targets))
            if ref is not None:
                rows = slice(i * per_chunk, (i + 1) * per_chunk)
                if job["write_reference"]:
                    ref[rows] = lp
                kls.append(quality.kl_rows(ref[rows], lp))
                same += quality.same_top(ref[rows], lp)
        if job["write_reference"] and ref is not None:
            ref.flush()
    all_nll = np.concatenate(nlls)
    out["perplexity"], out["ppl_stderr"] = quality.perplexity_of(list(all_nll))
    out["n_scored"] = int(len(all_nll))
    out["n_text_tokens"] = len(tokens)
    if kls:
        kl = np.concatenate(kls)
        out["kl_mean"] = float(kl.mean())
        out["kl_max"] = float(kl.max())
        out["same_top"] = same / len(kl)
    return out


def main() -> None:
    job = json.loads(sys.stdin.read())
    try:
        result = measure(job)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as one line
        result = {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
