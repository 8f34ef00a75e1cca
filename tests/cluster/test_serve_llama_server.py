"""`serve --engine llama-server`: llama.cpp's server behind edgepilot's front, watchdog and doctor."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
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
        assert cmdline[cmdline.index(b"-c") + 1] == b"512"
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
