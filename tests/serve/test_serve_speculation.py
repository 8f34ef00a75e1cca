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
    statuses = {}
    for name, extra in {"plain": ("--engine", "tools"), "lookup": ("--lookup",)}.items():
        served = start_server(smollm_path, *args, *extra, tmp=tmp_path)
        try:
            served.wait_ready()
            answers[name] = _answer(served)
            _long(served, stream=False)
            _long(served, stream=True)
            statuses[name] = served.status()["speculation"]
            notes[name] = served.info["notes"]
            logged = served.stderr()
            (worker,) = [p for p in psutil.Process(served.proc.pid).children() if p.name() == "llama-server"]
            argvs[name] = worker.cmdline()
        finally:
            assert served.stop() == 0, served.stderr()
    assert answers["lookup"] == answers["plain"] and answers["plain"], answers
    assert "--spec-type" not in argvs["plain"]
    # the status page's figures: the replies' drafts added up, the answer and the stream alike
    assert statuses["plain"] is None
    spec = statuses["lookup"]
    assert spec["kind"] == "lookup" and spec["drafted"] > 0 and 0 < spec["accepted"] <= spec["drafted"], spec
    assert spec["acceptance_rate"] == round(spec["accepted"] / spec["drafted"], 3)
    assert spec["tokens_per_step"] > 1, spec
    assert "drafted kept" in logged, logged[-2000:]  # the request's log line
    # the plan counts the verify batch's logits rows (serve's worker peak)
    assert any(n.startswith("the memory plan counts n-gram lookup: ") for n in notes["lookup"]), notes
    at = argvs["lookup"].index("--spec-type")
    assert argvs["lookup"][at + 1] == "ngram-simple", argvs["lookup"]


def _long(served, stream: bool) -> None:
    """A paragraph to repeat: long enough for lookup's drafts (it needs over 61 tokens of context)."""
    text = " ".join([SENTENCE] * 6)
    messages = [{"role": "user", "content": f"Repeat this text exactly: {text}"}]
    body = {"messages": messages, "temperature": 0, "max_tokens": 64, "stream": stream}
    code, _, raw = served.request("POST", "/v1/chat/completions", body, served.auth())
    assert code == 200 and (b"data: [DONE]" in raw) == stream, raw[-500:]


def test_serve_draft_auto_without_a_tuned_profile_serves_plain_and_says_why(smollm_path, tmp_path):
    write_device(tmp_path / "device")
    args = ["--ctx", "512", "--watch-root", str(tmp_path / "device"), "--draft", "auto"]
    served = start_server(smollm_path, *args, tmp=tmp_path, env={"EDGEPILOT_DATA_DIR": str(tmp_path)})
    try:
        served.wait_ready()
        assert served.status()["speculation"] is None
        assert "--draft auto: plain generation (no tuned profile" in served.stderr()
    finally:
        assert served.stop() == 0, served.stderr()


def test_serve_refuses_speculation_on_its_own_worker_in_one_line(smollm_path, tmp_path):
    argv = [sys.executable, "-m", "edgepilot", "serve", str(smollm_path), "--lookup", "--engine", "inprocess"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "EDGEPILOT_DATA_DIR": str(tmp_path)})  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "n-gram lookup runs on llama-server in this version: add --engine tools" in done.stderr
    assert "Traceback" not in done.stderr
