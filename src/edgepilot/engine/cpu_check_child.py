"""The in-process engine's CPU check, run as a child (`python -m edgepilot.engine.cpu_check_child MODEL
REPACK THREADS`): llama-cpp-python's library loads the model as a run would (repacking and llama.cpp's other
extra buffer types on when REPACK is 1), decodes a prompt batch long enough for the batched kernels (AMX and
the repacked GEMMs only run on batches of more than a few rows) and generates two tokens. It prints what the
library was compiled with and `edgepilot-cpu-check: ok`; an illegal instruction kills this child, not the
command that asked.
"""

from __future__ import annotations

import sys
from pathlib import Path

MARK = "edgepilot-cpu-check:"
PROMPT_WORDS = 48  # about 64 tokens with the chat-free prompt below: a full 64-row batch
N_CTX = 256
N_BATCH = 64


def check_prompt() -> str:
    text = "the quick brown fox jumps over the lazy dog while seven small robots count prime numbers"
    words = text.split(" ")
    return " ".join(words[i % len(words)] for i in range(PROMPT_WORDS))


def main(argv: list[str]) -> int:
    from edgepilot.engine.inprocess import LlamaEngine
    from edgepilot.engine.llama_binding import llama_cpp
    from edgepilot.engine.sampling import SamplerSettings
    from edgepilot.plan.settings import EngineSettings

    model, repack, threads = Path(argv[0]), argv[1] == "1", max(1, int(argv[2]))
    info = llama_cpp.llama_print_system_info()
    print(f"{MARK} system_info: {info.decode('utf-8', 'replace') if isinstance(info, bytes) else info}")
    settings = EngineSettings(
        n_ctx=N_CTX, n_batch=N_BATCH, n_ubatch=N_BATCH, n_threads=threads, repack=repack, use_mmap=True
    )
    sys.stdout.flush()
    with LlamaEngine(model, settings) as engine:
        tokens = engine.tokenize(check_prompt())[:N_BATCH]
        stats = engine.generate(tokens, 2, sampler=SamplerSettings(temperature=0.0), stop_at_eog=False)
    print(f"{MARK} ok: {stats.n_prompt} prompt tokens in one batch, {stats.n_gen} generated")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
