"""The bundled Gemma 3 270M behind `edgepilot serve` (no MODEL argument); the memory-pressure gate on a
device tree whose PSI the test raises; and a supervisor killed outright takes its worker with it."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from servekit import Served, start_server, write_device


@pytest.fixture(scope="module")
def gemma_served(gemma_path, tmp_path_factory) -> Served:
    tmp = tmp_path_factory.mktemp("serve-gemma")
    device = tmp / "device"
    write_device(device)
    # gemma_path assembles the bundled model once; the server is started without a MODEL argument
    assert gemma_path.exists()
    server = start_server(
        None, "--ctx", "512", "--watch-root", str(device), "--max-tokens", "32", tmp=tmp, key=None
    )
    server.device = device  # type: ignore[attr-defined]
    yield server
    server.stop(signal.SIGKILL)


def test_bundled_model_answers_the_openai_client(gemma_served):
    assert gemma_served.info["model_name"] == "gemma-3-270m-q4_k_m.gguf"
    assert gemma_served.info["api_key_required"] is False

    def ask():
        return gemma_served.client().chat.completions.create(
            model="gemma",
            messages=[{"role": "user", "content": "What is the capital of France?"}],
            max_tokens=16,
            temperature=0,
        )

    reply = ask()
    assert reply.choices[0].message.content.strip()
    n = reply.usage.completion_tokens
    assert 0 < n <= 16 and reply.choices[0].finish_reason == ("length" if n == 16 else "stop")
    again = ask()  # the words are this machine's CPU kernels' (greedy: the same every time)
    assert again.choices[0].message.content == reply.choices[0].message.content


def _wait_for(predicate, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_memory_pressure_turns_new_requests_away(gemma_served):
    body = {"prompt": "Hello", "max_tokens": 2}
    try:
        write_device(gemma_served.device, psi=35.0)  # type: ignore[attr-defined]
        assert _wait_for(lambda: gemma_served.status()["pressure"]["gated"])
        code, headers, raw = gemma_served.request("POST", "/v1/completions", body)
        assert code == 503 and int(headers["retry-after"]) >= 1
        error = json.loads(raw)["error"]
        assert error["code"] == "memory_pressure" and "PSI" in error["message"]
        assert gemma_served.request("GET", "/health")[0] == 503

        write_device(gemma_served.device, available_mib=40)  # type: ignore[attr-defined]
        time.sleep(1.5)
        assert "low memory" in (gemma_served.status()["pressure"]["reason"] or "")
    finally:
        write_device(gemma_served.device)  # type: ignore[attr-defined]
    assert _wait_for(lambda: not gemma_served.status()["pressure"]["gated"])
    assert gemma_served.request("POST", "/v1/completions", body)[0] == 200
    assert "memory gate closed" in gemma_served.stderr()


def test_killed_supervisor_leaves_no_worker(gemma_served):
    worker = gemma_served.status()["worker"]["pid"]
    gemma_served.proc.send_signal(signal.SIGKILL)
    gemma_served.proc.wait(10)

    def gone() -> bool:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{worker}/status") as f:  # a zombie waiting for init to reap it is gone too
            return "zombie" in f.read()

    assert _wait_for(gone, 10)
