"""--rpc HOST:PORT,... and --tensor-split as llama.cpp takes them (run and serve both accept them), and
--override-tensor (serve)."""

from __future__ import annotations

import re

from edgepilot.errors import UserError


def parse_rpc(text: str | None) -> list[str]:
    """HOST:PORT,HOST:PORT,... as llama.cpp's --rpc takes it, checked."""
    if not text:
        return []
    out = []
    for part in text.split(","):
        host, colon, port = part.strip().rpartition(":")
        if not colon or not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
            raise UserError(f"--rpc {text!r}: write HOST:PORT[,HOST:PORT...], e.g. 127.0.0.1:50052")
        out.append(f"{host}:{port}")
    return out


def parse_tensor_split(text: str | None, n_rpc: int) -> list[float]:
    if not text:
        return []
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise UserError(f"--tensor-split {text!r}: write numbers, e.g. 14.5,15,1.5") from None
    if len(values) != n_rpc or any(not v >= 0 for v in values) or sum(values) <= 0:
        raise UserError(f"--tensor-split {text!r}: give one share (>= 0) per --rpc helper ({n_rpc})")
    return values


def parse_override_tensor(text: str | None) -> str | None:
    """PATTERN=BUFFER_TYPE[,...] as llama.cpp's -ot takes it (e.g. token_embd\\.weight=CPU), checked: each
    pattern a regular expression, each buffer type a name (llama.cpp lists the ones it has)."""
    if text is None:
        return None
    for part in text.split(","):
        pattern, eq, buft = part.partition("=")
        ok = bool(eq and pattern and re.fullmatch(r"[A-Za-z0-9_]+(\[[^],=]+\])?", buft))
        try:
            re.compile(pattern)
        except re.error:
            ok = False
        if not ok:
            raise UserError(
                f"--override-tensor {text!r}: write PATTERN=BUFFER_TYPE[,...], e.g. token_embd\\.weight=CPU"
            )
    return text
