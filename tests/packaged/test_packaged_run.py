"""Debian sid's llama.cpp 0.7.x as the engine, with no llama-cpp-python: what a Termux user gets.

The root has Python 3.14 and Debian's llama.cpp-tools (another llama.cpp than the pinned one); edgepilot is
pip-installed from this checkout without its dependencies (tests/packaged/sidlane.py).
"""

from __future__ import annotations

import json

import sidlane as lane


def edgepilot(root, *args, **kw):
    return lane.run(root, ["edgepilot", *args], **kw)


def test_no_binding_and_probe_names_the_tools_engine(sid_root):
    done = lane.run(
        sid_root, ["python3", "-c", "import importlib.util as u; print(u.find_spec('llama_cpp'))"]
    )
    assert done.stdout.strip() == "None", done.stdout
    done = edgepilot(sid_root, "probe", "--json")
    assert done.returncode == 0, done.stderr
    engine = json.loads(done.stdout)["engine"]
    assert engine["kind"] == "tools"
    assert engine["path"] == "/usr/bin/llama-server"
    assert engine["version"].startswith("0.7"), engine


def test_run_through_llama_server(sid_root):
    model = lane.model_in_root(sid_root, "smollm")
    done = edgepilot(
        sid_root, "run", model, "-p", "Count: one, two, three,", "-n", "8", "--temp", "0", "--json"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["n_gen"] == 8 and result["gen_tps"] > 0 and result["n_prompt"] > 5
    assert result["stopped_by"] == "limit" and result["text"].strip()
    # the exact words of a 135M model depend on which CPU variant ggml loads (libggml-cpu-*.so): what is
    # ours is that they are the model's own, greedy, the same every time
    again = edgepilot(
        sid_root, "run", model, "-p", "Count: one, two, three,", "-n", "8", "--temp", "0", "--json"
    )
    assert again.returncode == 0 and json.loads(again.stdout)["text"] == result["text"]
    assert result["engine"]["kind"] == "tools"
    assert result["peak_rss_bytes"] > 50 << 20  # llama-server's, not this Python's
