"""The hub client's transport rules: where the token may go, what an endpoint may look like, and how long
and how much any one answer may take.

- The token goes only to the endpoint's own origin (scheme, host, port): the default https hub, or the exact
  http(s) endpoint the user configured. A redirect or a `Link` page elsewhere (another host, or https -> http)
  never carries it. The token itself must be sendable as one header line: visible ASCII only.
- Every request has an overall deadline (connect, redirects, status line, headers and the bounded body),
  enforced before each read of the socket, so a server that trickles a byte at a time cannot hold `pull` past
  it; per-read timeouts alone never fire against such a server. A streamed download renews its deadline each
  time STREAM_PROGRESS bytes arrive (a minimum rate, not a total time).
- Every body is read with a byte cap.
"""

from __future__ import annotations

import functools
import http.client
import io
import ipaddress
import math
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from edgepilot import untrusted
from edgepilot.errors import UserError

READ_TIMEOUT = 30.0  # seconds for one read of the socket, at most
DEADLINE = 60.0  # seconds for one request, start to last byte (EDGEPILOT_HUB_DEADLINE overrides)
DEADLINE_ENV = "EDGEPILOT_HUB_DEADLINE"
STREAM_PROGRESS = 256 << 10  # a download renews its deadline after each 256 KiB received
MAX_TOKEN_BYTES = 4096
MAX_ENDPOINT = 2048
DEFAULT_PORTS = {"http": 80, "https": 443}


class HubError(UserError):
    """The hub answered with an error, or the connection failed: one line for the user."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code = status, code


class HubTimeout(TimeoutError):
    """The request's deadline passed (an OSError: every reader that handles a broken connection sees it)."""


# --- secrets and endpoints ------------------------------------------------------------------------------
def redact(url: str) -> str:
    """`url` with any userinfo (user:password@) replaced by ***@, even when the URL does not parse."""
    if "@" not in url:
        return url
    scheme, sep, rest = url.partition("//")
    if not sep:
        scheme, rest = "", url
    return f"{scheme}{sep}***@{rest.rpartition('@')[2]}"


def shown(url: str) -> str:
    return repr(untrusted.valid_text(redact(url))[:200])


def check_endpoint(raw: str) -> str:
    """The endpoint URL (no trailing /), or one UserError line that never shows a password."""
    what = f"HF_ENDPOINT {shown(raw)}"
    if len(raw) > MAX_ENDPOINT or any(not "\x21" <= ch <= "\x7e" for ch in raw):
        raise UserError(f"{what} is not a URL: give e.g. https://huggingface.co (ASCII, no spaces)")
    try:
        parts = urllib.parse.urlsplit(raw)
        port, host = parts.port, parts.hostname or ""
    except ValueError:  # its text may quote the password (a port that is not a number): not shown
        raise UserError(f"{what} is not a valid URL (the host or port is malformed)") from None
    if parts.scheme not in ("http", "https") or not host:
        raise UserError(f"{what} is not an http(s) URL: give e.g. https://huggingface.co")
    if "@" in parts.netloc:
        raise UserError(f"{what} carries credentials: give the token in HF_TOKEN or --token-file instead")
    if not _valid_host(host) or parts.netloc.lower() not in _netlocs(host, port):
        raise UserError(f"{what} is not a valid URL (the host or port is malformed)")
    if parts.query or parts.fragment:
        raise UserError(f"{what} has a query or fragment: give the hub's base URL")
    return raw.rstrip("/")


def _valid_host(host: str) -> bool:
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return False
        return True
    return re.fullmatch(r"[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?", host) is not None


def _netlocs(host: str, port: int | None) -> tuple[str, ...]:
    """The spellings of host[:port] a well-formed URL has (urlsplit accepts junk after an IPv6 bracket)."""
    name = f"[{host}]" if ":" in host else host
    return (name,) if port is None else (f"{name}:{port}",)


def origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) URL; None when it does not parse."""
    try:
        parts = urllib.parse.urlsplit(url)
        scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return None
    if scheme not in DEFAULT_PORTS or not host or port is None:
        return None
    return scheme, host, port


def token_allowed(url: str, endpoint: str) -> bool:
    """Whether a request to `url` may carry the token: only to the endpoint's own origin, so never to another
    host, nor over http when the endpoint is https (it is https unless the user set it otherwise)."""
    here = origin(url)
    return here is not None and here == origin(endpoint)


def check_token(token: str, source: str) -> str:
    """The token, if it can be sent as one header line (visible ASCII); else one UserError line that does not
    show it (CR/LF would split the header, other bytes are refused or mangled by http.client)."""
    bad = next((i for i, ch in enumerate(token) if not "\x21" <= ch <= "\x7e"), None)
    if bad is not None:
        raise UserError(
            f"{source} has a character that cannot be sent in an HTTP header (character {bad + 1}: "
            "a space, control character or non-ASCII): refused; hub tokens are visible ASCII (hf_...)"
        )
    if len(token) > MAX_TOKEN_BYTES:
        raise UserError(f"{source} is longer than {MAX_TOKEN_BYTES} characters: refused")
    return token


# --- deadlines ------------------------------------------------------------------------------------------
def deadline_seconds() -> float:
    raw = os.environ.get(DEADLINE_ENV)
    if not raw:
        return DEADLINE
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value <= 86400:
        raise UserError(f"{DEADLINE_ENV}={raw[:40]!r} is not a number of seconds between 0 and 86400")
    return value


class Deadline:
    """The time left for one request (or one header fetch); with renew_every, the time left to receive the
    next renew_every bytes."""

    def __init__(self, seconds: float, renew_every: int = 0) -> None:
        self.seconds, self.renew_every = seconds, renew_every
        self.at = time.monotonic() + seconds
        self._progress = 0

    def expired(self) -> HubTimeout:
        if self.renew_every:
            least = untrusted.human_size(self.renew_every)
            return HubTimeout(f"fewer than {least} arrived in {self.seconds:g} s")
        return HubTimeout(f"no complete answer within {self.seconds:g} s")

    def timeout(self) -> float:
        """The socket timeout for the next read; HubTimeout when the deadline has passed."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise self.expired()
        return min(READ_TIMEOUT, left)

    def received(self, n: int) -> None:
        if self.renew_every:
            self._progress += n
            if self._progress >= self.renew_every:
                self._progress = 0
                self.at = time.monotonic() + self.seconds


class _DeadlineIO(io.RawIOBase):
    """The socket's reader (SocketIO) with the socket timeout set to the time left before each read."""

    def __init__(self, raw: io.RawIOBase, sock: socket.socket, deadline: Deadline) -> None:
        super().__init__()
        self.raw, self.sock, self.deadline = raw, sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        self.sock.settimeout(self.deadline.timeout())
        try:
            n = self.raw.readinto(buffer)
        except TimeoutError:
            self.deadline.timeout()  # raises HubTimeout when it was the deadline that ran out
            raise
        self.deadline.received(n or 0)
        return n

    def close(self) -> None:
        self.raw.close()
        super().close()


class _Response(http.client.HTTPResponse):
    def __init__(self, sock: socket.socket, *args: Any, deadline: Deadline, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        raw = self.fp.detach()  # the SocketIO keeps the socket open until the response is closed
        self.fp = io.BufferedReader(_DeadlineIO(raw, sock, deadline))


def _connection(
    base: type[http.client.HTTPConnection], current: Callable[[], Deadline]
) -> Callable[..., Any]:
    def make(host: str, timeout: float | None = None, **kwargs: Any) -> http.client.HTTPConnection:
        deadline = current()
        conn = base(host, timeout=deadline.timeout(), **kwargs)
        conn.response_class = functools.partial(_Response, deadline=deadline)  # type: ignore[assignment]
        return conn

    return make


class DeadlineHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, current: Callable[[], Deadline]) -> None:
        super().__init__()
        self.current = current

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_connection(http.client.HTTPConnection, self.current), req)  # type: ignore[arg-type]


class DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, current: Callable[[], Deadline]) -> None:
        super().__init__()
        self.current = current

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(  # type: ignore[arg-type]
            _connection(http.client.HTTPSConnection, self.current), req, context=self._context
        )


# --- bodies ---------------------------------------------------------------------------------------------
def read_bounded(resp: http.client.HTTPResponse, limit: int, what: str) -> bytes:
    """The body, refused when longer than `limit`; a broken or too slow transfer is a HubError."""
    announced = resp.headers.get("Content-Length")
    if announced is not None and announced.isdigit() and int(announced) > limit:
        raise HubError(f"{what} is larger than {untrusted.human_size(limit)}: refused")
    data = read_some(resp, limit + 1, what)
    if len(data) > limit:
        raise HubError(f"{what} is larger than {untrusted.human_size(limit)}: refused")
    return data


def read_some(resp: http.client.HTTPResponse, n: int, what: str) -> bytes:
    """At most n bytes of the body (the rest stays unread)."""
    try:
        return resp.read(n)
    except HubTimeout as exc:
        raise HubError(f"{what}: {exc} (the limit is {DEADLINE_ENV} seconds)", code="Timeout") from None
    except (OSError, http.client.HTTPException) as exc:
        raise HubError(f"{what}: the transfer broke ({type(exc).__name__})") from None


def failed_url(what: str, endpoint: str, exc: BaseException) -> HubError:
    """A request that got no usable answer, as one line."""
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, HubTimeout):
        return HubError(f"{what}: {reason} (the limit is {DEADLINE_ENV} seconds)", code="Timeout")
    if isinstance(reason, ValueError):  # a malformed URL in a redirect, a non-ASCII host
        return HubError(f"{what}: the hub answered with a malformed URL ({str(reason)[:100]})")
    text = re.sub(r"\s+", " ", untrusted.valid_text(str(reason)))[:200] or type(reason).__name__
    return HubError(f"cannot reach {endpoint}: {text}")
