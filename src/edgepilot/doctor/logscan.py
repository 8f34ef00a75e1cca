"""Facts read out of a log: llama.cpp (old and new log formats), llama-bench tables, shells, logcat, dmesg.

Everything here is tolerant: a line that does not parse is skipped, a fact that is absent stays None.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field

MIB = 1 << 20
MAX_QUOTE = 240
_NUM = r"([0-9]+(?:\.[0-9]+)?)"
# A number where one starts: `[0-9]+` tried inside a run of digits would rescan the run from each of them.
_NUM_START = r"(?<![0-9.])" + _NUM


def upto(lead: str, rest: str) -> str:
    """`lead.*?rest` that stays linear: the gap may not hold another `lead`, so each character is scanned
    for one `lead` only (a line of many leads and no `rest` would otherwise cost leads x length). Finds a
    match exactly when `lead.*?rest` does."""
    return rf"(?:{lead})(?:(?!{lead}).)*?(?:{rest})"


def upto_last(lead: str, rest: str) -> str:
    """`lead.*rest` (the last `rest` after `lead`) with the same linear bound as `upto`."""
    return rf"(?:{lead})(?:(?!{lead}).)*(?:{rest})"


_MODEL_PATH = (
    re.compile(upto_last("loaded meta data with ", r" from (\S+\.gguf)\b")),
    re.compile(r"loading model (?:from )?'([^']+)'"),
    re.compile(r"failed to load model (?:from )?'?([^'\s]+\.(?:gguf|bin))'?"),
    re.compile(r"(?:^|\s)(?:-m|--model)\s+(\S+)"),
)
_N_CTX = re.compile(r"\bn_ctx\s+=\s+(\d+)")
_N_CTX_FLAG = re.compile(r"(?:^|\s)(?:-c|--ctx-size|--ctx)\s+(\d+)\b")
_N_CTX_TRAIN = re.compile(r"\bn_ctx_train\s+=\s+(\d+)")
_KV_SIZE = (
    re.compile(rf"KV self size\s+=\s+{_NUM} MiB"),
    re.compile(rf"llama_kv_cache(?:_unified)?: size =\s+{_NUM} MiB \(\s*(\d+) cells"),
)
_ALLOC_BYTES = (
    re.compile(r"failed to allocate (?:\S+ )?buffer of size (\d+)"),
    re.compile(rf"attempted to allocate {_NUM} MB"),
    re.compile(rf"allocating {_NUM} MiB on device"),
)
_KV_FAIL = re.compile(
    r"failed to allocate buffer for kv cache|llama_kv_cache_init\(\) failed|"
    + upto("kv cache", "failed to allocate"),
    re.I,
)
_COMPUTE_FAIL = re.compile(r"failed to allocate compute (?:pp )?buffers?", re.I)
_THREADS = re.compile(r"n_threads\s*=\s*(\d+)(?:\s*\(n_threads_batch\s*=\s*\d+\))?\s*/\s*(\d+)")
_THREADS_FLAG = re.compile(r"(?:^|\s)(?:-t|--threads)\s+(\d+)\b")
_BUILD_TARGET = re.compile(upto(r"\b(?:built|build:)", upto(r"\bwith\b", r"\bfor\s+(Android\s+\S+|\S+)\s*$")))
_LOAD_MS = re.compile(rf"load time\s+=\s+{_NUM} ms")
_PROMPT_TPS = re.compile(upto(r"prompt eval time\s+=", rf"{_NUM_START} tokens per second"))
_EVAL_TPS = re.compile(upto(r"(?<!prompt )eval time\s+=", rf"{_NUM_START} tokens per second"))
_BENCH_ROW = re.compile(r"^\|(.+)\|\s*$")


@dataclass
class BenchRow:
    threads: int
    test: str
    tps: float


@dataclass
class LogFacts:
    model_paths: list[str] = field(default_factory=list)
    n_ctx: int | None = None
    n_ctx_train: int | None = None
    kv_mib: float | None = None
    kv_cells: int | None = None
    failed_alloc_bytes: list[int] = field(default_factory=list)
    kv_alloc_failed: bool = False
    compute_alloc_failed: bool = False
    n_threads: int | None = None
    n_threads_available: int | None = None
    build_target: str | None = None
    load_ms: float | None = None
    prompt_tps: float | None = None
    eval_tps: float | None = None
    bench: list[BenchRow] = field(default_factory=list)


def quote(line: str) -> str:
    line = line.strip()
    return line if len(line) <= MAX_QUOTE else line[: MAX_QUOTE - 1] + "…"


def _first(patterns: tuple[re.Pattern[str], ...], line: str) -> re.Match[str] | None:
    for p in patterns:
        m = p.search(line)
        if m:
            return m
    return None


def scan(lines: list[str]) -> LogFacts:
    facts = LogFacts()
    header: list[str] | None = None
    for line in lines:
        m = _first(_MODEL_PATH, line)
        if m and m.group(1) not in facts.model_paths:
            facts.model_paths.append(m.group(1))
        if (m := _N_CTX.search(line)) or facts.n_ctx is None and (m := _N_CTX_FLAG.search(line)):
            facts.n_ctx = int(m.group(1))
        if m := _N_CTX_TRAIN.search(line):
            facts.n_ctx_train = int(m.group(1))
        if m := _first(_KV_SIZE, line):
            facts.kv_mib = float(m.group(1))
            if m.lastindex and m.lastindex >= 2:
                facts.kv_cells = int(m.group(2))
        if m := _first(_ALLOC_BYTES, line):
            value = float(m.group(1))
            facts.failed_alloc_bytes.append(int(value) if "size" in m.re.pattern else int(value * MIB))
        facts.kv_alloc_failed |= bool(_KV_FAIL.search(line))
        facts.compute_alloc_failed |= bool(_COMPUTE_FAIL.search(line))
        if m := _THREADS.search(line):
            facts.n_threads, facts.n_threads_available = int(m.group(1)), int(m.group(2))
        elif facts.n_threads is None and (m := _THREADS_FLAG.search(line)):
            facts.n_threads = int(m.group(1))
        if facts.build_target is None and (m := _BUILD_TARGET.search(line)):
            facts.build_target = m.group(1).strip()
        if m := _LOAD_MS.search(line):
            facts.load_ms = float(m.group(1))
        if m := _PROMPT_TPS.search(line):
            facts.prompt_tps = float(m.group(1))
        elif m := _EVAL_TPS.search(line):
            facts.eval_tps = float(m.group(1))
        header = _bench_line(line, header, facts.bench)
    return facts


def bench_table_row(line: str, header: list[str] | None) -> tuple[list[str] | None, dict[str, str] | None]:
    """llama-bench's markdown table, a line at a time: (the header to keep, this line's cells by column
    name when it is a result row)."""
    m = _BENCH_ROW.match(line.strip())
    if not m:
        return None, None
    cells = [c.strip() for c in m.group(1).split("|")]
    if "t/s" in cells and "test" in cells:
        return cells, None
    if header is None or len(cells) != len(header) or set(cells[0]) <= set("-: "):
        return header, None
    return header, dict(zip(header, cells, strict=True))


def _bench_line(line: str, header: list[str] | None, rows: list[BenchRow]) -> list[str] | None:
    """Remember the table's header, then read threads / test / t/s of each row."""
    header, row = bench_table_row(line, header)
    if row is not None:
        with contextlib.suppress(KeyError, ValueError, IndexError):
            rows.append(BenchRow(int(row["threads"]), row["test"], float(row["t/s"].split()[0])))
    return header
