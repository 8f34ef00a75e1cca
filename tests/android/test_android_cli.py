"""The Android lane: the real `edgepilot` CLI on the SIMULATED Android interpreter (sim/sitecustomize.py:
sys.platform "android", platform.system() "Android", sys.getandroidapilevel() 24, as PEP 738 says Termux's
Python reports), with the real models and the real in-process llama.cpp. Not a phone: the kernel, libc and
llama.cpp build are this machine's. Before issue 21, run, chat, serve and bench died here with
llama-cpp-python's "Unsupported platform", and doctor's memory limit said "needs Linux cgroups"."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from simkit import edgepilot_cli

from edgepilot.doctor.cgroup import cgroup_problem

MiB = 1 << 20


def _ok(done) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


def test_probe(devices):
    data = _ok(edgepilot_cli("probe", "--json", engine=None))
    assert data["cpu"]["cores"] >= 1 and data["memory"]["total_bytes"] > 0
    # engine auto: the binding's libllama.so is found by its Linux name on Android's Python, without loading
    found = data["engine"]
    assert found["kind"] == "inprocess" and not found["checked"] and found["library"].endswith("/libllama.so")
    # and it does load there, so the in-process engine is the one a run takes
    checked = _ok(edgepilot_cli("probe", "--json", "--check-engine", engine=None))["engine"]
    assert checked["kind"] == "inprocess" and checked["checked"]
    assert checked["why"] == "llama-cpp-python runs (checked in a child process)"
    assert checked["cpu_check"]["outcome"] == "ok"  # the check's child loaded it on Android's Python
    # this machine is no phone: no getprop, so no Android facts, whatever Python says
    assert data["android"] is None
    phone = _ok(edgepilot_cli("probe", "--json", "--root", str(devices / "sd8gen2-xiaomi13pro")))
    assert phone["android"]["sdk"] and phone["cpu"]["arch"] == "aarch64"


def test_fit(smollm_path):
    data = _ok(edgepilot_cli("fit", str(smollm_path), "--ctx", "256", "--json"))
    assert data["fits"] and data["settings"]["n_ctx"] == 256 and data["engine"]["kind"] == "inprocess"
    assert data["memory"]["peak_rss_bytes"] > data["memory"]["weights_bytes"] > 0


@pytest.mark.parametrize("model", ["smollm_path", "gemma_path"])
def test_run(model, request):
    path = request.getfixturevalue(model)
    args = ("run", str(path), "-p", "The capital of France is", "-n", "8", "--ctx", "256", "--temp", "0",
            "--json")  # fmt: skip
    data = _ok(edgepilot_cli(*args))
    assert data["engine"]["kind"] == "inprocess"
    assert data["text"].strip() and 0 < data["n_gen"] <= 8 and data["n_prompt"] > 0
    assert data["stopped_by"] == ("limit" if data["n_gen"] == 8 else "eog")
    assert data["gen_tps"] > 0 and data["peak_rss_bytes"] > 0
    assert data["settings"]["n_ctx"] == 256
    # greedy, it says what it says on this machine's Linux Python (which words: this CPU's kernels')
    linux = _ok(edgepilot_cli(*args, android=False))
    assert (linux["text"], linux["n_gen"]) == (data["text"], data["n_gen"])


def test_chat_two_turns_reuse_the_cache(smollm_path):
    lines = ["My name is Ada and I like apples.", "What fruit do I like?"]
    done = edgepilot_cli("chat", str(smollm_path), "--ctx", "512", "-n", "12", "--temp", "0", "--json",
                         "--system", "You answer briefly.", stdin="\n".join(lines) + "\n")  # fmt: skip
    data = _ok(done)
    first, second = data["turns"]
    assert first["text"].strip() and second["text"].strip()
    assert first["n_reused"] == 0
    assert second["n_reused"] > 0, second  # the first turn's tokens stay in the KV cache
    assert second["n_prompt_new"] + second["n_reused"] == second["n_prompt"]
    assert second["n_prompt_new"] < second["n_prompt"]


def test_bench(smollm_path):
    data = _ok(edgepilot_cli("bench", str(smollm_path), "-p", "8", "-n", "4", "-r", "1", "-t", "1", "--json"))
    rows = data["rows"]
    assert {(r["n_prompt"], r["n_gen"]) for r in rows} == {(8, 0), (0, 4)}
    assert all(r["n_threads"] == 1 and r["avg_ts"] > 0 and len(r["samples_ts"]) == 1 for r in rows)


def test_doctor_names_a_kill():
    data = _ok(edgepilot_cli("doctor", "--exit-code", "137", "--json"))
    assert data["causes"][0]["id"] == "killed-by-system"


@pytest.mark.skipif(cgroup_problem() is not None, reason=cgroup_problem() or "")
def test_doctor_memory_limit_kills_and_explains(smollm_path):
    """cgroup v1 works from Android's Python as from Linux's (doctor/cgroup.py asked for "linux" before)."""
    edgepilot = str(Path(sys.executable).with_name("edgepilot"))  # the console script; inherits the sim
    run = [edgepilot, "run", str(smollm_path), "--ctx", "32768", "-p", "hi", "-n", "4", "--force",
           "--threads", "2"]  # fmt: skip
    done = edgepilot_cli("doctor", "--json", "--memory-limit", "300MiB", "--", *run)
    assert done.returncode == 137, done.stderr[-3000:]
    data = json.loads(done.stdout)
    assert data["run"]["memory_limit_bytes"] == 300 * MiB and data["run"]["cgroup"]["oom_kill"] >= 1
    top = data["causes"][0]
    assert top["id"] == "killed-by-system", [c["id"] for c in data["causes"]]
    assert any(e.startswith("memory plan: ctx 32768") for e in top["evidence"]), top["evidence"]
