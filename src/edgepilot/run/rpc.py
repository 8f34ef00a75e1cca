"""`run --rpc`: one prompt through llama.cpp's llama-completion with the layers on RPC helpers.

llama-cpp-python here is built without GGML_RPC, so the RPC client is the llama-completion `edgepilot build`
made (same commit as the helpers' rpc-server). The settings are the one decision (tuned.decide) `run` uses;
the prompt is given as is (no chat template). A failure is diagnosed by the doctor from the tool's output.
"""

from __future__ import annotations

import codecs
import os
import re
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from edgepilot.engine.child_env import llama_env
from edgepilot.engine.native_tools import find_tool
from edgepilot.errors import UserError
from edgepilot.gguf.resolve import resolve_model
from edgepilot.plan.commands import llama_cpp_command
from edgepilot.plan.requested import RequestedSettings
from edgepilot.plan.settings import EngineSettings
from edgepilot.tuned.decide import decide

TAIL_LINES = 400
READ = 4096


class RpcRunFailed(UserError):
    """llama-completion over RPC failed: the doctor's cause and fix in one line."""


@dataclass
class RpcRunResult:
    """`run`'s JSON keys (design.md), from llama-completion's own timings, plus the RPC facts."""

    text: str
    n_prompt: int | None
    n_gen: int | None
    prompt_tps: float | None
    gen_tps: float | None
    settings: EngineSettings
    peak_rss_bytes: int | None  # the main process's (the helpers' are their own)
    rpc: list[str]
    command: list[str]
    wall_seconds: float


# common_perf_print: "prompt eval time = 197.94 ms / 6 tokens (... 30.31 tokens per second)"
PERF = re.compile(r"\b(prompt eval|eval) time =.*?/\s*(\d+) (?:tokens|runs).*?([\d.]+) tokens per second")


def timings(lines: list[str]) -> dict[str, tuple[int, float]]:
    out = {}
    for line in lines:
        m = PERF.search(line)
        if m:
            out[m.group(1)] = (int(m.group(2)), float(m.group(3)))
    return out


def rpc_command(
    model: str,
    settings: EngineSettings,
    prompt: str,
    n_predict: int,
    rpc: list[str],
    tensor_split: list[float],
    temp: float,
    seed: int | None,
) -> list[str]:
    extra = ["-p", prompt, "-n", str(n_predict), "--temp", f"{temp:g}", "-no-cnv", "--no-display-prompt"]
    extra += ["--rpc", ",".join(rpc), "-ngl", "999"]
    if tensor_split:
        extra += ["--tensor-split", ",".join(f"{v:g}" for v in tensor_split)]
    if seed is not None:
        extra += ["--seed", str(seed)]
    return llama_cpp_command(model, settings, str(find_tool("llama-completion")), extra=extra)


def run_over_rpc(
    model: str | None,
    prompt: str,
    n_predict: int,
    requested: RequestedSettings,
    rpc: list[str],
    tensor_split: list[float],
    temp: float = 0.8,
    seed: int | None = None,
    on_text: Callable[[str], None] | None = None,
) -> RpcRunResult:
    path = resolve_model(model)
    settings = decide(path, requested).plan.settings  # the helpers' memory: `edgepilot cluster plan`
    settings = replace(settings, device=None)  # -dev none would leave the helpers' RPC devices out
    argv = rpc_command(str(path), settings, prompt, n_predict, rpc, tensor_split, temp, seed)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=llama_env(True, argv[0]),
    )
    log: deque[str] = deque(maxlen=TAIL_LINES)

    def pump_log() -> None:
        for raw in proc.stderr:  # type: ignore[union-attr]
            log.append(raw.decode("utf-8", errors="replace").rstrip("\n"))

    reader = threading.Thread(target=pump_log, daemon=True)
    reader.start()
    pieces: list[str] = []
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while chunk := proc.stdout.read1(READ):  # type: ignore[union-attr]
        piece = decoder.decode(chunk)
        pieces.append(piece)
        if on_text is not None and piece:
            on_text(piece)
    _, status, usage = os.wait4(proc.pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    proc.returncode = rc
    reader.join(5)
    text = "".join(pieces)
    if rc != 0:
        from edgepilot.doctor.diagnose import diagnose

        top = diagnose([*log, *text.splitlines()[-5:]], exit_code=rc, command=argv, model=str(path)).top
        raise RpcRunFailed(f"llama-completion over RPC failed: {top.title} — fix: {top.fix}")
    t = timings(list(log))
    n_prompt, prompt_tps = t.get("prompt eval", (None, None))
    n_gen, gen_tps = t.get("eval", (None, None))
    peak = usage.ru_maxrss * 1024 if usage.ru_maxrss else None
    wall = round(time.monotonic() - t0, 3)
    return RpcRunResult(text, n_prompt, n_gen, prompt_tps, gen_tps, settings, peak, rpc, argv, wall)
