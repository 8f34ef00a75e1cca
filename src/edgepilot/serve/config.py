"""What `edgepilot serve` is configured with, and the checks that keep it private.

Loopback by default; any other address needs an API key, because one `--host 0.0.0.0` on public Wi-Fi
exposes the model (and the phone's CPU) to everyone on the network.
"""

from __future__ import annotations

import ipaddress
import math
import os
import socket
import stat
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot.errors import UserError
from edgepilot.plan.budget import PRESSURE_PSI
from edgepilot.untrusted import read_user_file

MIB = 1 << 20
DEFAULT_SHORT_CTX = 1024  # the short lane's context (serve/short_lane.py)
MIN_SHORT_CTX = 256
KEY_ENV = "EDGEPILOT_API_KEY"
MAX_KEY_FILE_BYTES = 64 << 10


@dataclass
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    api_key: str | None = field(default=None, repr=False, metadata={"json": False})
    max_queue: int = 8  # requests that may wait while one generates; more get 503
    max_tokens: int = 512  # a request's max_tokens is clamped to this (and to what the context holds)
    max_body_bytes: int = 1 * MIB
    # Per-request cost caps, checked before a request may queue for the engine (serve/admission.py):
    max_messages: int = 256
    max_prompt_chars: int | None = None  # None: 32 characters per token of the planned context
    max_prompt_tokens: int | None = None  # None: the context (older turns are dropped to fit)
    short_lane_ctx: int = DEFAULT_SHORT_CTX  # a second context for short requests; 0: none
    psi_limit: float = PRESSURE_PSI  # memory PSI "some" avg10 (%) from which new requests get 503
    min_available_bytes: int | None = None  # None: 5 % of RAM, between 128 and 512 MiB
    retry_after: int = 5  # seconds, sent with every 503
    request_timeout: float = 600.0  # a generation that takes longer than this is cut off
    # Per connection (serve/connections.py): a request head must arrive whole within header_timeout of the
    # connection (or the previous reply), its body within body_timeout of the head; a client that reads
    # nothing of its reply for send_timeout is dropped. Total times, not reset by each byte (slowloris).
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    send_timeout: float = 60.0
    max_idle_connections: int = 128  # connections with no request under way; past this the oldest is closed
    cache_reuse: bool = True  # keep the last request's KV cache for the next one's common prefix
    watch_root: Path = Path("/")  # the device whose memory is watched (a device tree in tests)
    max_temp_c: float | None = None  # --max-temp: generation on fewer threads above it (thermal_guard.py)
    verbose: bool = False  # also log the polled requests (status page, /health) and the worker's output
    quiet: bool = False  # no line per request

    def validate(self) -> ServeConfig:
        if not 0 <= self.port <= 65535:
            raise UserError(f"--port {self.port} is not a TCP port (0-65535; 0 picks a free one)")
        if self.max_queue < 0:
            raise UserError("--max-queue must be 0 or more")
        if self.max_tokens < 1:
            raise UserError("--max-tokens must be at least 1")
        if not 1 <= self.max_messages <= 1 << 20:
            raise UserError("--max-messages must be between 1 and 1048576")
        if self.max_prompt_chars is not None and not 1 <= self.max_prompt_chars <= 1 << 30:
            raise UserError("--max-prompt-chars must be between 1 and 1073741824 (0: derived from --ctx)")
        if self.max_prompt_tokens is not None and not 1 <= self.max_prompt_tokens <= 1 << 30:
            raise UserError("--max-prompt-tokens must be between 1 and 1073741824 (0: the context)")
        if self.short_lane_ctx and not MIN_SHORT_CTX <= self.short_lane_ctx <= 1 << 20:
            raise UserError(f"--short-lane must be 0 (none) or between {MIN_SHORT_CTX} and 1048576 tokens")
        if self.max_body_bytes < 1024:
            raise UserError("--max-body must be at least 1KiB")
        if self.psi_limit <= 0:
            raise UserError("--psi-limit must be a positive percentage, e.g. 10")
        for flag, seconds in (
            ("--header-timeout", self.header_timeout),
            ("--body-timeout", self.body_timeout),
        ):
            if not (math.isfinite(seconds) and 0 < seconds <= 3600):
                raise UserError(f"{flag} must be a number of seconds above 0 and at most 3600")
        if not (math.isfinite(self.send_timeout) and self.send_timeout > 0):
            raise UserError("the send timeout must be a positive number of seconds")
        if self.max_idle_connections < 1:
            raise UserError("the idle connection limit must be at least 1")
        check_bind(self.host, self.api_key)
        return self

    @property
    def requires_key(self) -> bool:
        return self.api_key is not None


def _addresses(host: str) -> list[str]:
    try:
        return [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise UserError(f"cannot resolve --host {host}: {exc}") from None
    return sorted({str(info[4][0]) for info in infos})


def is_loopback(host: str) -> bool:
    """True when every address the host name stands for is a loopback address (127.0.0.0/8, ::1)."""
    addresses = _addresses(host)
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


def check_bind(host: str, api_key: str | None) -> None:
    if api_key is None and not is_loopback(host):
        raise UserError(
            f"refusing to serve on {host} without an API key: anyone on the network could use the model; "
            "add --api-key-file FILE (or --api-key KEY), or keep the default --host 127.0.0.1"
        )


def read_api_key(key: str | None, key_file: str | None) -> str | None:
    """The key from --api-key, --api-key-file or $EDGEPILOT_API_KEY (in that order of preference)."""
    if key is not None and key_file is not None:
        raise UserError("give either --api-key or --api-key-file, not both")
    if key_file is not None:
        data = read_user_file(key_file, "API key file", MAX_KEY_FILE_BYTES)
        try:
            key = data.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise UserError(f"the API key file {key_file} is not UTF-8 text") from None
        if not key:
            raise UserError(f"the API key file {key_file} is empty")
    elif key is None:
        key = os.environ.get(KEY_ENV) or None
    if key is not None:
        key = key.strip()
        if not key:
            raise UserError("the API key is empty")
        if any(ch.isspace() for ch in key) or not key.isprintable():
            raise UserError("the API key must be one word of printable characters (no spaces)")
    return key


def key_file_warning(key_file: str | None) -> str | None:
    """A warning when other users may read the key file (the key itself is never printed)."""
    if key_file is None:
        return None
    try:
        mode = Path(key_file).expanduser().stat().st_mode
    except OSError:
        return None
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        return f"the API key file {key_file} is readable by other users; chmod 600 {key_file}"
    return None


def default_min_available(total_bytes: int | None) -> int:
    if not total_bytes:
        return 128 * MIB
    return int(min(512 * MIB, max(128 * MIB, total_bytes * 0.05)))
