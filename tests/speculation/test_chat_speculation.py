"""`chat --lookup` (issue 42): each turn's greedy answer is the target's own, the turn says how many drafted
tokens it kept (its status line and --json), and the KV cache is reused across turns as without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

LINES = (
    "Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the river bank.\n"
    "Again, repeat it exactly.\n"
)


def _chat(model: Path, data: Path, *args: str) -> dict:
    env = {**os.environ, "EDGEPILOT_DATA_DIR": str(data)}
    argv = [sys.executable, "-m", "edgepilot", "chat", str(model), "--temp", "0", "-n", "32", "--no-save"]
    done = subprocess.run([*argv, *args, "--json"], input=LINES, capture_output=True, text=True, timeout=600,
                          env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_chat_with_lookup_answers_as_without_and_says_what_it_kept(smollm_path, tmp_path):
    plain = _chat(smollm_path, tmp_path, "--engine", "tools")
    lookup = _chat(smollm_path, tmp_path, "--lookup")
    assert [t["text"] for t in lookup["turns"]] == [t["text"] for t in plain["turns"]]
    assert lookup["engine"]["kind"] == "tools" and all(t["speculation"] is None for t in plain["turns"])
    second = lookup["turns"][1]
    assert second["n_reused"] > 0  # the cache stays across turns with speculation on
    spec = second["speculation"]
    assert spec["kind"] == "lookup" and spec["drafted"] > 0 and spec["accepted"] > 0, spec
    said = lookup["notes"]
    assert any(n.startswith("the memory plan counts n-gram lookup: ") for n in said), said
