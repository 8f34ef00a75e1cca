"""A real `edgepilot chat --max-temp` whose device tree's CPU zone the test heats between two answers, then
cools: the next answer starts on half the threads (said once), the one after on all of them again, and
`--json` records both switches with the counts llama.cpp reported."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

DEADLINE = 300.0


def _heat(root: Path, celsius: float) -> None:
    (root / "sys/class/thermal/thermal_zone0/temp").write_text(f"{int(celsius * 1000)}\n")


def _wait_for(lines: list[str], text: str, count: int) -> None:
    end = time.monotonic() + DEADLINE
    while sum(text in line for line in lines) < count:
        assert time.monotonic() < end, "".join(lines)[-3000:]
        time.sleep(0.1)


def test_a_chat_that_heats_between_answers_moves_to_fewer_threads_and_back(smollm_path, tmp_path):
    root = tmp_path / "device"
    (root / "sys/class/thermal/thermal_zone0").mkdir(parents=True)
    (root / "sys/class/thermal/thermal_zone0/type").write_text("soc_thermal\n")
    _heat(root, 50)
    argv = [sys.executable, "-m", "edgepilot", "chat", str(smollm_path), "--temp", "0", "-n", "6"]
    argv += ["--ctx", "1024", "--threads", "2", "--max-temp", "70", "--watch-root", str(root), "--json"]
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        for n, (message, celsius) in enumerate((("hi", 75.5), ("and again", 64), ("once more", None)), 1):
            proc.stdin.write(message + "\n")
            proc.stdin.flush()
            _wait_for(lines, "[prompt ", n)  # answered: the chat waits for the next line
            if celsius is not None:
                _heat(root, celsius)
        proc.stdin.close()
        out = proc.stdout.read()
        assert proc.wait(DEADLINE) == 0, "".join(lines)[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(10)
    err = "".join(lines)
    assert err.count("thermal: CPU at 75.5 °C, above --max-temp 70: generating on 1 thread") == 1, err
    assert err.count("thermal: CPU down to 64 °C: generating on 2 threads again") == 1, err
    assert err.index("thermal: CPU at") > err.index("[prompt ")  # after the first answer, before the second
    t = json.loads(out)["thermal"]
    assert [(s["to"], s["at_token"], s["n_threads"]) for s in t["switches"]] == [
        ("fewer", 0, 1),
        ("full", 0, 2),
    ]
    assert (t["peak_c"], t["celsius"], t["hot"], t["sensor"]) == (75.5, 64.0, False, "soc_thermal")
