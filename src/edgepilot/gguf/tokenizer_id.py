"""Whether two GGUF files share one tokenizer: the same token strings at the same ids, the same merges and
the same tokenizer model and pre-tokenizer. compare's KL divergence matches the files' next-token
distributions id by id over one tokenization of the text, so a vocabulary of the same size with two tokens
swapped is not enough.

The vocabularies (up to ~262k strings) are not kept by the header parser; each is hashed from its bytes in
the file (the span the parser recorded), so two files cost two bounded reads, never the strings in memory.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, BinaryIO

from edgepilot.gguf.gguf_records import GGUFHeader, SkippedValue, open_checked
from edgepilot.gguf.verdict import header_of

KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.merges")
_PIECE = 1 << 20


def tokenizer_digests(path: str | os.PathLike[str], header: GGUFHeader | None = None) -> dict[str, str]:
    """{key: digest of its value} for each tokenizer key (a missing key has a digest too). header: the file's
    header when the caller has parsed it already."""
    header = header or header_of(path)
    out: dict[str, str] = {}
    with open_checked(path) as f:
        for key in KEYS:
            value = header.metadata.get(key)
            h = hashlib.sha256(header.metadata_types.get(key, "absent").encode())
            if isinstance(value, SkippedValue) and value.span is not None:
                _hash_span(f, value.span, h)
            else:
                h.update(repr(value).encode("utf-8", errors="surrogatepass"))
            out[key] = h.hexdigest()
    return out


def _hash_span(f: BinaryIO, span: tuple[int, int], h: Any) -> None:
    start, end = span  # within the parsed header: at most gguf_header.MAX_HEADER_BYTES
    f.seek(start)
    left = end - start
    while left > 0:
        piece = f.read(min(left, _PIECE))
        if not piece:
            raise OSError(f"the file became shorter while being read (at byte {end - left})")
        h.update(piece)
        left -= len(piece)


def differences(a: dict[str, str], b: dict[str, str]) -> list[str]:
    """The tokenizer keys whose values differ, as short names ("tokens", "merges", ...)."""
    return [k.rpartition(".")[2] for k in KEYS if a.get(k) != b.get(k)]
