"""`edgepilot rpc-server`: llama.cpp's rpc-server on a helper device, on loopback unless told otherwise."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass

from edgepilot.engine.child_env import llama_env
from edgepilot.engine.native_tools import ToolMissing, find_tool, tools_dir, where_to_get
from edgepilot.engine.tool_flags import known_flags
from edgepilot.errors import UserError

LOOPBACK = "127.0.0.1"
NO_AUTH_WARNING = (
    "WARNING: llama.cpp's RPC server has NO authentication and NO encryption. Anyone who can reach "
    "{host}:{port} can allocate memory on this device and run graph operations on it (llama.cpp's README "
    "calls RPC insecure; llama.cpp issue #25289 reported an unauthenticated call over the network). "
    "Expose it only "
    "on a network you fully trust."
)
TUNNEL_ADVICE = (
    "Safer: keep the helper on 127.0.0.1 and tunnel from the main device: "
    "`ssh -N -L {port}:127.0.0.1:{port} HELPER` then use --rpc 127.0.0.1:{port} there"
)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class RpcServerCommand:
    argv: list[str]
    host: str
    port: int
    exposed: bool
    warnings: list[str]
    missing: str | None = None  # the tool is not here yet: argv names where `edgepilot build` puts it


def rpc_server_command(
    host: str = LOOPBACK, port: int = 50052, threads: int | None = None, planned: bool = False
) -> RpcServerCommand:
    """The command to run. `planned` (--dry-run): a missing tool is no error; the command names the path
    `edgepilot build` would put it at and `missing` says where to get it."""
    if not 0 < port < 65536:
        raise UserError(f"--port {port}: choose a TCP port between 1 and 65535")
    if threads is not None and not 1 <= threads <= 1024:
        raise UserError(f"--threads {threads}: choose between 1 and 1024")
    missing = None
    try:
        tool = find_tool("rpc-server")
    except ToolMissing:
        if not planned:
            raise
        tool = tools_dir("native") / "bin" / "rpc-server"
        missing = (
            "rpc-server is not here yet (the command shows where `edgepilot build` puts it): "
            + where_to_get("rpc-server")
        )
    argv = [str(tool), "--host", host, "--port", str(port)]
    if threads is not None:
        argv += ["--threads", str(threads)]
    if missing is None and "--device" in (known_flags(tool) or ()):
        argv += ["--device", "CPU"]  # rpc-server offers a GPU before the CPU whenever a backend has one
    exposed = not is_loopback(host)
    warnings = []
    if exposed:
        warnings = [NO_AUTH_WARNING.format(host=host, port=port), TUNNEL_ADVICE.format(port=port)]
    return RpcServerCommand(argv, host, port, exposed, warnings, missing)


def exec_rpc_server(cmd: RpcServerCommand) -> None:
    """Replace this process with rpc-server (Ctrl-C and signals go straight to it)."""
    env = llama_env(True, cmd.argv[0])  # a helper lends its CPU: no GPU offered, no broken driver loaded
    os.execve(cmd.argv[0], cmd.argv, env)
