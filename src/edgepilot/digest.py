"""sha256 of the short texts edgepilot keys and seals its kept files with, without loading OpenSSL.

`import hashlib` loads OpenSSL's library (about 7 ms here, more on a phone) for every command that reads a
kept figure, `probe` included. CPython carries its own sha256 (`_sha2` from 3.12, `_sha256` before): the
same digest, slower per byte (about 5 ms a MiB against OpenSSL's 0.8), which is nothing for a key or a
kept file. Large data (a model's first and last MiB, a download) is hashed with hashlib.
"""

from __future__ import annotations

from typing import Any

SMALL = 1 << 16  # bytes: above this, hashlib's OpenSSL pays for its own loading


def _builtin() -> Any:
    for name in ("_sha2", "_sha256"):
        try:
            return __import__(name).sha256
        except (ImportError, AttributeError):
            continue
    return None


_SHA256 = _builtin()


def sha256_hex(data: bytes | str) -> str:
    """The sha256 hex digest of data (a str as UTF-8)."""
    raw = data.encode() if isinstance(data, str) else data
    if _SHA256 is None or len(raw) > SMALL:
        import hashlib

        return hashlib.sha256(raw).hexdigest()
    return _SHA256(raw).hexdigest()
