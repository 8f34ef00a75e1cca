"""A Hugging Face hub-compatible HTTP server on 127.0.0.1 for the pull tests (standard library only).

It answers what the real hub answers for the calls edgepilot makes: `GET /api/models/{repo}/tree/{rev}`
(paginated with a Link header; `oid` = the git blob id, of the LFS pointer for an LFS file; `lfs.oid` =
sha256), `GET /{repo}/resolve/{rev}/{file}` redirecting to a CDN path (as huggingface.co redirects LFS files
to its CDN) that honours Range, or serving a small file kept in git itself; 401/404 with X-Error-Code. Routes
match the quoted path, so a revision is one segment (refs/pr/1 as refs%2Fpr%2F1); one the hub lacks is
RevisionNotFound.
Knobs for failures: cut a transfer after N bytes, flip one byte, trickle an answer a byte at a time, redirect
or paginate to another server, replace a listing page, and a log of the requests seen. `start(hub, tls=...)`
serves https with a given certificate, and plain http on the same port (told apart by the first byte), so an
https hub can redirect to http on its own host and port.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import ssl
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = "edge-test/small-models-GGUF"
SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA = "gemma-3-270m-Q4_K_M.gguf"
BIG = "DeepSeek-R1-Distill-Qwen-7B-Q4_K_M.gguf"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
PAGE = 2  # files per listing page: the tests see pagination
README = b"# test repo\n"  # every repository has it, a small file kept in git


def git_blob_id(data: bytes) -> str:
    """git's object id for a blob of these bytes (`git hash-object`)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The pointer file git keeps for an LFS file."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


@dataclass
class HubFile:
    path: Path
    sha256: str | None = None  # computed on first use unless given
    listed_size: int | None = None  # what the listing claims, when it should lie about the size
    lfs: bool = True  # False: a small file kept in git (no `lfs` in the listing, served without a redirect)
    git_oid: str | None = None  # the listing's `oid`, when it should lie about it; else computed

    def size(self) -> int:
        return self.listed_size or self.path.stat().st_size

    def blob_id(self) -> str:
        """The listing's `oid`: the git blob id of the file, or of its LFS pointer."""
        if self.git_oid is not None:
            return self.git_oid
        data = lfs_pointer(self.digest(), self.size()) if self.lfs else self.path.read_bytes()
        return git_blob_id(data)

    def entry(self, name: str) -> dict:
        item: dict = {"type": "file", "oid": self.blob_id(), "size": self.size(), "path": name}
        if self.lfs:
            pointer = len(lfs_pointer(self.digest(), self.size()))
            item["lfs"] = {"oid": self.digest(), "size": self.size(), "pointerSize": pointer}
        return item

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
    cut_always: bool = False  # with cut_after: every file transfer stops after that many bytes
    corrupt_at: int | None = None  # this byte offset of every served file is flipped
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range header)
    sent_paths: list[str] = field(default_factory=list)  # each request's path as sent, still quoted
    revisions: tuple[str, ...] = ("main",)  # the branches and tags it has; RevisionNotFound for others
    authorization: list[str | None] = field(default_factory=list)  # the Authorization header of each request
    gate: threading.Barrier | None = None  # file transfers wait here until this many are under way together
    hold: float = 0.0  # seconds each file transfer waits before its body (concurrent pulls overlap)
    pace: float = 0.0  # seconds each file transfer waits after each MiB of its body (a slow network)
    schemes: list[str] = field(default_factory=list)  # "https" or "http", for each request
    page: int = PAGE  # files per listing page
    cdn_base: str = ""  # resolve redirects to this origin (e.g. another server); "" for this one
    next_base: str = ""  # a listing's next page is on this origin; "" for this one
    listing_body: bytes | None = None  # every listing page is these bytes
    listing_status: tuple[int, str] | None = None  # every listing page is an error with this code and reason
    # "listing-head", "listing-body", "redirect-body", "cdn-body": that part comes a byte at a time
    trickle: str | None = None
    cdn_bytes: int = 0  # file bytes sent by the CDN route
    url: str = ""  # where start() serves it


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

    def _trickle(self, data: bytes) -> None:
        """data a byte every 0.25 s, for at most a minute (a client that gives up closes the socket)."""
        for i in range(min(len(data), 240)):
            try:
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
            except OSError:
                break
            time.sleep(0.25)
        self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urllib.parse.urlsplit(self.path)
        path, unquote = urllib.parse.unquote(url.path), urllib.parse.unquote
        self.hub.requests.append((path, self.headers.get("Range")))
        self.hub.sent_paths.append(url.path)
        self.hub.authorization.append(self.headers.get("Authorization"))
        self.hub.schemes.append("https" if isinstance(self.connection, ssl.SSLSocket) else "http")
        # routed as the hub routes them: on the quoted path, so a revision (refs%2Fpr%2F1) is one segment
        tree = re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)", url.path)
        resolve = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", url.path)
        revision = unquote((tree or resolve).group(2)) if tree or resolve else None
        if revision is not None and revision not in self.hub.revisions:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        if tree:
            return self._tree(unquote(tree.group(1)), urllib.parse.parse_qs(url.query))
        if resolve:
            return self._resolve(unquote(resolve.group(1)), unquote(resolve.group(3)))
        if m := re.fullmatch(r"/cdn/([^/]+/[^/]+)/(.+)", path):
            return self._serve(m.group(1), m.group(2))
        return self._error(404, "NotFound", "no such route")

    def _tree(self, repo: str, query: dict[str, list[str]]) -> None:
        files = self.hub.repos.get(repo)
        if files is None:
            return self._error(401, "RepoNotFound", "Repository not found")
        if self.hub.listing_status is not None:
            self.send_response(*self.hub.listing_status)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        items = [f.entry(name) for name, f in sorted(files.items())]
        items.append({"type": "file", "oid": git_blob_id(README), "size": len(README), "path": "README.md"})
        start = int(query.get("cursor", ["0"])[0])
        page = items[start : start + self.hub.page]
        body = json.dumps(page).encode() if self.hub.listing_body is None else self.hub.listing_body
        head = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        if start + self.hub.page < len(items):
            cursor = start + self.hub.page
            link = f"{self.hub.next_base}{self.path.split('?')[0]}?recursive=true&cursor={cursor}"
            head.append(("Link", f'<{link}>; rel="next"'))
        if self.hub.trickle == "listing-head":
            lines = ["HTTP/1.1 200 OK\r\n"] + [f"{k}: {v}\r\n" for k, v in head] + ["\r\n"]
            return self._trickle("".join(lines).encode() + body)
        self.send_response(200)
        for key, value in head:
            self.send_header(key, value)
        self.end_headers()
        if self.hub.trickle == "listing-body":
            return self._trickle(body)
        self.wfile.write(body)

    def _resolve(self, repo: str, name: str) -> None:
        files = self.hub.repos.get(repo)
        if files is None:
            return self._error(401, "RepoNotFound", "Repository not found")
        if name == "README.md" and name not in files:
            return self._send(README)
        if name not in files:
            return self._error(404, "EntryNotFound", f"{name} does not exist on main")
        if not files[name].lfs:  # the hub serves a file kept in git itself
            return self._serve(repo, name, commit=True)
        self.send_response(302)
        self.send_header("Location", f"{self.hub.cdn_base}/cdn/{repo}/{urllib.parse.quote(name)}?signature=x")
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("X-Linked-Size", str(files[name].path.stat().st_size))
        if self.hub.trickle == "redirect-body":
            self.end_headers()
            return self._trickle(b"<html>" + b"x" * 1000)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _send(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _serve(self, repo: str, name: str, commit: bool = False) -> None:
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
        if commit:
            self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if self.hub.trickle == "cdn-body":
            with f.path.open("rb") as src:
                src.seek(start)
                return self._trickle(src.read(1000))
        cut = self.hub.cut_after
        if not self.hub.cut_always:
            self.hub.cut_after = None
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
                self.hub.cdn_bytes += len(chunk)  # counted before the client can have it: no race with a test
                self.wfile.write(chunk)
                sent += len(chunk)
                pos += len(chunk)
                time.sleep(self.hub.pace)


class HubServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hangs up mid-body (pull refusing a file longer than listed) is expected here; the
        default handler prints its traceback to sys.stderr, which a test's CLI runner may be capturing."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class _EitherServer(HubServer):
    """https for a client that opens with a TLS handshake (first byte 0x16), plain http otherwise."""

    context: ssl.SSLContext

    def get_request(self) -> tuple[socket.socket, object]:
        sock, addr = self.socket.accept()
        sock.settimeout(10)
        first = sock.recv(1, socket.MSG_PEEK)
        sock.settimeout(None)
        if first == b"\x16":
            sock = self.context.wrap_socket(sock, server_side=True)
        return sock, addr


def start(hub: Hub, tls: tuple[Path, Path] | None = None) -> tuple[ThreadingHTTPServer, str]:
    """Serve `hub` on 127.0.0.1; with tls=(certificate, key), https (and http on the same port)."""
    handler = type("BoundHandler", (Handler,), {"hub": hub})
    server = (HubServer if tls is None else _EitherServer)(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    if isinstance(server, _EitherServer):
        server.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.context.load_cert_chain(*tls)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hub.url = f"{'http' if tls is None else 'https'}://127.0.0.1:{server.server_address[1]}"
    return server, hub.url


@contextlib.contextmanager
def serving(hub: Hub, monkeypatch, store: Path) -> Iterator[Hub]:
    """`hub` served while the block runs, as the environment of a pull into `store` (no token)."""
    server, url = start(hub)
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("EDGEPILOT_MODELS_DIR", str(store))
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
