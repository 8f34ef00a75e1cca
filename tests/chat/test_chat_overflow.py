"""A conversation longer than its context goes on (old turns dropped, with a note), and session files that
are not this session's are refused with one line: the bundled Gemma 3 270M, a 256-token context."""

from __future__ import annotations

import json
import subprocess
import sys

from edgepilot.engine.session_state import FORMAT, MAGIC, model_identity


def test_overflowing_chat_continues_with_a_note_and_refuses_another_models_state(
    gemma_path, smollm_path, tmp_path
):
    # A session file as SmolLM2 would save it (its identity, a cache of 3 tokens).
    header = {"format": FORMAT, "model": model_identity(smollm_path), "context": {}, "tokens": [1, 2, 3],
              "state_bytes": 16, "messages": []}  # fmt: skip
    head = json.dumps(header).encode()
    other = tmp_path / "smollm.session"
    other.write_bytes(MAGIC + f"{len(head)}\n".encode() + head + bytes(16))

    fact = "The weather today is sunny and warm, and the market sells apples, pears and plums. "
    lines = [f"/load {other}"] + [f"{fact}Turn {i}: what fruit is sold?" for i in range(7)] + ["/stats"]
    done = subprocess.run(
        [sys.executable, "-m", "edgepilot", "chat", "--ctx", "256", "-n", "24", "--temp", "0", "--json",
         "--system", "You answer briefly."],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "another model" in errors[0], done.stderr
    result = json.loads(done.stdout)
    n_ctx = result["settings"]["n_ctx"]
    assert n_ctx == 256
    turns = result["turns"]
    assert len(turns) == 7  # every message answered, none refused
    dropped = [t for t in turns if any("context full" in n for n in t["notes"])]
    assert dropped, [t["notes"] for t in turns]
    assert "note: context full: dropped" in done.stderr
    for t in turns:
        assert t["n_prompt"] + min(24, n_ctx // 4) <= n_ctx
        assert t["n_prompt_new"] + t["n_reused"] == t["n_prompt"]
    assert turns[1]["n_reused"] > 0  # before the context filled up, the cache was reused
