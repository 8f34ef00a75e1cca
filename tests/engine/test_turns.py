"""How the main lane and the short lane take turns (engine/turns.py), with real threads: a short request
waits for at most the main lane's current step, the main lane never steps while a short request runs, and
between two short requests the main lane gets a step."""

from __future__ import annotations

import threading
import time

from edgepilot.engine.turns import FIRST_CHUNK, MIN_CHUNK, Turns

STEP = 0.02


def _main_lane(turns: Turns, log: list[tuple[str, float]], stop: threading.Event) -> None:
    while not stop.is_set():
        with turns.main_step():
            log.append(("main", time.monotonic()))
            time.sleep(STEP)


def _short(turns: Turns, log: list[tuple[str, float]], seconds: float) -> float:
    t0 = time.monotonic()
    with turns.short_request():
        waited = time.monotonic() - t0
        log.append(("short-start", time.monotonic()))
        time.sleep(seconds)
        log.append(("short-end", time.monotonic()))
    return waited


def test_a_short_request_waits_one_step_and_the_main_lane_waits_for_it():
    turns, log, stop = Turns(), [], threading.Event()
    main = threading.Thread(target=_main_lane, args=(turns, log, stop))
    main.start()
    time.sleep(0.1)
    waited = _short(turns, log, 0.2)
    time.sleep(0.1)
    stop.set()
    main.join()
    assert waited < 5 * STEP, waited  # one step of the main lane, not all of them
    start = next(t for kind, t in log if kind == "short-start")
    end = next(t for kind, t in log if kind == "short-end")
    assert not [t for kind, t in log if kind == "main" and start <= t <= end]  # no step while it ran
    assert [t for kind, t in log if kind == "main" and t > end]  # and the main lane went on afterwards
    assert turns.short_requests == 1 and turns.main_pauses >= 1


def test_the_main_lane_gets_a_step_between_short_requests():
    turns, log, stop = Turns(), [], threading.Event()
    main = threading.Thread(target=_main_lane, args=(turns, log, stop))
    main.start()
    time.sleep(0.05)
    shorts = [threading.Thread(target=_short, args=(turns, log, 0.05)) for _ in range(4)]
    for t in shorts:
        t.start()
    for t in shorts:
        t.join()
    stop.set()
    main.join()
    kinds = [kind for kind, _ in log]
    ends = [i for i, kind in enumerate(kinds) if kind == "short-end"]
    for a, b in zip(ends, ends[1:], strict=False):
        assert "main" in kinds[a:b], kinds  # a stream of short requests never stops the main lane


def test_prompt_chunks_follow_the_measured_speed():
    turns = Turns(step_seconds=0.25)
    assert turns.chunk(512) == FIRST_CHUNK
    turns.prompt_step(100, 0.5)  # 200 tokens a second
    assert turns.chunk(512) == 50
    turns.prompt_step(10, 10.0)  # a slow device: never below the floor
    assert turns.chunk(512) == MIN_CHUNK
    turns.prompt_step(10_000, 1.0)
    assert turns.chunk(512) == 512
    decoded: list[list[int]] = []
    turns.prompt_in_steps(list(range(1200)), 512, decoded.append)
    assert [len(c) for c in decoded][:2] == [512, 512] and sum(map(len, decoded)) == 1200
