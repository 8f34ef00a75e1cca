"""Hostile logs: a 64 MiB log of short lines, long adversarial lines, and every doctor pattern in linear time.

The patterns are found by walking the modules (compiled patterns, and the string patterns handed to
`ev.grep` / `ev.has`), and each is fuzzed with long lines built from the pieces of its own text: repeated
literals, a literal followed by a run of digits, spaces, slashes..., pairs of literals repeated. A pattern
that backtracks (`.*` between literals, a `[0-9]+` retried inside a run of digits, `\\S+` from each character
of a long word) takes seconds on 30 KiB where a linear one takes milliseconds.
"""

from __future__ import annotations

import ast
import importlib
import itertools
import re
import sys
import time
from pathlib import Path

import pytest

import edgepilot.doctor
from edgepilot.doctor.diagnose import diagnose
from edgepilot.doctor.logscan import scan
from rsskit import edgepilot_env, run_measured

DOCTOR = Path(edgepilot.doctor.__file__).resolve().parent
MODULES = [f"edgepilot.doctor.{p.stem}" for p in sorted(DOCTOR.glob("*.py")) if p.stem != "__init__"] + [
    "edgepilot.engine.load_log",
]
LONG = 30 << 10
SHORT = 2 << 10
FILL = ["a", " ", "1", "/", "'", "=", ".", "1.", "|", "-", "x ", ":"]


def _patterns() -> dict[str, re.Pattern[str]]:
    found: dict[str, re.Pattern[str]] = {}
    for name in MODULES:
        mod = importlib.import_module(name)
        for attr, value in vars(mod).items():
            values = value if isinstance(value, tuple) else (value,)
            for i, v in enumerate(values):
                if isinstance(v, re.Pattern) and isinstance(v.pattern, str):
                    found[f"{name}.{attr}[{i}]"] = v
        tree = ast.parse(Path(mod.__file__).read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", "") in ("grep", "has", "search", "match")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found[f"{name}:{node.lineno}"] = re.compile(node.args[0].value, re.I)
    return found


PATTERNS = _patterns()


def _pieces(p: re.Pattern[str]) -> list[str]:
    """Literal pieces of a pattern's text: what a hostile line repeats to make it try and fail."""
    text = re.sub(r"\\[sSdDwWb]", " ", p.pattern)
    words = re.split(r"[()|?*+^$\[\]{}\\!<=]+", text)
    out = {w.strip() for w in words if w.strip()} | {w for w in " ".join(words).split() if w}
    return sorted(out)


def _lines(p: re.Pattern[str], n: int):
    pieces = _pieces(p)
    for f in pieces:
        yield f * (n // len(f) + 1)
        for c in FILL:
            yield f + c * (n // len(c))
            yield (f + c) * (n // (len(f) + len(c)) + 1)
            yield (f + " " + c * 5 + " ") * (n // (len(f) + 7) + 1)
    for f, g in itertools.product(pieces[:14], repeat=2):
        yield (f + " " + g + " ") * (n // (len(f) + len(g) + 2) + 1)
    for c in FILL:
        yield c * n


def _seconds(p: re.Pattern[str], line: str) -> float:
    """The CPU time of one search: a busy machine stretches the wall-clock time, never this."""
    t = time.thread_time()
    p.search(line)
    return time.thread_time() - t


def test_the_patterns_were_found():
    names = " ".join(PATTERNS)
    for expected in ("KILLER_LINE", "_BUILD_TARGET", "_PROMPT_TPS", "AM_BACKGROUND", "CORRUPT", "BUFFER"):
        assert expected in names
    assert len(PATTERNS) > 60


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_every_pattern_is_linear_on_long_hostile_lines(name):
    p = PATTERNS[name]
    slow = []
    for short, long in zip(_lines(p, SHORT), _lines(p, LONG), strict=True):
        # a cubic pattern would take hours on 30 KiB: a short line first tells a slow one without the wait
        if _seconds(p, short) > 0.05:
            slow.append(f"{len(short)} chars: {short[:40]!r}...")
            continue
        took = _seconds(p, long)
        if took > 0.25:
            slow.append(f"{took:.2f} s on {len(long)} chars: {long[:40]!r}...")
    assert not slow, f"{p.pattern!r} backtracks:\n" + "\n".join(slow[:5])


HOSTILE = [
    "build: with for " * 2000,
    "prompt eval time = " + "1" * 30000,
    "eval time = " * 2000 + "1" * 10000,
    "loaded meta data with " * 1500,
    "kv cache " * 3000,
    "lmkd " * 6000,
    "am_kill " * 4000,
    "ActivityManager: Killing " * 1200,
    "gguf_init_from_file" * 1500,
    "x" * 30000 + " model buffer size = 1 MiB",
    "1" * 30000,
]


def test_scan_and_rules_stay_fast_on_hostile_lines():
    t = time.thread_time()  # CPU time: a busy machine does not stretch it
    facts = scan(HOSTILE)
    d = diagnose(HOSTILE, root=None)
    assert time.thread_time() - t < 10, "did not hang"
    assert facts.prompt_tps is None and d.causes


def test_the_rewritten_patterns_still_find_what_they_did():
    lines = [
        "build: 1 (abc) with cc (GCC) 12 for aarch64-linux-gnu",
        "prompt eval time =  12.50 ms / 10 tokens (1.25 ms per token, 800.00 tokens per second)",
        "       eval time =  100.00 ms / 9 runs (11.1 ms per token, 90.00 tokens per second)",
        "loaded meta data with 30 key-value pairs and 272 tensors from /m/a.gguf (version GGUF V3)",
        "llama_kv_cache: kv cache: failed to allocate 2 GiB",
    ]
    f = scan(lines)
    assert f.build_target == "aarch64-linux-gnu"
    assert (f.prompt_tps, f.eval_tps) == (800.0, 90.0)
    assert f.model_paths == ["/m/a.gguf"]
    assert f.kv_alloc_failed


def _run(args: list[str], stdin=None) -> tuple[int, str, float, float]:
    """Run the CLI in a child process: (exit code, stderr, seconds, peak RSS in MiB)."""
    t = time.perf_counter()
    argv = [sys.executable, "-m", "edgepilot", *args]
    code, err, rss = run_measured(argv, stdin=stdin, env=edgepilot_env())
    return code, err, time.perf_counter() - t, rss


@pytest.fixture(scope="module")
def big_log(tmp_path_factory) -> Path:
    """64 MiB of short lines, with a kill at the end (what the diagnosis must still see)."""
    path = tmp_path_factory.mktemp("logs") / "big.log"
    chunk = b"".join(b"ok %d\n" % i for i in range(100_000))
    with path.open("wb") as f:
        f.write(b"llama_model_loader: loaded meta data with 3 key-value pairs from /m/x.gguf\n")
        while f.tell() < 64 << 20:
            f.write(chunk)
        f.write(b"lowmemorykiller: Kill 'llama-cli' (1234), adj 0, to free 2000000kB\n")
    return path


def test_a_64_mib_log_costs_seconds_and_little_memory(big_log):
    code, err, seconds, rss = _run(["doctor", "--log", str(big_log), "--json"])
    assert code == 0, err
    assert seconds < 20, "did not hang"
    assert rss < 100, f"peak RSS {rss:.0f} MiB"


def test_a_64_mib_log_on_stdin_too(big_log):
    with big_log.open("rb") as f:
        code, err, seconds, rss = _run(["doctor", "--log", "-", "--json"], stdin=f)
    assert code == 0, err
    assert seconds < 20, "did not hang"
    assert rss < 100, f"peak RSS {rss:.0f} MiB"


def test_the_end_of_a_big_log_is_still_diagnosed(big_log):
    from edgepilot.doctor.evidence import read_log

    lines = read_log(big_log)
    assert len(lines) < 30_000
    assert any("bytes of the log not read" in ln for ln in lines)
    d = diagnose(lines, exit_code=137, root=None)
    assert d.causes[0].id == "killed-by-system"
    assert any("lowmemorykiller" in e for e in d.causes[0].evidence)


def test_one_long_hostile_line_through_the_cli(tmp_path):
    log = tmp_path / "one.log"
    log.write_text("\n".join(HOSTILE) + "\n")
    code, err, seconds, _ = _run(["doctor", "--log", str(log), "--json"])
    assert code == 0, err
    assert seconds < 20, "did not hang"
