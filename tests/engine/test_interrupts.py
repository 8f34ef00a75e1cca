"""Ctrl-C while llama.cpp works (a model load, a quantization) ends the command with one line and exit status
130, in a real process on SmolLM2: the signal used to land in llama.cpp's log callback, where its
KeyboardInterrupt could not cross C ("Exception ignored") and the work went on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from edgepilot.engine import interrupts

DEADLINE = 60.0  # did not hang: a load of SmolLM2 takes well under a second


def _ctrl_c_as_in_a_terminal() -> None:
    """In the child before exec: SIGINT at its default, as a command typed in a terminal has it. A job started
    in the background of a non-interactive shell (as a CI runner may start the tests) ignores SIGINT, and an
    ignored SIGINT is inherited across exec: Python would then never raise KeyboardInterrupt at all."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(argv: list[str], stdin: int, stdout: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, preexec_fn=_ctrl_c_as_in_a_terminal
    )


@pytest.fixture(autouse=True)
def python_ctrl_c():
    """This process's own Ctrl-C as Python sets it up in a terminal (see above)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def _interrupt_until_exit(proc: subprocess.Popen[bytes], started: threading.Event) -> None:
    """Once `started` is set, Ctrl-C; again every 5 s while the command runs (one at a time: a second
    signal while the first is being handled would test the interpreter's shutdown, not the command)."""
    assert started.wait(DEADLINE), "the command never got going"
    first = time.monotonic()
    while proc.poll() is None:
        assert time.monotonic() - first < DEADLINE, "still running after Ctrl-C"
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            continue


def _read_stderr(proc: subprocess.Popen[bytes], started: threading.Event, marker: bytes, out: list[bytes]):
    for line in proc.stderr:
        out.append(line)
        if marker in line:
            started.set()


def _check_ended_by_ctrl_c(proc: subprocess.Popen[bytes], err: str) -> None:
    assert proc.returncode == 130, err[-3000:]
    assert "Exception ignored" not in err, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert err.rstrip().endswith("edgepilot: error: interrupted"), err[-3000:]
    assert err.count("interrupted") == 1


@pytest.mark.parametrize("mmap", [True, False])
def test_ctrl_c_during_chats_model_load_ends_it(smollm_path, mmap):
    # --verbose echoes llama.cpp's log from its callback: the time of the load is spent in it
    argv = [sys.executable, "-m", "edgepilot", "chat", str(smollm_path), "--verbose", "--ctx", "512"]
    argv += [] if mmap else ["--no-mmap"]
    proc = _start(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    started, lines = threading.Event(), []
    reader = threading.Thread(target=_read_stderr, args=(proc, started, b"llama_model_loader", lines))
    reader.start()
    try:
        _interrupt_until_exit(proc, started)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(10)
        proc.stdin.close()
    _check_ended_by_ctrl_c(proc, b"".join(lines).decode(errors="replace"))


def test_ctrl_c_during_quantize_leaves_no_output(smollm_path, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    argv = [
        sys.executable,
        "-m",
        "edgepilot",
        "quantize",
        str(smollm_path),
        "--to",
        "Q8_0",
        "--out",
        str(out),
    ]
    proc = _start(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    started, lines = threading.Event(), []
    reader = threading.Thread(target=_read_stderr, args=(proc, started, b"\0never", lines))
    reader.start()
    try:
        deadline = time.monotonic() + DEADLINE
        while not any(out.iterdir()):  # llama.cpp has started writing: the C call is running
            assert proc.poll() is None, b"".join(lines).decode(errors="replace")
            assert time.monotonic() < deadline, "quantize never started writing"
            time.sleep(0.005)
        started.set()
        _interrupt_until_exit(proc, started)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(10)
    _check_ended_by_ctrl_c(proc, b"".join(lines).decode(errors="replace"))
    assert not list(out.iterdir())


def test_ctrl_c_in_a_piped_chat_waiting_for_input_ends_it(smollm_path):
    argv = [sys.executable, "-m", "edgepilot", "chat", str(smollm_path), "--ctx", "512", "-n", "4"]
    proc = _start(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    proc.stdin.write(b"hi\n")
    proc.stdin.flush()
    started, lines = threading.Event(), []
    reader = threading.Thread(target=_read_stderr, args=(proc, started, b"[prompt ", lines))
    reader.start()
    try:
        _interrupt_until_exit(proc, started)  # after the first answer, waiting for the next line
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(10)
        proc.stdin.close()
        proc.stdout.close()
    _check_ended_by_ctrl_c(proc, b"".join(lines).decode(errors="replace"))


def test_a_callback_never_raises_and_the_interrupt_comes_after_the_call():
    def boom(*_args):
        raise KeyboardInterrupt

    guarded = interrupts.guard_callback(boom, False)
    with pytest.raises(KeyboardInterrupt), interrupts.deferred():
        assert guarded(0.5, None) is False  # as llama.cpp sees it: a normal return
        assert interrupts.pending()
    assert not interrupts.pending()


def test_an_error_of_an_interrupted_call_becomes_the_interrupt():
    with pytest.raises(KeyboardInterrupt), interrupts.deferred():
        os.kill(os.getpid(), signal.SIGINT)  # recorded by the handler, not raised
        time.sleep(0.01)
        raise RuntimeError("llama.cpp: load cancelled")
    with interrupts.deferred():
        pass  # nothing pending: no interrupt


def test_an_ignored_sigint_or_a_callers_handler_is_left_alone():
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts.deferred():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
        seen = []
        signal.signal(signal.SIGINT, lambda *_: seen.append(1))
        with interrupts.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
        assert seen == [1]
    finally:
        signal.signal(signal.SIGINT, old)


COUNTING = "1, 2, 3, 4, 5,"  # raw and greedy, SmolLM2 goes on counting: still generating when Ctrl-C comes


def _engine_argv(engine: str) -> list[str]:
    if engine == "tools":
        from nativekit import native_tool

        native_tool("llama-server")
    return ["--engine", engine]


@pytest.mark.parametrize("engine", ["inprocess", "tools"])
def test_ctrl_c_during_run_ends_the_line_and_keeps_the_summary(smollm_path, engine):
    """Before: `…11, 12,^Cedgepilot: error: interrupted` glued to the text, and no summary. Now the line ends,
    "(stopped)" follows, then the summary of what was generated; the exit status still says Ctrl-C (130)."""
    argv = [sys.executable, "-m", "edgepilot", "run", str(smollm_path), "--raw", "-p", COUNTING]
    argv += ["-n", "3000", "--ctx", "4096", "--temp", "0", *_engine_argv(engine)]
    proc = _start(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    started, out, err = threading.Event(), [], []

    def read_stdout():
        while chunk := proc.stdout.read1(4096):
            out.append(chunk)
            started.set()  # the first generated text is out: the generation runs

    readers = [
        threading.Thread(target=read_stdout),
        threading.Thread(target=_read_stderr, args=(proc, threading.Event(), b"\0never", err)),
    ]
    for reader in readers:
        reader.start()
    try:
        assert started.wait(DEADLINE), b"".join(err).decode(errors="replace")
        proc.send_signal(signal.SIGINT)
        proc.wait(DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for reader in readers:
            reader.join(10)
    stdout, stderr = b"".join(out).decode(), b"".join(err).decode(errors="replace")
    assert proc.returncode == 130, stderr
    assert "interrupted" not in stderr and "Traceback" not in stderr, stderr
    assert stderr.rstrip().endswith("(stopped)"), stderr
    text, _, summary = stdout.partition("\n")  # the generated text ends its line where Ctrl-C stopped it
    assert " 6, 7, 8, 9,".startswith(text[:12]) and summary.startswith("first token"), stdout
    n_gen = int(summary.split("generation ")[1].split(" tok")[0])
    assert 0 < n_gen < 3000 and "peak memory" in summary, stdout
