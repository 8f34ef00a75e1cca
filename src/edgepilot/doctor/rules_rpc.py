"""llama.cpp's RPC backend (`--rpc HOST:PORT,...`): a helper that cannot be reached, speaks another protocol
version, or goes away mid-run. The client aborts in every case (ggml-rpc.cpp: GGML_ABORT / RPC_STATUS_ASSERT),
so the main process dies with SIGABRT and the line below names the helper."""

from __future__ import annotations

import re

from edgepilot.doctor.evidence import Evidence
from edgepilot.doctor.types import Cause, cause

CONNECT_FAIL = re.compile(r"Failed to connect to (\S+)")
VERSION = re.compile(
    r"RPC server version mismatch|RPC handshake failed for|HELLO request size mismatch", re.I
)
LOST = re.compile(r"Remote RPC server crashed or returned malformed response")
RECV = re.compile(r"recv failed \(bytes_recv=|send failed \(bytes_sent=")
HELPER_CMD = "`edgepilot rpc-server --port PORT` (or llama.cpp's `rpc-server -p PORT`)"


def _helpers(ev: Evidence) -> str:
    cmd = ev.command or []
    for i, arg in enumerate(cmd[:-1]):
        if arg == "--rpc":
            return cmd[i + 1]
    return "the --rpc helpers"


def rpc_helper_unreachable(ev: Evidence) -> list[Cause]:
    lines = ev.grep(CONNECT_FAIL, limit=2)
    if not lines:
        return []
    m = CONNECT_FAIL.search(lines[0])
    host, _, port = (m.group(1) if m else "HELPER:PORT").rpartition(":")
    port = port if port.isdigit() else "PORT"
    fix = (
        f"start the helper first: on {host or 'the helper'} run `edgepilot rpc-server --port {port}` (or "
        f"llama.cpp's `rpc-server -p {port}`) and check the port is reachable from here "
        f"(`nc -z {host or 'HELPER'} {port}`); for a helper on another device prefer an SSH tunnel "
        f"(`ssh -N -L {port}:127.0.0.1:{port} HELPER`) and --rpc 127.0.0.1:{port}"
    )
    return [cause("rpc-helper-unreachable", 95, lines, fix)]


def rpc_version_mismatch(ev: Evidence) -> list[Cause]:
    lines = ev.grep(VERSION, limit=2)
    if not lines:
        return []
    fix = (
        "run the same llama.cpp on every device: `edgepilot build` builds rpc-server and llama-server from "
        "the commit edgepilot's engine uses; rebuild the helper's rpc-server (or the main tools) with it"
    )
    return [cause("rpc-version-mismatch", 95, lines, fix)]


def rpc_helper_lost(ev: Evidence) -> list[Cause]:
    lines = ev.grep(LOST, limit=1) + ev.grep(RECV, limit=1)
    if not ev.has(LOST):
        return []
    fix = (
        f"restart the helper ({HELPER_CMD}) and check why it stopped (its own output; on a phone keep it in "
        f"the foreground with a wake lock); then `edgepilot cluster plan` with its real free memory: "
        f"a helper "
        f"given more layers than it holds is killed by its system"
    )
    return [cause("rpc-helper-lost", 90, [*lines, f"helpers: {_helpers(ev)}"], fix)]


RULES = (rpc_helper_unreachable, rpc_version_mismatch, rpc_helper_lost)
