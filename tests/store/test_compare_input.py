"""`compare`'s input, checked before anything is measured (issue 25).

- A --text that cannot fill one chunk of --ppl-ctx tokens (empty, whitespace only, two characters) hung for
  ever: the context-filling loop never grew on a text of one token. Now it is one line within seconds, before
  a model loads; a text long in bytes but short in tokens is refused by the child (in-process) or by
  llama-perplexity (tools), one line too.
- Two files with vocabularies of the same size but different tokens were compared and given a KL
  divergence. Now compare refuses unless the token strings, merges, tokenizer model and pre-tokenizer are
  the same; here a copy of the real SmolLM2 with two token strings swapped.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edgepilot.gguf.tokenizer_id import differences, tokenizer_digests

MAX_SECONDS = 30  # the child imports click and rich; a hang is what this guards against
EDGEPILOT = [sys.executable, "-m", "edgepilot"]


def compare(*args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    out = subprocess.run(
        [*EDGEPILOT, "compare", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return out, time.monotonic() - start


HEARTBEAT = re.compile(r"^compare\b.* · \d+ s$")  # progress on a slow step (a loaded machine)


def last_line(out: subprocess.CompletedProcess[str]) -> str:
    said = [ln for ln in out.stderr.strip().splitlines() if not HEARTBEAT.match(ln)]
    lines = [ln for ln in said if not ln.startswith(("reference =", "["))]
    assert out.returncode == 2 and len(lines) == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize(
    "text, word",
    [("", "has no text"), (" \n\t \n" * 500, "has no text"), ("ab", "has 2 bytes"), ("é", "has 2 bytes")],
    ids=["empty", "whitespace", "two-characters", "one-wide-character"],
)
def test_a_text_shorter_than_one_chunk_is_one_line_before_loading(smollm_path, tmp_path, text, word):
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    out, seconds = compare(str(smollm_path), "--text", str(path), timeout=MAX_SECONDS * 2)
    line = last_line(out)
    assert word in line and "256 tokens" in line, line  # one chunk of --ppl-ctx (256 by default)
    assert seconds < MAX_SECONDS
    assert "[1/1]" not in out.stderr  # refused before any measuring


@pytest.mark.parametrize("engine", ["inprocess", "tools"])
def test_a_text_of_enough_bytes_but_too_few_tokens_is_one_line(smollm_path, tmp_path, engine):
    if engine == "tools":
        from nativekit import native_tool

        native_tool("llama-perplexity")
    path = tmp_path / "text.txt"
    path.write_text("word " * 60, encoding="utf-8")  # 300 bytes, 61 tokens
    out, seconds = compare(str(smollm_path), "--text", str(path), "--engine", engine)
    line = last_line(out)
    assert "61 tokens" in line, line
    assert seconds < 90


def _swapped_copy(source: Path, target: Path) -> tuple[str, str]:
    """A copy of a real model whose vocabulary has two token strings of the same length swapped (the same
    size, the same offsets; only which id means which text changes), written with the gguf package."""
    import gguf

    shutil.copyfile(source, target)
    reader = gguf.GGUFReader(target, "r+")
    field = reader.fields["tokenizer.ggml.tokens"]
    parts = [field.parts[i] for i in field.data]
    by_length: dict[int, int] = {}
    for i, part in enumerate(parts[1000:], 1000):
        j = by_length.setdefault(len(part), i)
        if j != i and bytes(part) != bytes(parts[j]):
            a, b = bytes(parts[j]), bytes(part)
            parts[j][:], parts[i][:] = part.copy(), parts[j].copy()
            reader.data.flush()
            return a.decode(), b.decode()
    raise AssertionError("no two tokens of one length")


@pytest.fixture(scope="module")
def swapped(smollm_path, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("vocab") / "smollm-swapped.gguf"
    _swapped_copy(smollm_path, target)
    return target


def test_the_swapped_copy_keeps_its_vocabulary_size(smollm_path, swapped):
    import gguf

    sizes = [len(gguf.GGUFReader(p).fields["tokenizer.ggml.tokens"].data) for p in (smollm_path, swapped)]
    assert sizes[0] == sizes[1] > 40000
    assert os.path.getsize(smollm_path) == os.path.getsize(swapped)


def test_tokenizer_digests_tell_swapped_tokens_apart(smollm_path, swapped, gemma_path, tmp_path):
    original = tokenizer_digests(smollm_path)
    twin = tmp_path / "twin.gguf"
    shutil.copyfile(smollm_path, twin)
    assert differences(original, tokenizer_digests(twin)) == []
    assert differences(original, tokenizer_digests(swapped)) == ["tokens"]
    assert "tokens" in differences(original, tokenizer_digests(gemma_path))


def test_compare_refuses_two_tokenizers_of_one_vocabulary_size(smollm_path, swapped):
    out, seconds = compare(str(smollm_path), str(swapped), timeout=MAX_SECONDS * 2)
    line = last_line(out)
    assert "does not share the tokenizer" in line and "tokens differ" in line, line
    assert "KL" not in out.stdout and seconds < MAX_SECONDS
