"""An RPC helper from an older llama.cpp, as far as the handshake goes: it answers HELLO with protocol 6.0.0.

A stand-in only for what cannot run here (a second llama.cpp build of another protocol version): the client
that talks to it is the real llama.cpp. Usage: python old_helper.py PORT (serves until killed)."""

from __future__ import annotations

import socket
import struct
import sys

RPC_CMD_HELLO = 14


def _recv(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("client went away")
        data += chunk
    return data


def serve(port: int) -> None:
    with socket.create_server(("127.0.0.1", port)) as srv:
        while True:
            conn, _ = srv.accept()
            with conn:
                try:
                    cmd = _recv(conn, 1)[0]
                    (size,) = struct.unpack("<Q", _recv(conn, 8))
                    caps = _recv(conn, min(size, 4096))
                    if cmd == RPC_CMD_HELLO:
                        reply = bytes([6, 0, 0, 0]) + bytes(len(caps))
                        conn.sendall(struct.pack("<Q", len(reply)) + reply)
                except ConnectionError:
                    pass


if __name__ == "__main__":
    serve(int(sys.argv[1]))
