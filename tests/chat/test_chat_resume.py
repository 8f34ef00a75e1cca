"""A killed chat comes back whole (issue 41, part 2): the chat keeps its session in the data folder after
every turn; SIGKILLed in the middle of its 6th answer, `chat --resume` has turns 1-5, shows the 6th question
as unanswered, and (the KV cache restored: in-process llama.cpp's sequence state, on llama-server its slot
file) its first turn processes only its new tokens. Killed at random instants, a resume never meets a damaged
session and never loses a turn whose status line was shown.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

QUESTIONS = ["What is a battery?", "What is RAM?", "Name a planet.", "What is rain?", "What is a cat?"]
SIXTH = "Tell me a long story about a river and a boat."
STATUS = "[prompt "  # the status line a turn ends with, once it is kept


def _env(data: Path) -> dict[str, str]:
    return {**os.environ, "EDGEPILOT_DATA_DIR": str(data)}


class Chat:
    """`edgepilot chat` fed line by line, its stderr read as it comes."""

    def __init__(self, model: Path, data: Path, *args: str) -> None:
        argv = [sys.executable, "-m", "edgepilot", "chat", str(model), "--temp", "0", "--ctx", "1024", *args]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(data),
            text=True, bufsize=1,
        )  # fmt: skip
        self.err: list[str] = []
        self.out: list[str] = []  # chunks as they come: an answer streams without a newline until its end
        err = self.proc.stderr
        err_reader = threading.Thread(target=lambda: self.err.extend(iter(err.readline, "")))  # type: ignore[union-attr]
        out_fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        chunks = iter(lambda: os.read(out_fd, 4096), b"")
        out_reader = threading.Thread(target=lambda: self.out.extend(chunks))
        for reader in (err_reader, out_reader):
            reader.daemon = True
            reader.start()

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def kept_turns(self) -> int:
        return sum(line.startswith(STATUS) for line in list(self.err))

    def wait_for(self, test, timeout: float = 300) -> None:
        end = time.monotonic() + timeout
        while not test():
            assert self.proc.poll() is None, "".join(self.err)[-3000:]
            assert time.monotonic() < end, "".join(self.err)[-3000:]
            time.sleep(0.02)

    def kill(self) -> list[psutil.Process]:
        """SIGKILL, as the low-memory killer sends it; the programs it had started (llama-server)."""
        children = psutil.Process(self.proc.pid).children(recursive=True)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        return children


def _resume(model: Path, data: Path, engine: str, *lines: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "edgepilot", "chat", str(model), "--ctx", "1024", "--temp", "0", "-n", "8",
         "--resume", "--json", "--engine", engine],
        input="".join(f"{line}\n" for line in lines), capture_output=True, text=True, timeout=600,
        env=_env(data),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("engine", ["inprocess", "tools"])
def test_a_chat_killed_in_its_sixth_answer_resumes_with_five_turns(smollm_path, tmp_path, engine):
    chat = Chat(smollm_path, tmp_path, "-n", "40", "--engine", engine)
    for i, question in enumerate(QUESTIONS, 1):
        chat.send(question)
        chat.wait_for(lambda i=i: chat.kept_turns() == i)
    typed = sum(map(len, chat.out))
    chat.send(SIXTH)
    chat.wait_for(lambda: sum(map(len, chat.out)) > typed)  # the sixth answer is being written
    assert chat.kept_turns() == 5
    children = chat.kill()
    # nothing left running in the background holding the model's memory: llama-server goes with the chat
    assert [c.name() for c in children] == (["llama-server"] if engine == "tools" else []), children
    _gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, alive

    result = _resume(smollm_path, tmp_path, engine, "Thanks. And what is the sun?")
    resumed = result["resumed"]
    assert resumed["messages"] == 2 * len(QUESTIONS), resumed
    assert resumed["unanswered"] == SIXTH
    assert result["session_file"] == resumed["path"]
    (turn,) = result["turns"]
    # the cache came back (llama-server: its slot file, carried in the session): only the new message is
    # processed
    assert resumed["cached_tokens"] > 100, resumed
    assert turn["n_reused"] >= resumed["cached_tokens"] - 2, (resumed, turn)
    assert turn["n_prompt_new"] < 40, turn


def test_killed_at_random_instants_a_resume_never_meets_damage_or_loses_a_kept_turn(smollm_path, tmp_path):
    rng = random.Random(41)
    args = ("-n", "4", "--ctx", "4096")
    chat = Chat(smollm_path, tmp_path, *args)  # two turns, the second timed: a turn here and now
    chat.send("Name a colour.")
    chat.wait_for(lambda: chat.kept_turns() == 1)
    t0 = time.monotonic()
    chat.send("Name another colour.")
    chat.wait_for(lambda: chat.kept_turns() == 2)
    turn = time.monotonic() - t0
    chat.kill()
    expected = 4  # messages that must come back: every turn whose status line was shown before a kill
    killed_after = []
    for i in range(50):
        chat = Chat(smollm_path, tmp_path, *args, "--resume")
        err = chat.err
        chat.wait_for(lambda err=err: any(line.startswith("resumed ") for line in list(err)))
        line = next(line for line in err if line.startswith("resumed "))
        n = int(re.match(r"resumed (\d+) message", line).group(1))  # type: ignore[union-attr]
        assert n >= expected, (i, line, expected)  # a damaged file would be one line and exit 2 instead
        expected = n
        for q in range(3):
            chat.send(f"Round {i} question {q}: name a colour.")
        time.sleep(rng.uniform(0.0, 3.5 * turn))  # during an answer, a save, or between them
        seen = chat.kept_turns()
        chat.kill()
        expected += 2 * seen
        killed_after.append(seen)
    # the kills fell at many places: in a first answer (or its save), and after turns were kept
    assert {0, 1} <= set(killed_after), killed_after


def test_kept_chats_are_listed_and_forgotten_and_no_save_keeps_none(smollm_path, gemma_path, tmp_path):
    env = _env(tmp_path)

    def edgepilot(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "edgepilot", *args], input=stdin, capture_output=True,
                              text=True, timeout=300, env=env)  # fmt: skip

    chat = ["chat", str(smollm_path), "--ctx", "256", "-n", "2", "--temp", "0"]
    assert edgepilot(*chat, "--no-save", stdin="Hi.\n").returncode == 0
    assert json.loads(edgepilot("chat", "--sessions", "--json").stdout)["sessions"] == []
    assert edgepilot(*chat, stdin="Hi.\n").returncode == 0
    (kept,) = json.loads(edgepilot("chat", "--sessions", "--json").stdout)["sessions"]
    assert kept["model_file"] == smollm_path.name and Path(kept["path"]).stat().st_size == kept["size"]
    assert json.loads(edgepilot("chat", str(gemma_path), "--sessions", "--json").stdout)["sessions"] == []
    missing = edgepilot("chat", str(gemma_path), "--resume")
    assert missing.returncode == 2 and "no saved chat with" in missing.stderr, missing.stderr
    assert "Traceback" not in missing.stderr
    gone = json.loads(edgepilot("chat", "--forget-sessions", "--json").stdout)
    assert gone["forgotten"] == 1 and not Path(kept["path"]).exists()
