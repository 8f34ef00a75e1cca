"""One read of a model per command: the MODEL argument is opened once and its header parsed once, and the
planner, the engine's set-up and the doctor get that value (gguf/verdict.py) instead of reading it again.

Counted in a real process of each command. Two readers are deliberate and named: `run`'s preload (it reads the
whole file into the page cache on purpose) and the model identity of bench/tune (a hash of 2 MiB of it) and
of a chat's kept session (model_identity: 4 MiB).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

COUNTER = str(Path(__file__).with_name("count_reads.py"))
DELIBERATE = ("preload", "model_id")


def _reads(model: Path, *args: str, stdin: str | None = None) -> dict:
    done = subprocess.run(
        [sys.executable, COUNTER, str(model), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = next(ln for ln in done.stderr.splitlines() if ln.startswith("READS "))
    return json.loads(line[len("READS ") :])


@pytest.mark.parametrize(
    "args",
    [
        ["fit", "{m}", "--json"],
        ["inspect", "{m}"],
        ["run", "{m}", "-n", "1", "-p", "hi", "--ctx", "256", "--json"],
        ["bench", "{m}", "-p", "8", "-n", "2", "-r", "1", "-t", "1", "--json"],
        ["cluster", "plan", "{m}", "--helper", "127.0.0.1:50052=200MiB", "--json"],
        ["doctor", "--model", "{m}", "--exit-code", "137", "--json"],
    ],
    ids=lambda a: a[0] if a[0] != "cluster" else "cluster-plan",
)
def test_a_command_opens_and_parses_the_model_once(smollm_path, args):
    reads = _reads(smollm_path, *[a.replace("{m}", str(smollm_path)) for a in args])
    assert reads["code"] in (0, 1), reads  # doctor's diagnosis exits as the run did; inspect 0
    assert reads["parses"] == 1, reads
    header_opens = [o for o in reads["opens"] if not any(d in o for d in DELIBERATE)]
    assert len(header_opens) == 1, reads["opens"]


def test_chat_reads_the_model_once_for_all_its_turns(smollm_path):
    script = "Hi\nWhat is 2+2?\n"
    reads = _reads(
        smollm_path, "chat", str(smollm_path), "-n", "4", "--ctx", "256", "--temp", "0", stdin=script
    )
    assert reads["code"] == 0 and reads["parses"] == 1, reads
    assert len([o for o in reads["opens"] if not any(d in o for d in DELIBERATE)]) == 1, reads["opens"]


def test_a_changed_file_is_read_again(tmp_path, smollm_path):
    from edgepilot.gguf.verdict import model_verdict

    copy = tmp_path / "m.gguf"
    copy.write_bytes(smollm_path.read_bytes())
    first = model_verdict(copy, "plan")
    with copy.open("r+b") as f:  # same size, another byte in the tail: mtime changes
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 1]))
    second = model_verdict(copy, "plan")
    assert second.header is not first.header
    assert model_verdict(copy, "load").header is second.header  # unchanged since: the same read
