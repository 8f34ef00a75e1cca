"""A Hugging Face hub-compatible HTTP server on 127.0.0.1 for the pull tests (standard library only).

It answers what the real hub answers for the calls edgepilot makes: `GET /api/models/{repo}/tree/{rev}`
(paginated with a Link header, `lfs.oid` = sha256), `GET /{repo}/resolve/{rev}/{file}` redirecting to a CDN
path (as huggingface.co redirects LFS files to its CDN) that honours Range; 401/404 with X-Error-Code.
Knobs for failures: cut a transfer after N bytes, flip one byte, and a log of the requests seen.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = "edge-test/small-models-GGUF"
SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA = "gemma-3-270m-Q4_K_M.gguf"
BIG = "DeepSeek-R1-Distill-Qwen-7B-Q4_K_M.gguf"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
PAGE = 2  # files per listing page: the tests see pagination


@dataclass
class HubFile:
    path: Path
    sha256: str | None = None  # computed on first use unless given
    listed_size: int | None = None  # what the listing claims, when it should lie about the size

    def digest(self) -> str:
        if self.sha256 is None:
            h = hashlib.sha256()
            with self.path.open("rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
            self.sha256 = h.hexdigest()
        return self.sha256


@dataclass
class Hub:
    repos: dict[str, dict[str, HubFile]]
    cut_after: int | None = None  # the next file transfer stops after this many body bytes (then resets)
    corrupt_at: int | None = None  # this byte offset of every served file is flipped
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range header)
    authorization: list[str | None] = field(default_factory=list)  # the Authorization header of each request
    gate: threading.Barrier | None = None  # file transfers wait here until this many are under way together
    hold: float = 0.0  # seconds each file transfer waits before its body (concurrent pulls overlap)


class Handler(BaseHTTPRequestHandler):
    hub: Hub

    def log_message(self, *args: object) -> None:
        pass

    def _error(self, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        self.hub.requests.append((path, self.headers.get("Range")))
        self.hub.authorization.append(self.headers.get("Authorization"))
        if m := re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)", path):
            return self._tree(m.group(1), urllib.parse.parse_qs(url.query))
        if m := re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path):
            return self._resolve(m.group(1), m.group(3))
        if m := re.fullmatch(r"/cdn/([^/]+/[^/]+)/(.+)", path):
            return self._serve(m.group(1), m.group(2))
        return self._error(404, "NotFound", "no such route")

    def _tree(self, repo: str, query: dict[str, list[str]]) -> None:
        files = self.hub.repos.get(repo)
        if files is None:
            return self._error(401, "RepoNotFound", "Repository not found")
        items = [
            {
                "type": "file",
                "oid": hashlib.sha1(name.encode()).hexdigest(),
                "size": f.listed_size or f.path.stat().st_size,
                "path": name,
                "lfs": {
                    "oid": f.digest(),
                    "size": f.listed_size or f.path.stat().st_size,
                    "pointerSize": 134,
                },
            }
            for name, f in sorted(files.items())
        ]
        items.append({"type": "file", "oid": "0" * 40, "size": 12, "path": "README.md"})
        start = int(query.get("cursor", ["0"])[0])
        page = items[start : start + PAGE]
        body = json.dumps(page).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if start + PAGE < len(items):
            self.send_header(
                "Link", f'<{self.path.split("?")[0]}?recursive=true&cursor={start + PAGE}>; rel="next"'
            )
        self.end_headers()
        self.wfile.write(body)

    def _resolve(self, repo: str, name: str) -> None:
        files = self.hub.repos.get(repo)
        if files is None:
            return self._error(401, "RepoNotFound", "Repository not found")
        if name not in files:
            return self._error(404, "EntryNotFound", f"{name} does not exist on main")
        self.send_response(302)
        self.send_header("Location", f"/cdn/{repo}/{urllib.parse.quote(name)}?signature=x")
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("X-Linked-Size", str(files[name].path.stat().st_size))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _serve(self, repo: str, name: str) -> None:
        f = self.hub.repos[repo][name]
        size = f.path.stat().st_size
        start, end = 0, size - 1
        rng = self.headers.get("Range")
        if rng and (m := re.fullmatch(r"bytes=(\d+)-(\d*)", rng)):
            start, end = int(m.group(1)), min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        cut, self.hub.cut_after = self.hub.cut_after, None
        if self.hub.gate is not None:
            self.hub.gate.wait(timeout=60)
        time.sleep(self.hub.hold)
        sent = 0
        with f.path.open("rb") as src:
            src.seek(start)
            pos = start
            while pos <= end:
                chunk = bytearray(src.read(min(1 << 20, end + 1 - pos)))
                if self.hub.corrupt_at is not None and pos <= self.hub.corrupt_at < pos + len(chunk):
                    chunk[self.hub.corrupt_at - pos] ^= 0xFF
                if cut is not None and sent + len(chunk) > cut:
                    self.wfile.write(chunk[: cut - sent])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(chunk)
                sent += len(chunk)
                pos += len(chunk)


class HubServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hangs up mid-body (pull refusing a file longer than listed) is expected here; the
        default handler prints its traceback to sys.stderr, which a test's CLI runner may be capturing."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


def start(hub: Hub) -> tuple[ThreadingHTTPServer, str]:
    handler = type("BoundHandler", (Handler,), {"hub": hub})
    server = HubServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
