"""serve survives its worker (issue 41, part 3): a conversation of 8 requests on a real `edgepilot serve`
(SmolLM2, on both engines), the worker SIGKILLed after the 4th; the restarted worker gets the main lane's
cache back from serve's folder, so the 5th request processes about as many new tokens as the 4th did
(before, its whole history: every token of the conversation). A kept cache that no longer matches its header,
and one whose load killed the worker, are not loaded: the worker starts with an empty cache and answers."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from servekit import Served, start_server, write_device

QUESTION = "Question {}: name a country in {} and one thing it is known for, in one sentence."
REGIONS = ["Europe", "Asia", "Africa", "South America", "North America", "Oceania", "the Caribbean", "Europe"]


@pytest.fixture(scope="module", params=["inprocess", "tools"])
def kept(request, smollm_path, tmp_path_factory) -> Served:
    """edgepilot's worker (the state written by llama.cpp in it), or llama-server (its main slot saved)."""
    tmp = tmp_path_factory.mktemp("serve-kept")
    write_device(tmp / "device")
    env = {"EDGEPILOT_DATA_DIR": str(tmp / "data")}
    args = ["--ctx", "2048", "--watch-root", str(tmp / "device"), "--engine", request.param]
    server = start_server(smollm_path, *args, tmp=tmp, env=env)
    server.folder = tmp / "data" / "serve-cache" / smollm_path.name  # type: ignore[attr-defined]
    yield server
    assert server.stop() == 0, server.stderr()


def _ask(served: Served, messages: list[dict], i: int) -> dict:
    messages.append({"role": "user", "content": QUESTION.format(i + 1, REGIONS[i])})
    code, body, _ = served.chat({"messages": messages, "max_tokens": 24, "temperature": 0})
    assert code == 200, body
    messages.append({"role": "assistant", "content": body["choices"][0]["message"]["content"]})
    return body


def _ask_and_keep(served: Served, messages: list[dict], i: int) -> dict:
    """_ask, then wait for that request's cache on disk (written once the reply is out): the kept state
    holds its prompt and its answer (the answer's last token may not be in the cache yet)."""
    header = served.folder / "main.json"  # type: ignore[attr-defined]
    body = _ask(served, messages, i)
    usage = body["usage"]
    total = usage["prompt_tokens"] + usage["completion_tokens"]
    deadline = time.monotonic() + 30
    while not (header.exists() and abs(json.loads(header.read_text())["n_tokens"] - total) <= 1):
        assert time.monotonic() < deadline, f"the cache was never kept: {header.read_text()}, {usage}"
        time.sleep(0.1)
    return body


def _kill_worker(served: Served) -> dict:
    old = served.status()["worker"]["pid"]
    os.kill(old, signal.SIGKILL)
    return served.ready_again(old)


def test_after_a_worker_kill_the_next_request_processes_only_its_new_tokens(kept):
    messages: list[dict] = [{"role": "system", "content": "You answer in one short sentence."}]
    bodies = []
    for i in range(4):
        bodies.append(_ask_and_keep(kept, messages, i))
    _kill_worker(kept)
    for i in range(4, 8):
        bodies.append(_ask(kept, messages, i))
    fourth, fifth = bodies[3], bodies[4]
    new_4, new_5 = fourth["timings"]["prompt_n"], fifth["timings"]["prompt_n"]
    said = f"4th: {fourth['timings']}, 5th: {fifth['timings']}"
    # the 5th's history (the 4th's prompt and answer) came back from disk: it processed only its new tokens
    assert fifth["usage"]["prompt_tokens_details"]["cached_tokens"] >= fourth["usage"]["prompt_tokens"], said
    assert new_5 <= 1.5 * new_4, said
    assert all(b["usage"]["prompt_tokens"] - b["timings"]["prompt_n"] > 0 for b in bodies[5:]), bodies
    assert "the main lane's cache came back from disk" in kept.stderr()


def test_a_kept_cache_that_does_not_match_its_header_is_not_loaded(kept):
    messages: list[dict] = []
    _ask_and_keep(kept, messages, 0)
    (state,) = kept.folder.glob("main-*.state")  # type: ignore[attr-defined]
    with state.open("r+b") as f:  # one byte changed in the middle of the cache
        f.seek(state.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    _kill_worker(kept)
    body = _ask(kept, messages, 1)
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, body["usage"]
    assert "the kept cache is not used: its state does not match its header" in kept.stderr()


def test_a_cache_whose_load_killed_the_worker_is_dropped(kept):
    messages: list[dict] = []
    _ask_and_keep(kept, messages, 2)
    folder: Path = kept.folder  # type: ignore[attr-defined]
    (folder / "restoring").write_text("")  # as a worker that died inside llama.cpp's load leaves it
    _kill_worker(kept)
    body = _ask(kept, messages, 3)
    assert "the kept cache was dropped: the last worker died while loading it" in kept.stderr()
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, body["usage"]
    assert not (folder / "restoring").exists()
