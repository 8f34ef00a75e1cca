"""Start a real `edgepilot serve` (a subprocess on 127.0.0.1, a free port) and talk to it over HTTP, or
over raw sockets as a slow or hostile client would."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

START_TIMEOUT = 180.0  # python + llama.cpp load on a busy 2-core machine
KEY = "test-key-5d1b0c"
SHARED_MAX_TOKENS = 48  # the shared server's --max-tokens and --max-queue (conftest.py)
SHARED_MAX_QUEUE = 2


@dataclass
class Served:
    proc: subprocess.Popen[str]
    info: dict[str, Any]
    stderr_path: Path
    key: str | None

    @property
    def port(self) -> int:
        return int(self.info["port"])

    @property
    def base_url(self) -> str:
        return self.info["base_url"]

    def client(self, **kwargs: Any):
        import openai

        kwargs.setdefault("max_retries", 0)
        kwargs.setdefault("timeout", 120)
        return openai.OpenAI(base_url=self.base_url, api_key=self.key or "none", **kwargs)

    def request(
        self,
        method: str,
        path: str,
        body: bytes | dict | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 120,
    ) -> tuple[int, dict[str, str], bytes]:
        """A raw HTTP request (for what the openai client will not send: wrong types, big bodies, hosts)."""
        hdrs = dict(headers or {})
        if isinstance(body, dict):
            body = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    def chat(self, body: dict[str, Any], timeout: float = 300) -> tuple[int, dict[str, Any], float]:
        """(status, JSON reply, seconds) of one keyed chat completion."""
        t0 = time.monotonic()
        code, _, raw = self.request("POST", "/v1/chat/completions", body, self.auth(), timeout=timeout)
        return code, json.loads(raw), time.monotonic() - t0

    def status(self) -> dict[str, Any]:
        code, _, body = self.request("GET", "/status.json", headers=self.auth(), timeout=10)
        assert code == 200, body
        return json.loads(body)

    def wait_ready(self, timeout: float = 90) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                s = self.status()
                if s["phase"] == "ready":
                    return s
            time.sleep(0.3)
        raise AssertionError(f"not ready within {timeout} s: {self.stderr()}")

    def ready_again(self, old_pid: int, timeout: float = 120) -> dict[str, Any]:
        """The status once a new worker (not `old_pid`) is ready: after the watchdog restarted it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.status()
            if status["phase"] == "ready" and status["worker"]["pid"] != old_pid:
                return status
            time.sleep(0.3)
        raise AssertionError(self.stderr())

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGINT, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


def edgepilot(*args: str) -> list[str]:
    return [sys.executable, "-m", "edgepilot", *args]


def start_server(
    model: Path | None,
    *args: str,
    tmp: Path,
    key: str | None = KEY,
    env: dict[str, str] | None = None,
    wrap: Callable[[list[str]], list[str]] | None = None,
) -> Served:
    """model None: the bundled model (no MODEL argument). wrap: what runs the command (e.g. in a cgroup)."""
    cmd = edgepilot("serve", *([str(model)] if model is not None else []), "--port", "0", "--json", *args)
    if key is not None:
        key_file = tmp / "api-key"
        key_file.write_text(key + "\n")
        key_file.chmod(0o600)
        cmd += ["--api-key-file", str(key_file)]
    stderr_path = tmp / "serve-stderr.txt"
    with stderr_path.open("w") as err:
        proc = subprocess.Popen(
            wrap(cmd) if wrap else cmd,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**os.environ, **(env or {})},
        )
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(START_TIMEOUT)
    if not line or not line[0].strip():
        proc.kill()
        proc.wait(10)
        raise AssertionError(f"edgepilot serve did not come up: {stderr_path.read_text(errors='replace')}")
    return Served(proc=proc, info=json.loads(line[0]), stderr_path=stderr_path, key=key)


def read_to_close(s: socket.socket, timeout: float) -> tuple[bytes, bool]:
    """What the server sends until it closes the connection, and whether it ended with a reset."""
    s.settimeout(timeout)
    chunks = []
    try:
        while chunk := s.recv(65536):
            chunks.append(chunk)
    except ConnectionResetError:
        return b"".join(chunks), True
    except TimeoutError:
        raise AssertionError(f"the connection was still open after {timeout} s") from None
    return b"".join(chunks), False


def parse_reply(data: bytes) -> tuple[int, dict[str, str], dict]:
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return int(lines[0].split()[1]), headers, json.loads(body)


def trickle(s: socket.socket, first: bytes, byte: bytes, every: float, limit: float) -> tuple[bytes, float]:
    """Send `first`, then `byte` every `every` s until the server answers or closes; what came back and
    how long after `first` the connection was cut."""
    t0 = time.monotonic()
    s.sendall(first)
    while time.monotonic() - t0 < limit:
        readable, _, _ = select.select([s], [], [], every)
        if readable:
            data, _ = read_to_close(s, 5)
            return data, time.monotonic() - t0
        try:
            s.sendall(byte)
        except (BrokenPipeError, ConnectionResetError):
            return b"", time.monotonic() - t0
    raise AssertionError(f"still open after trickling for {limit} s")


def write_device(root: Path, available_mib: int = 3000, psi: float = 0.0) -> None:
    """A minimal device tree for --watch-root: what the memory gate reads."""
    (root / "proc" / "pressure").mkdir(parents=True, exist_ok=True)
    meminfo = (
        "MemTotal:        4000000 kB\nMemFree:         1000000 kB\n"
        f"MemAvailable:    {available_mib * 1024} kB\n"
    )
    tmp = root / "proc" / "meminfo.tmp"
    tmp.write_text(meminfo)
    tmp.replace(root / "proc" / "meminfo")
    psi_text = (
        f"some avg10={psi:.2f} avg60=0.00 avg300=0.00 total=0\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    tmp = root / "proc" / "pressure" / "memory.tmp"
    tmp.write_text(psi_text)
    tmp.replace(root / "proc" / "pressure" / "memory")
