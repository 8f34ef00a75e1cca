"""The front's listening socket: bound before the model is read, so a port in use is one line at once."""

from __future__ import annotations

import errno
import socket

from edgepilot.errors import UserError


def _free_port(family: int, address: tuple) -> int | None:
    """A port free on this address right now (the kernel's pick), to name in the error."""
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address[0], 0, *address[2:]))
            return int(probe.getsockname()[1])
    except OSError:
        return None


def bind_front(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UserError(f"cannot resolve --host {host}: {exc}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            free = _free_port(family, address)
            other = f"--port {free} is free now" if free else "choose another --port"
            raise UserError(f"port {port} on {host} is in use: {other} (--port 0 picks one)") from None
        if exc.errno == errno.EACCES:
            raise UserError(f"no permission to listen on port {port}: use a port above 1023") from None
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(False)
    return sock
