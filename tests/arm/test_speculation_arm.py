"""Speculation on a phone's llama-server (issue 42): the aarch64 build of the vendored llama.cpp, run under
qemu-user on a core with i8mm as Termux would find it, takes the flags edgepilot spells for its --help; with
n-gram lookup and with a draft model (SmolLM2 drafting for itself) the greedy text is plain generation's, the
drafts are counted from its answers, and the advice line is one this build accepts. Speed under emulation
means nothing, so none is asserted. Under qemu a token of prompt costs ~0.8 s (a draft's prompt is read
twice): two lines said three times and 16 tokens keep the three runs short. The lines are longer than
lookup's n-gram (12 tokens), and lookup's drafts are 12 long: llama.cpp drafts nothing shorter than its
n-gram, nor from a match with fewer tokens after it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import aarch64_lane
from speckit import LINES

N_GEN = 16


def _tools_dir(lane: aarch64_lane.Lane, tmp_path) -> str:
    """EDGEPILOT_TOOLS_DIR whose native llama-server is the aarch64 one under qemu (its libraries and CPU
    set in the wrapper, so nothing on the host side sees them)."""
    env = lane.env("max", "i8mm")
    folder = tmp_path / "tools" / "native" / "bin"
    folder.mkdir(parents=True)
    wrapper = folder / "llama-server"
    keep = " ".join(f"{k}={shlex.quote(env[k])}" for k in ("QEMU_LD_PREFIX", "LD_LIBRARY_PATH", "QEMU_CPU"))
    program = f"{shlex.quote(str(aarch64_lane.QEMU))} {shlex.quote(str(lane.tool('llama-server')))}"
    wrapper.write_text(f'#!/bin/sh\nexport {keep}\nexec {program} "$@"\n')
    wrapper.chmod(0o755)
    return str(tmp_path / "tools")


def _run(tools: str, tmp_path, model, *extra: str) -> dict:
    prompt = tmp_path / "rewrite.txt"  # a text to be written again: what n-gram lookup is for
    prompt.write_text(LINES * 3)
    argv = [sys.executable, "-m", "edgepilot", "run", str(model), "--engine", "tools", "--raw", "--temp", "0"]
    argv += ["-n", str(N_GEN), "--ctx", "128", "-t", "2", "--prompt-file", str(prompt), "--json", *extra]
    env = {**os.environ, "EDGEPILOT_TOOLS_DIR": tools, "EDGEPILOT_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=aarch64_lane.RUN_TIMEOUT_S, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_lookup_and_a_draft_on_the_aarch64_llama_server_keep_the_greedy_text(lane, smollm_path, tmp_path):
    tools = _tools_dir(lane, tmp_path)
    plain = _run(tools, tmp_path, smollm_path)
    assert plain["speculation"] is None and plain["n_gen"] == N_GEN
    lookup = _run(tools, tmp_path, smollm_path, "--lookup", "--draft-max", "12")
    draft = _run(tools, tmp_path, smollm_path, "--draft", str(smollm_path))
    for name, result in (("lookup", lookup), ("draft", draft)):
        spec = result["speculation"]
        assert result["text"] == plain["text"], (name, result["text"], plain["text"])
        assert spec["drafted"] > 0 and 0 < spec["accepted"] <= spec["drafted"], (name, spec)
    # the lines written again: lookup's drafts are kept nearly whole; a model drafting for itself agrees
    assert lookup["speculation"]["acceptance_rate"] > 0.8 and draft["speculation"]["acceptance_rate"] > 0.9
    assert "ngram-simple" in lookup["llama_cpp_args"]
    spelled = lookup["llama_cpp_args"]
    assert spelled[spelled.index("--spec-ngram-simple-size-m") + 1] == "12"
    args = draft["llama_cpp_args"]
    assert args[args.index("-md") + 1] == str(smollm_path) and "draft-simple" in args
