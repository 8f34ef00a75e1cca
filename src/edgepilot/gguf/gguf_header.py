"""A bounded GGUF header parser: metadata and tensor infos, never the tensor data.

The `gguf` package's GGUFReader maps the whole file and trusts every length and count in it; a hostile or
truncated header can make it allocate gigabytes or fail with "cannot reshape array". This parser checks each
length against the bytes that remain and against llama.cpp's own limits (ggml/src/gguf.cpp) before using it,
keeps only small values, and turns every defect into a Problem instead of an exception.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from edgepilot.gguf import ggml_types
from edgepilot.gguf.gguf_records import GGUFHeader, SkippedValue, TensorInfo, open_checked
from edgepilot.gguf.header_bytes import RUN, RUN_SPAN, SHORT, Window, step_runs

GGUF_MAGIC = b"GGUF"
# llama.cpp's limits (ggml/src/gguf.cpp, ggml/include/ggml.h).
MAX_STRING_LENGTH = 1 << 30  # GGUF_MAX_STRING_LENGTH
MAX_ARRAY_ELEMENTS = 1 << 30  # GGUF_MAX_ARRAY_ELEMENTS
MAX_NAME = 64  # GGML_MAX_NAME: a tensor name must be shorter than this
MAX_DIMS = 4  # GGML_MAX_DIMS
INT64_MAX = (1 << 63) - 1
# Our own limits, far above any real model, so that a hostile header stays cheap to reject.
MAX_HEADER_BYTES = 256 << 20  # real headers (262k-token vocabularies included) are a few tens of MiB
MAX_STRING_ITEMS = 8_000_000  # strings inside arrays: each costs a Python loop iteration
MAX_NESTING = 4  # llama.cpp rejects any array of arrays; we only parse a little further to report it
KEEP_STRING = 64 << 10  # longer strings are summarized, not kept
KEEP_ITEM = 1 << 10  # same for the strings inside an array
KEEP_ARRAY = 4096  # longer arrays are summarized, not kept
KEEP_TOTAL = 64 << 20  # rough bytes of Python objects kept for one header (real ones need well under 1 MiB)

# GGUF value types 0..12 by id, and the struct format of each scalar one (8 string and 9 array have none).
_NAMES = ("u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64")
TYPE_NAMES = dict(enumerate(_NAMES))
_SCALAR = {t: "<" + c for t, c in enumerate("BbHhIifb..Qqd") if c != "."}
STRING, ARRAY = 8, 9
_U64 = struct.Struct("<Q").unpack_from


class _Stop(Exception):
    """The header cannot be parsed further; the reason is already recorded."""


class _Parser:
    def __init__(self, src: Window, limit: int, header: GGUFHeader):
        self.src = src
        self.limit = limit  # bytes we allow ourselves to parse: min(file size, MAX_HEADER_BYTES)
        self.pos = 0
        self.h = header
        self.string_items = 0
        self.kept = 0

    def _keep(self, cost: int, what: str) -> None:
        """Account for what we keep in memory: keys, small values, tensor infos."""
        self.kept += cost
        if self.kept > KEEP_TOTAL:
            self.h.add(
                "header-too-large",
                f"keeping {what} would take the parsed header past {KEEP_TOTAL >> 20} MiB of memory; "
                "no real model needs that, so the file is treated as corrupt",
            )
            raise _Stop

    # --- primitives -------------------------------------------------------------------------------
    def _need(self, n: int, what: str) -> None:
        if self.pos + n <= self.limit:
            return
        if self.limit < self.h.file_size:
            self.h.add(
                "header-too-large",
                f"the metadata runs past {MAX_HEADER_BYTES >> 20} MiB while reading {what}; "
                "no real model has such a header, so the file is treated as corrupt",
            )
        else:
            self.h.add(
                "truncated-header",
                f"the file ends at byte {self.h.file_size} while reading {what} (at byte {self.pos}): "
                "the header is truncated, the file is corrupted or incomplete",
            )
        raise _Stop

    def remaining(self) -> int:
        return self.limit - self.pos

    def raw(self, n: int, what: str) -> bytes:
        self._need(n, what)
        off = self.src.at(self.pos, n)
        self.pos += n
        return self.src.win[off : off + n]

    def scalar(self, fmt: str, what: str) -> Any:
        n = struct.calcsize(fmt)
        self._need(n, what)
        off = self.src.at(self.pos, n)  # may replace the window: read it only afterwards
        (v,) = struct.unpack_from(fmt, self.src.win, off)
        self.pos += n
        return v

    def string(self, what: str, keep: int = KEEP_STRING) -> str | SkippedValue:
        n = self.scalar("<Q", f"the length of {what}")
        if n > MAX_STRING_LENGTH:
            self.h.add(
                "bad-string", f"{what}: string length {n} exceeds llama.cpp's maximum {MAX_STRING_LENGTH}"
            )
            raise _Stop
        if n > self.remaining():
            self.h.add(
                "bad-string",
                f"{what}: string length {n} exceeds the remaining {self.remaining()} bytes of the file",
            )
            raise _Stop
        if n > keep:
            self.pos += n
            return SkippedValue("string", n)
        self._keep(64 + n, what)
        return self.raw(n, what).decode("utf-8", errors="replace")

    # --- metadata ---------------------------------------------------------------------------------
    def value(self, vtype: int, key: str, depth: int = 0) -> Any:
        fmt = _SCALAR.get(vtype)
        if fmt is not None:
            v = self.scalar(fmt, f"the value of '{key}'")
            return v != 0 if vtype == 7 else v
        if vtype == STRING:
            return self.string(f"the value of '{key}'")
        if vtype == ARRAY:
            start, found = self.pos, self.array(key, depth)
            if isinstance(found, SkippedValue):
                found.span = (start, self.pos)  # a vocabulary: compared by its bytes (tokenizer identity)
            return found
        self.h.add("bad-kv", f"key '{key}' has invalid GGUF type {vtype}")
        raise _Stop

    def array(self, key: str, depth: int) -> Any:
        itype = self.scalar("<i", f"the item type of '{key}'")
        n = self.scalar("<Q", f"the item count of '{key}'")
        if itype == ARRAY:
            # gguf.cpp's reader has no case for an array item type: it fails with "invalid GGUF type 9".
            self.h.add(
                "nested-array",
                f"key '{key}' is an array of arrays, which llama.cpp rejects (invalid GGUF type 9)",
            )
            if depth + 1 >= MAX_NESTING:
                self.h.add("bad-kv", f"key '{key}': arrays nested deeper than {MAX_NESTING} levels")
                raise _Stop
        elif itype not in _SCALAR and itype != STRING:
            self.h.add("bad-kv", f"key '{key}' is an array of invalid GGUF type {itype}")
            raise _Stop
        if n > MAX_ARRAY_ELEMENTS:
            self.h.add(
                "bad-array",
                f"key '{key}': array of {n} items exceeds llama.cpp's maximum {MAX_ARRAY_ELEMENTS}",
            )
            raise _Stop
        # Each item needs at least this many bytes: a count the file cannot hold is rejected before looping.
        min_item = {STRING: 8, ARRAY: 12}.get(itype) or struct.calcsize(_SCALAR[itype])
        if n * min_item > self.remaining():
            self.h.add(
                "bad-array",
                f"key '{key}': {n} items of {TYPE_NAMES[itype]} need at least {n * min_item} bytes but only "
                f"{self.remaining()} remain: the header is corrupted or truncated",
            )
            raise _Stop
        keep = n <= KEEP_ARRAY
        if itype in _SCALAR:
            size = struct.calcsize(_SCALAR[itype])
            if not keep:
                self.pos += n * size
                return SkippedValue(f"array[{TYPE_NAMES[itype]}]", n)
            self._keep(64 + 32 * n, f"the items of '{key}'")
            items = list(
                struct.unpack(f"<{n}{_SCALAR[itype][1]}", self.raw(n * size, f"the items of '{key}'"))
            )
            return [v != 0 for v in items] if itype == 7 else items
        if itype == STRING:
            self.string_items += n
            if self.string_items > MAX_STRING_ITEMS:
                self.h.add(
                    "header-too-large", f"key '{key}': more than {MAX_STRING_ITEMS} strings in the metadata"
                )
                raise _Stop
            if keep:
                return [self.string(f"item {i} of '{key}'", keep=KEEP_ITEM) for i in range(n)]
            self._skip_strings(n, key)
            return SkippedValue("array[string]", n)
        out = []
        for i in range(n):
            inner = self.array(f"{key}[{i}]", depth + 1)
            if keep:
                out.append(inner)
        return out if keep else SkippedValue("array[array]", n)

    def _skip_strings(self, n: int, key: str) -> None:
        """Step over n strings (a vocabulary, merges): short ones in runs, the rest one by one, checked."""
        src, limit, pos, i = self.src, self.limit, self.pos, 0
        while i < n:
            if n - i >= RUN and pos < limit:
                off = src.at(pos, min(RUN_SPAN, limit - pos))
                after, stepped = step_runs(src.win, off, min(len(src.win), limit - src.base), (n - i) // RUN)
                pos, i = pos + after - off, i + stepped
                if stepped:
                    continue  # the window ran out, or a string the runs cannot step over is next
            win, base = src.win, src.base
            for _ in range(min(RUN, n - i)):  # until past the string that stopped the run
                if pos + 8 > limit:
                    self.pos = pos
                    self._need(8, f"item {i} of '{key}'")
                off = pos - base
                if off < 0 or off + 8 > len(win):
                    off = src.at(pos, 8)
                    win, base = src.win, src.base
                (length,) = _U64(win, off)
                pos += 8
                if length > limit - pos:
                    self.pos, what = pos, f"item {i} of '{key}'"
                    self.h.add(
                        "bad-string",
                        f"{what}: string length {length} exceeds the remaining {limit - pos} bytes",
                    )
                    raise _Stop
                pos, i = pos + length, i + 1
                if length >= SHORT:
                    break
        self.pos = pos

    def kv_pairs(self, n_kv: int) -> None:
        seen: set[str] = set()
        for i in range(n_kv):
            key = self.string(f"key {i}")
            if isinstance(key, SkippedValue):
                self.h.add("bad-kv", f"key {i} is {key.count} bytes long")
                raise _Stop
            if not key:
                self.h.add("bad-kv", f"key {i} is empty")
            elif "\ufffd" in key or not key.isprintable():  # invalid UTF-8 was replaced by U+FFFD
                self.h.add(
                    "bad-key",
                    f"metadata key {i} ({ascii(key)[:80]}) is not readable text: "
                    "the header is corrupted (a damaged download or copy)",
                )
            elif key in seen:
                self.h.add("bad-kv", f"duplicate key '{key}' for KV pair {i}")
            seen.add(key)
            vtype = self.scalar("<i", f"the type of '{key}'")
            if vtype == ARRAY:
                item = self.scalar("<i", f"the item type of '{key}'")
                self.pos -= 4
                self.h.metadata_types[key] = f"array[{TYPE_NAMES.get(item, str(item))}]"
            else:
                self.h.metadata_types[key] = TYPE_NAMES.get(vtype, str(vtype))
            self.h.metadata[key] = self.value(vtype, key)

    # --- tensor infos -----------------------------------------------------------------------------
    def tensor_infos(self, n_tensors: int) -> None:
        seen: set[str] = set()
        for i in range(n_tensors):
            name = self.string(f"the name of tensor {i}", keep=MAX_NAME * 4)
            if isinstance(name, SkippedValue) or len(name) >= MAX_NAME:
                size = name.count if isinstance(name, SkippedValue) else len(name)
                self.h.add("bad-tensor-info", f"tensor name {i} is too long: {size} >= {MAX_NAME}")
                name = f"#{i}" if isinstance(name, SkippedValue) else name
            elif name in seen:
                self.h.add("bad-tensor-info", f"duplicate tensor name '{name}' for tensor {i}")
            seen.add(name)
            n_dims = self.scalar("<I", f"the dimension count of '{name}'")
            if n_dims > MAX_DIMS:
                self.h.add(
                    "bad-tensor-info",
                    f"tensor '{name}' has invalid number of dimensions: {n_dims} > {MAX_DIMS}",
                )
                raise _Stop
            shape = [self.scalar("<q", f"the shape of '{name}'") for _ in range(n_dims)]
            gtype = self.scalar("<i", f"the type of '{name}'")
            offset = self.scalar("<Q", f"the offset of '{name}'")
            self._keep(256, f"tensor info {i}")
            self.h.tensors.append(self._tensor(name, shape, gtype, offset))

    def _tensor(self, name: str, shape: list[int], gtype: int, offset: int) -> TensorInfo:
        tname = ggml_types.type_name(gtype)
        n_elements, n_bytes = 1, None
        valid = True
        for j, d in enumerate(shape):
            if d < 0:
                self.h.add(
                    "bad-tensor-info",
                    f"tensor '{name}' dimension {j} has invalid number of elements: {d} < 0",
                )
                valid = False
        if valid:
            for d in shape:
                n_elements *= d
            if n_elements > INT64_MAX:
                self.h.add("bad-tensor-info", f"tensor '{name}' shape {shape} overflows int64")
                valid = False
        sizes = ggml_types.block_and_type_size(gtype)
        if sizes is None:
            self.h.add(
                "unknown-ggml-type",
                f"tensor '{name}' has ggml type {gtype}, which neither this llama.cpp "
                "nor the gguf package knows",
            )
        elif valid:
            block, size = sizes
            row = shape[0] if shape else 1
            if row % block:
                self.h.add(
                    "bad-tensor-info",
                    f"tensor '{name}' of type {tname} has {row} elements per row, "
                    f"not a multiple of block size {block}",
                )
            else:
                n_bytes = n_elements // block * size
        return TensorInfo(name, shape, gtype, tname, offset, n_elements if valid else 0, n_bytes)

    # --- whole header -----------------------------------------------------------------------------
    def parse(self) -> None:
        h = self.h
        if h.file_size < 4:
            h.add("bad-magic", "failed to read magic: the file is shorter than 4 bytes")
            raise _Stop
        magic = self.raw(4, "the magic")
        if magic != GGUF_MAGIC:
            shown = magic.decode("latin-1").encode("unicode_escape").decode()
            h.add(
                "bad-magic", f"invalid magic characters: '{shown}', expected 'GGUF': this is not a GGUF file"
            )
            raise _Stop
        h.version = self.scalar("<I", "the version")
        if h.version not in (2, 3):
            hint = " (GGUFv1 is no longer supported)" if h.version == 1 else ""
            if h.version & 0xFFFF == 0 and h.version:
                hint = " (the byte order looks swapped: a big-endian file?)"
            h.add("bad-version", f"bad GGUF version: {h.version}; llama.cpp reads versions 2 and 3{hint}")
            raise _Stop
        h.tensor_count = self.scalar("<Q", "the tensor count")
        h.kv_count = self.scalar("<Q", "the metadata count")
        # Cheapest possible KV pair is 13 bytes, tensor info 24: reject counts the file cannot hold.
        if h.kv_count * 13 > self.remaining() or h.tensor_count * 24 > self.remaining():
            h.add(
                "bad-count",
                f"{h.kv_count} metadata pairs and {h.tensor_count} tensors cannot fit in a "
                f"{h.file_size}-byte file: the header is corrupted",
            )
            raise _Stop
        self.kv_pairs(h.kv_count)
        self._alignment()
        self.tensor_infos(h.tensor_count)
        h.header_end = self.pos
        h.complete = True

    def _alignment(self) -> None:
        h = self.h
        if "general.alignment" not in h.metadata:
            return
        value, vtype = h.metadata["general.alignment"], h.metadata_types.get("general.alignment")
        if vtype != "u32":
            h.add("bad-alignment", f"key 'general.alignment' must be of type u32 but is {vtype}")
        elif value == 0 or value & (value - 1):
            h.add("bad-alignment", f"alignment {value} is not a power of 2")
        else:
            h.alignment = value


def read_header(path: str | os.PathLike[str]) -> GGUFHeader:
    """Parse a GGUF header with hard bounds. Raises UserError only for an unusable path; every defect of the
    file itself is a Problem in the result."""
    with open_checked(path) as f:
        size = os.fstat(f.fileno()).st_size
        header = GGUFHeader(path=str(path), file_size=size)
        try:
            _Parser(Window(f), min(size, MAX_HEADER_BYTES), header).parse()
        except _Stop:
            pass
        except OSError as e:  # EIO on a failing card, a file truncated while we read it
            header.add("read-error", f"reading the header failed: {e}")
    if header.complete:
        # gguf.cpp seeks to the padded end only when there are tensors (gguf_init_from_reader).
        end = header.header_end or 0
        header.data_offset = _pad(end, header.alignment) if header.tensor_count else end
    return header


def _pad(n: int, align: int) -> int:
    return (n + align - 1) // align * align
