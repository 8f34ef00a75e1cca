"""`serve --engine llama-server`: llama.cpp's server behind edgepilot's front, watchdog and doctor."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from netkit import free_port, wait_listening
from servekit import start_server


def test_llama_server_answers_behind_the_front_and_a_killed_child_is_diagnosed(
    tmp_path, smollm_path, llama_server_tool
):
    import openai

    served = start_server(smollm_path, "--engine", "llama-server", "--ctx", "512", tmp=tmp_path)
    try:
        status = served.wait_ready()
        pid = status["worker"]["pid"]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert cmdline[0].endswith(b"llama-server"), cmdline
        sock = cmdline[cmdline.index(b"--host") + 1].decode()
        assert sock.endswith(".sock") and os.path.dirname(sock) != ""  # a private socket, not a TCP port
        # the context, and the short lane's second slot beside it (serve/short_lane.py; here min(1024, ctx))
        assert cmdline[cmdline.index(b"-c") + 1] == b"1024"
        assert cmdline[cmdline.index(b"--kv-unified-per-slot") + 1] == b"512"
        # the front's rules hold: no key, no answer
        code, _, _ = served.request(
            "POST", "/v1/chat/completions", {"messages": []}, {"Authorization": "Bearer wrong"}
        )
        assert code == 401
        reply = served.client().chat.completions.create(
            model="x", messages=[{"role": "user", "content": "Say hello"}], max_tokens=8, temperature=0
        )
        assert reply.choices[0].message.content.strip()
        assert reply.usage.completion_tokens > 0

        # a SIGKILLed llama-server: the next request gets a clear 503, the doctor does not blame memory
        os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(openai.APIStatusError) as err:
            served.client(timeout=30).chat.completions.create(
                model="x", messages=[{"role": "user", "content": "Hi"}], max_tokens=4
            )
        assert err.value.status_code == 503 and time.monotonic() - t0 < 30
        deadline = time.monotonic() + 30
        while not served.status()["deaths"] and time.monotonic() < deadline:
            time.sleep(0.2)
        after = served.wait_ready(timeout=120)
        death = after["deaths"][-1]
        assert death["pid"] == pid and death["signal_name"] == "SIGKILL"
        assert death["cause"] != "killed-by-system", death  # no memory evidence: not blamed on memory
        assert after["worker"]["pid"] != pid
    finally:
        served.stop()
    assert not os.path.exists(f"/proc/{pid}")


def _serve_rpc(model: Path, rpc: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "edgepilot",
        "serve",
        str(model),
        "--port",
        "0",
        "--rpc",
        rpc,
        "--ctx",
        "512",
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def test_serve_rpc_to_a_helper_that_is_not_there_stops_with_the_diagnosis(smollm_path, llama_server_tool):
    out = _serve_rpc(smollm_path, f"127.0.0.1:{free_port()}")
    assert out.returncode == 2, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert "could not be reached" in last and "rpc-server" in last, out.stderr
    assert "Traceback" not in out.stderr


def test_serve_rpc_to_a_helper_of_another_protocol_version_says_so(smollm_path, llama_server_tool):
    port = free_port()
    helper = subprocess.Popen([sys.executable, str(Path(__file__).with_name("old_helper.py")), str(port)])
    try:
        wait_listening(port, helper)
        out = _serve_rpc(smollm_path, f"127.0.0.1:{port}")
    finally:
        helper.kill()
        helper.wait(10)
    assert out.returncode == 2, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert "protocol version" in last and "edgepilot build" in last, out.stderr


def test_serve_rpc_bad_input_is_one_line_exit_2(smollm_path):
    for flags in (
        ["--rpc", "nohost"],
        ["--rpc", "127.0.0.1:1", "--tensor-split", "1,2"],
        ["--tensor-split", "1"],
        ["--override-tensor", "token_embd\\.weight=CPU"],  # without --rpc
        ["--rpc", "127.0.0.1:1", "--override-tensor", "token_embd"],
        ["--rpc", "127.0.0.1:1", "--override-tensor", "token_embd(=CPU"],
        ["--rpc", "127.0.0.1:1", "--override-tensor", "x=CPU,"],
    ):
        cmd = [sys.executable, "-m", "edgepilot", "serve", str(smollm_path), "--port", "0", *flags]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, (flags, out.stderr)
