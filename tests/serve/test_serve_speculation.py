"""`serve --lookup` (issue 42): llama-server is the worker, started with n-gram lookup in the spelling its
--help takes; a greedy answer is the one a plain llama-server worker gives; edgepilot's own worker refuses
speculation in one line."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
from servekit import start_server, write_device

SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank."
MESSAGES = [{"role": "user", "content": f"Repeat this sentence exactly: {SENTENCE}"}]


def _answer(served) -> str:
    code, body, _ = served.chat({"messages": MESSAGES, "temperature": 0, "max_tokens": 32})
    assert code == 200, body
    return body["choices"][0]["message"]["content"]


def test_serve_with_lookup_answers_as_plain_llama_server_does(smollm_path, tmp_path):
    write_device(tmp_path / "device")
    args = ["--ctx", "512", "--threads", "2", "--watch-root", str(tmp_path / "device")]
    answers, argvs, notes = {}, {}, {}
    for name, extra in {"plain": ("--engine", "tools"), "lookup": ("--lookup",)}.items():
        served = start_server(smollm_path, *args, *extra, tmp=tmp_path)
        try:
            served.wait_ready()
            answers[name] = _answer(served)
            notes[name] = served.info["notes"]
            (worker,) = [p for p in psutil.Process(served.proc.pid).children() if p.name() == "llama-server"]
            argvs[name] = worker.cmdline()
        finally:
            assert served.stop() == 0, served.stderr()
    assert answers["lookup"] == answers["plain"] and answers["plain"], answers
    assert "--spec-type" not in argvs["plain"]
    # the plan counts the verify batch's logits rows (serve's worker peak)
    assert any(n.startswith("the memory plan counts n-gram lookup: ") for n in notes["lookup"]), notes
    at = argvs["lookup"].index("--spec-type")
    assert argvs["lookup"][at + 1] == "ngram-simple", argvs["lookup"]


def test_serve_refuses_speculation_on_its_own_worker_in_one_line(smollm_path, tmp_path):
    argv = [sys.executable, "-m", "edgepilot", "serve", str(smollm_path), "--lookup", "--engine", "inprocess"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "EDGEPILOT_DATA_DIR": str(tmp_path)})  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "n-gram lookup runs on llama-server in this version: add --engine tools" in done.stderr
    assert "Traceback" not in done.stderr
