"""Validate a GGUF file before any load: header, tensor layout, truncation, zero-filled tail, sha256.

Reads only the header, a little of the tail and — only when a sha256 is expected — the whole file.
Every defect is a Problem; the only exception is UserError for a path that cannot be opened at all.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot.errors import UserError
from edgepilot.gguf.gguf_header import read_header
from edgepilot.gguf.gguf_records import GGUFHeader, Problem, open_checked
from edgepilot.untrusted import open_regular

MiB = 1 << 20
TAIL_WINDOW = 1 * MiB  # the last bytes of tensor data that must not be all zeros
TAIL_MIN_DATA = 64 << 10  # below this much tensor data, zeros at the end can be legitimate
PROBE = 64 << 10  # bytes read at each backwards probe when measuring a zero tail
MAX_OUT_OF_BOUNDS_LISTED = 5
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


@dataclass
class Validation:
    path: str
    ok: bool
    problems: list[Problem] = field(default_factory=list)
    file_size: int = 0
    version: int | None = None
    tensor_count: int | None = None
    kv_count: int | None = None
    alignment: int | None = None
    architecture: str | None = None
    header_bytes: int | None = None  # end of the tensor infos
    data_offset: int | None = None  # start of the data section
    data_bytes: int | None = None  # size of the data section the tensor infos describe (padded)
    expected_file_size: int | None = None  # data_offset + data_bytes
    zero_tail_bytes: int = 0  # estimated size of the zero-filled tail, from sparse probes (0: none)
    sha256: str | None = None  # computed only when a checksum was expected
    sha256_expected: str | None = None
    sha256_source: str | None = None  # "argument" or the sidecar file's path
    elapsed_s: float = 0.0


def validate_gguf(
    path: str | os.PathLike[str],
    *,
    sha256: str | None = None,
    sidecar: bool = True,
    header: GGUFHeader | None = None,
) -> Validation:
    """Check a GGUF file the way llama.cpp will load it, and for damage llama.cpp would not notice.

    sha256: expected hex digest (as from `--sha256`); when None and `sidecar` is true, a `MODEL.sha256` or
    `MODEL.gguf.sha256` file in sha256sum format next to the model is used. Hashing reads the whole file:
    callers that must stay fast on multi-GB files (the planner) pass sidecar=False and no sha256.
    header: a GGUFHeader already read from this path, to avoid parsing twice.
    """
    t0 = time.perf_counter()
    if sha256 is not None and not _HEX64.match(sha256.strip()):
        raise UserError(f"--sha256 must be 64 hexadecimal digits, got {sha256!r}")
    h = header if header is not None else read_header(path)
    v = Validation(
        path=str(path),
        ok=False,
        problems=list(h.problems),
        file_size=h.file_size,
        version=h.version,
        tensor_count=h.tensor_count,
        kv_count=h.kv_count,
        alignment=h.alignment if h.complete else None,
        architecture=h.architecture,
        header_bytes=h.header_end,
        data_offset=h.data_offset,
    )
    if h.complete:
        _check_layout(h, v)
    _check_sha256(Path(path), v, sha256, sidecar)
    v.ok = not any(p.severity == "error" for p in v.problems)
    v.elapsed_s = round(time.perf_counter() - t0, 4)
    return v


def _pad(n: int, align: int) -> int:
    return (n + align - 1) // align * align


def _check_layout(h: GGUFHeader, v: Validation) -> None:
    """Offsets in order (gguf.cpp), every tensor inside the file (llama-model-loader.h), sizes, zero tail."""
    assert h.data_offset is not None
    size = h.file_size
    if h.tensors and h.data_offset > size:
        # gguf.cpp: "failed to seek to beginning of data section"
        v.problems.append(
            Problem(
                "truncated",
                f"the file ends at byte {size}, before its data section starts at byte {h.data_offset}: "
                "the model is corrupted or incomplete",
            )
        )
        return
    running = 0
    chain_ok = True
    for t in h.tensors:
        if t.n_bytes is None:
            chain_ok = False  # size unknown: later offsets cannot be predicted
            break
        if t.offset != running:
            how = (
                "overlaps the tensor before it"
                if t.offset < running
                else "leaves a gap after the tensor before it"
            )
            v.problems.append(
                Problem(
                    "tensor-offset-mismatch",
                    f"tensor '{t.name}' has offset {t.offset}, expected {running} ({how}): "
                    "tensors must be stored in order, each at the padded end of the previous one; "
                    "llama.cpp refuses this file",
                )
            )
            chain_ok = False
            break
        running = _pad(running + t.n_bytes, h.alignment)
    first_bounds_problem = len(v.problems)
    outside = [t for t in h.tensors if t.n_bytes is not None and h.data_offset + t.offset + t.n_bytes > size]
    for t in outside[:MAX_OUT_OF_BOUNDS_LISTED]:
        v.problems.append(
            Problem(
                "tensor-out-of-bounds",
                f"tensor '{t.name}' data is not within the file bounds, model is corrupted or incomplete "
                f"(needs bytes {h.data_offset + t.offset}..{h.data_offset + t.offset + t.n_bytes}, "
                f"file has {size})",
            )
        )
    if len(outside) > MAX_OUT_OF_BOUNDS_LISTED:
        v.problems.append(
            Problem(
                "tensor-out-of-bounds",
                f"{len(outside) - MAX_OUT_OF_BOUNDS_LISTED} more of {len(h.tensors)} tensors "
                "lie outside the file",
            )
        )
    if not chain_ok:
        return
    v.data_bytes = running
    v.expected_file_size = h.data_offset + running
    data_end = h.data_offset + (h.tensors[-1].offset + (h.tensors[-1].n_bytes or 0) if h.tensors else 0)
    if size < data_end:
        missing = data_end - size
        v.problems.insert(
            first_bounds_problem,
            Problem(
                "truncated",
                f"the file is {size} bytes but its tensors need {data_end} ({_mib(missing)} missing): "
                "the download or copy is incomplete",
            ),
        )
        return
    if size > v.expected_file_size:
        v.problems.append(
            Problem(
                "trailing-data",
                f"{size - v.expected_file_size} bytes follow the last tensor; llama.cpp ignores them, "
                "but the file may have been written by a broken tool or concatenated",
                "warning",
            )
        )
    _check_zero_tail(h, v, data_end)


def _check_zero_tail(h: GGUFHeader, v: Validation, data_end: int) -> None:
    """A download preallocated to its full size and never filled ends in zeros where weights should be."""
    assert h.data_offset is not None
    data_len = data_end - h.data_offset
    if data_len < TAIL_MIN_DATA:
        return
    window = min(TAIL_WINDOW, data_len)
    try:
        with open_checked(h.path) as f:
            if any(_read_at(f, data_end - window, window)):
                return
            zero_start = data_end - window
            # Probe backwards at doubling distances to bound the zero region without reading it all.
            step = 2 * window
            while zero_start > h.data_offset:
                probe_start = max(h.data_offset, data_end - step)
                if any(_read_at(f, probe_start, min(PROBE, zero_start - probe_start))):
                    break
                zero_start = probe_start
                step *= 2
    except (OSError, UserError) as e:
        v.problems.append(Problem("read-error", f"reading the end of the file failed: {e}"))
        return
    v.zero_tail_bytes = data_end - zero_start
    first = next((t.name for t in h.tensors if h.data_offset + t.offset + (t.n_bytes or 0) > zero_start), "?")
    v.problems.append(
        Problem(
            "zero-tail",
            f"the last {_mib(v.zero_tail_bytes)} of tensor data are all zeros (from tensor '{first}' on): "
            "the file has the right size but was never completely written, e.g. an interrupted download; "
            "download it again",
        )
    )


def _read_at(f, pos: int, n: int) -> bytes:
    f.seek(pos)
    data = f.read(n)
    if len(data) < n:
        raise OSError(f"short read at byte {pos}")
    return data


def _mib(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n >= MiB // 10 else f"{n} bytes"


# --- sha256 ---


def sidecar_paths(path: Path) -> list[Path]:
    """`MODEL.gguf.sha256` and `MODEL.sha256` for `MODEL.gguf`."""
    out = [path.with_name(path.name + ".sha256")]
    if path.suffix:
        out.append(path.with_suffix(".sha256"))
    return out


def parse_sha256_file(text: str, model_name: str) -> str | None:
    """The digest for model_name from sha256sum output ("HEX  NAME" / "HEX *NAME" lines, or one bare HEX)."""
    entries = []
    for line in text.splitlines():
        parts = line.strip().split(maxsplit=1)
        if not parts or not _HEX64.match(parts[0]):
            continue
        name = parts[1].lstrip("*").strip() if len(parts) > 1 else None
        entries.append((parts[0].lower(), name))
    for digest, name in entries:
        if name is not None and Path(name).name == model_name:
            return digest
    if len(entries) == 1:
        return entries[0][0]
    return None


def _check_sha256(path: Path, v: Validation, expected: str | None, sidecar: bool) -> None:
    source = "argument" if expected else None
    if expected is None and sidecar:
        for side in sidecar_paths(path):
            if not side.is_file():
                continue
            try:
                with open_regular(side) as f:
                    digest = parse_sha256_file(f.read(1 << 20).decode("utf-8", errors="replace"), path.name)
            except OSError as e:
                v.problems.append(Problem("sha256-sidecar-unreadable", f"cannot read {side}: {e}", "warning"))
                continue
            if digest is None:
                v.problems.append(
                    Problem(
                        "sha256-sidecar-unreadable", f"{side} has no sha256 line for {path.name}", "warning"
                    )
                )
                continue
            expected, source = digest, str(side)
            break
    if expected is None:
        return
    v.sha256_expected, v.sha256_source = expected.strip().lower(), source
    try:
        v.sha256 = file_sha256(path)
    except (OSError, UserError) as e:
        v.problems.append(Problem("read-error", f"reading the file for its sha256 failed: {e}"))
        return
    if v.sha256 != v.sha256_expected:
        v.problems.append(
            Problem(
                "sha256-mismatch",
                f"sha256 is {v.sha256} but {source} expects {v.sha256_expected}: "
                "the file is corrupted, incomplete or a different file",
            )
        )


def file_sha256(path: str | os.PathLike[str], chunk: int = 4 * MiB) -> str:
    import hashlib  # OpenSSL's library loads with it: only when a file is hashed

    digest = hashlib.sha256()
    with open_checked(path) as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()
