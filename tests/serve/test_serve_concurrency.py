"""Many clients at once: each is answered or told 503 + Retry-After (the queue is bounded); none hangs."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import openai
from servekit import SHARED_MAX_QUEUE

N_CLIENTS = 6


def _ask(served, i: int) -> tuple[str, object]:
    client = served.client(timeout=120)
    try:
        r = client.chat.completions.create(
            model="any", messages=[{"role": "user", "content": f"Count to {i + 3}."}], max_tokens=16
        )
        return "ok", r.choices[0].message.content
    except openai.APIStatusError as exc:
        return str(exc.status_code), exc.response.headers.get("retry-after")


def test_concurrent_clients_are_answered_or_turned_away(served):
    t0 = time.monotonic()
    with ThreadPoolExecutor(N_CLIENTS) as pool:
        results = list(pool.map(lambda i: _ask(served, i), range(N_CLIENTS)))
    assert time.monotonic() - t0 < 240
    answered = [r for r in results if r[0] == "ok"]
    turned_away = [r for r in results if r[0] == "503"]
    assert len(answered) + len(turned_away) == N_CLIENTS, results  # nothing else, nothing lost
    assert answered and all(isinstance(text, str) for _, text in answered)
    assert all(retry is not None and int(retry) >= 1 for _, retry in turned_away)
    assert len(answered) >= 1 + SHARED_MAX_QUEUE or not turned_away  # the queue was used before turning away
    status = served.status()["requests"]
    assert status["in_flight"] == 0 and status["waiting"] == 0
    if turned_away:
        assert status["busy"] >= len(turned_away)


def test_sequential_requests_after_a_burst_are_answered(served):
    client = served.client()
    for _ in range(2):
        r = client.completions.create(model="any", prompt="Hello", max_tokens=4)
        assert r.choices[0].text is not None
