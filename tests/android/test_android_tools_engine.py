"""What a Termux user gets, as far as this machine can show it: Android's Python (SIMULATED, see
sim/sitecustomize.py) without the in-process engine, running llama.cpp's own llama-server. The llama-server
is the one `edgepilot build` made here (Termux's would come from `pkg install llama-cpp`)."""

from __future__ import annotations

import json

from simkit import edgepilot_cli

from nativekit import native_tool


def test_run_and_chat_on_llama_server_under_androids_python(smollm_path):
    native_tool("llama-server")
    done = edgepilot_cli("probe", "--json", engine="tools")
    assert done.returncode == 0, done.stderr[-1500:]
    assert json.loads(done.stdout)["engine"]["kind"] == "tools"
    run = ("run", str(smollm_path), "-p", "Count: one, two, three,", "--raw", "-n", "6", "--temp", "0",
           "--json")  # fmt: skip
    done = edgepilot_cli(*run, engine="tools")
    assert done.returncode == 0, done.stderr[-1500:]
    result = json.loads(done.stdout)
    assert result["engine"]["kind"] == "tools" and result["n_gen"] == 6 and result["stopped_by"] == "limit"
    assert result["text"].strip()
    # greedy, it says what llama-server says for this machine's Linux Python (which words: this CPU's)
    done = edgepilot_cli(*run, engine="tools", android=False)
    assert done.returncode == 0, done.stderr[-1500:]
    assert json.loads(done.stdout)["text"] == result["text"]
    done = edgepilot_cli(
        "chat", str(smollm_path), "--temp", "0", "-n", "8", "--ctx", "512", "--json",
        stdin="Name a fruit.\nName a color.\n", engine="tools",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-1500:]
    first, second = json.loads(done.stdout)["turns"]
    assert second["n_reused"] >= first["n_prompt"]
