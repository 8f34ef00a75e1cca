"""`edgepilot chat` in a pseudo-terminal, as a person uses it: 4 turns on SmolLM2 where each turn processes
only its new tokens (the earlier turns stay in its context), Ctrl-C stopping an answer, /save; then a fresh
process (stdin not a terminal) that loads the saved session, goes on without re-processing it and answers as
the first process did. Which words SmolLM2 says depends on this machine's CPU kernels, so no test asks for
any: the counts and the two processes agreeing are ours."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time

STATUS = re.compile(r"\[prompt (\d+) new \+ (\d+) reused · ttft \d+ ms · (\d+) tok")
SYSTEM = "You are a helpful assistant."
TIMEOUT = 120.0  # one turn on a busy 2-core machine


def chat_args(model, *extra: str) -> list[str]:
    return [sys.executable, "-m", "edgepilot", "chat", str(model), "--temp", "0", "-n", "24", "--ctx", "1024",
            "--system", SYSTEM, *extra]  # fmt: skip


class Pty:
    def __init__(self, argv: list[str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the pty is its controlling terminal, so ^C is a real SIGINT
            os.execvpe(argv[0], argv, os.environ)
        self.buf = ""

    def expect(self, pattern: str | re.Pattern[str], timeout: float = TIMEOUT) -> re.Match[str]:
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.buf)
            if m:
                self.buf = self.buf[m.end() :]
                return m
            left = deadline - time.monotonic()
            assert left > 0, f"no {rx.pattern!r} within {timeout} s; got: {self.buf[-2000:]!r}"
            ready, _, _ = select.select([self.fd], [], [], min(left, 1.0))
            if ready:
                try:
                    data = os.read(self.fd, 4096)
                except OSError:  # EIO: the child closed the terminal
                    data = b""
                assert data, f"chat ended while waiting for {rx.pattern!r}; got: {self.buf[-2000:]!r}"
                self.buf += data.decode("utf-8", errors="replace").replace("\r\n", "\n")

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                self.pid = 0
                return os.waitstatus_to_exitcode(status)
            try:
                os.read(self.fd, 4096)
            except OSError:
                time.sleep(0.1)
        raise AssertionError("chat did not exit")

    def kill(self) -> None:
        """End the child if it is still ours (never a reaped pid)."""
        if self.pid:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
            os.close(self.fd)
            self.pid = 0


def test_chat_in_a_terminal_reuses_the_cache_remembers_and_resumes(smollm_path, tmp_path, monkeypatch):
    # a folder of its own: a tuned profile another test kept would add a line to the banner (and settings)
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(tmp_path / "data"))
    saved = tmp_path / "talk.session"
    term = Pty(chat_args(smollm_path))
    try:
        term.expect(r"chatting with .*\n> ")
        questions = [
            "My name is Zorblat and I live in Paris.",
            "What colour is the sky on a clear day?",
            "What is my name?",
            "Where do I live?",
        ]
        seen: list[tuple[int, int, int]] = []
        answers = []
        for q in questions:
            term.send(q + "\r")
            m = term.expect(STATUS)
            answers.append(m.string[: m.start()])
            seen.append((int(m[1]), int(m[2]), int(m[3])))
            term.expect(r"> ")
        for (new0, reused0, gen0), (new, reused, _) in zip(seen, seen[1:], strict=False):
            # all of the previous prompt comes from the cache (and nearly all of its answer) ...
            assert reused >= new0 + reused0, seen
            assert reused >= new0 + reused0 + gen0 - 4, seen
            # ... and only the new message (wrapped in the template) is processed
            assert 0 < new <= 32, seen
        assert seen[0][1] == 0
        assert all(0 < gen <= 24 for _, _, gen in seen), seen
        assert all(a.split(q)[-1].strip() for a, q in zip(answers, questions, strict=True)), answers

        term.send("/stats\r")
        stats = term.expect(r"prompt tokens processed (\d+), reused (\d+)")
        assert int(stats[1]) == sum(s[0] for s in seen) and int(stats[2]) == sum(s[1] for s in seen)
        term.expect(r"> ")

        term.send("Write a very long story about a dragon who learns to cook.\r")
        term.expect(r"dragon who learns to cook\.\n\S")  # the answer started streaming
        term.send("\x03")
        term.expect(r"\(stopped\)")
        stopped = term.expect(STATUS)
        assert int(stopped[3]) < 24
        term.expect(r"> ")

        term.send(f"/save {saved}\r")
        term.expect(r"saved 11 messages")
        term.expect(r"> ")
        term.send("What is my name?\r")  # what the saved session answers next, for the resumed one below
        after_save = term.expect(STATUS)
        expected = after_save.string[: after_save.start()].split("What is my name?\n")[-1].strip()
        term.expect(r"> ")
        term.send("\x04")  # Ctrl-D
        assert term.wait() == 0
    finally:
        term.kill()

    # A new process resumes the saved session: nothing before the new message is processed again. Bad
    # files first: one line each, the session goes on.
    garbage = tmp_path / "garbage.session"
    garbage.write_bytes(os.urandom(4096))
    fifo = tmp_path / "fifo.session"
    os.mkfifo(fifo)
    script = f"/load {garbage}\n/load {fifo}\n/load {tmp_path / 'missing'}\n/load {saved}\nWhat is my name?\n"
    done = subprocess.run(
        chat_args(smollm_path, "--json"), input=script, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 3, done.stderr
    assert "not an edgepilot session file" in errors[0] and "FIFO" in errors[1]
    assert "Traceback" not in done.stderr
    assert "loaded 11 messages" in done.stderr
    result = json.loads(done.stdout)
    (turn,) = result["turns"]
    assert turn["n_reused"] > 150 and turn["n_prompt_new"] <= 32, turn
    assert expected and turn["text"].strip()[:60] == expected[:60]  # the same cache: the same answer
