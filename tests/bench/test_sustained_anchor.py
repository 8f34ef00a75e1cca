"""The sustained bench anchored on llama.cpp's own llama-bench: a cgroup v1 CPU quota tightened half-way
through a real `edgepilot bench --sustained` shows as a fall at the time it came, and the steady speed after
it is the speed llama-bench measures under the same quota.

llama-bench runs in a twin cgroup (the same quota, tightened at the same moment) during the windows the steady
speed is taken from (the last third): on this shared machine the speed under a fixed quota still drifts by
15-20 % within a minute (other work changes what each token costs), and measured side by side both see the
same drift. Each gets its own fifth of a CPU; a shared cgroup would halve both.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nativekit import native_tool

CPU_CGROUP = Path("/sys/fs/cgroup/cpu")
DONE = re.compile(r"window (\d+)/(\d+)")
TIGHT = "20000"  # 20 % of one CPU per 100 ms period
N_GEN = 128  # the sustained bench's context (127 tokens, then a reset): the same positions decoded


def _group(name: str) -> Path:
    group = CPU_CGROUP / f"{name}-{os.getpid()}"
    group.mkdir()
    (group / "cpu.shares").write_text("8192")  # the busy machine's other work does not blur the halves
    (group / "cpu.cfs_quota_us").write_text("-1")
    return group


def _remove(group: Path) -> None:
    for pid in (group / "cgroup.procs").read_text().split():
        (CPU_CGROUP / "cgroup.procs").write_text(pid)
    group.rmdir()


def _joining(group: Path):
    return lambda: (group / "cgroup.procs").write_text(str(os.getpid()))


@pytest.mark.skipif(not (CPU_CGROUP / "cpu.cfs_quota_us").exists(), reason="needs cgroup v1's cpu controller")
def test_a_quota_tightened_half_way_falls_then_holds_llama_benchs_speed(smollm_path, data_dir):
    llama_bench = native_tool("llama-bench")
    ours, theirs = _group("edgepilot-anchor"), _group("edgepilot-anchor-cpp")
    try:
        env = {**os.environ, "EDGEPILOT_PROGRESS_SECONDS": "0.5", "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, "-m", "edgepilot", "bench", str(smollm_path)]
        cmd += ["--sustained", "40s", "--window", "4", "-t", "1", "--json"]
        child = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, preexec_fn=_joining(ours)
        )
        cpp_cmd = [str(llama_bench), "-m", str(smollm_path), "-p", "0", "-n", str(N_GEN)]
        cpp_cmd += ["-t", "1", "-r", "2"]  # about 12 s at a fifth of a CPU: the last third's windows
        # bench's settings (bench_settings): batch 2048/512, no flash attention, mmap, repack, f16 KV
        cpp_cmd += ["-b", "2048", "-ub", "512", "-fa", "0", "-lm", "mmap", "--repack", "1"]
        cpp_cmd += ["-ctk", "f16", "-ctv", "f16", "-o", "json"]
        cpp: list[subprocess.Popen] = []
        tightened: list[str] = []

        def watch() -> None:
            for line in child.stderr:
                found = DONE.search(line.decode(errors="replace"))
                began = int(found.group(1)) if found else 0
                if began >= 6 and not tightened:  # the sixth of ten windows began
                    for group in (ours, theirs):
                        (group / "cpu.cfs_quota_us").write_text(TIGHT)
                    tightened.append(line)
                if began >= 8 and not cpp:  # the steady speed's windows (the last third) began
                    cpp.append(
                        subprocess.Popen(
                            cpp_cmd,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL,
                            preexec_fn=_joining(theirs),
                        )
                    )

        reader = threading.Thread(target=watch, daemon=True)
        reader.start()
        out, _ = child.communicate(timeout=600)
        reader.join(timeout=10)
        assert child.returncode == 0
        assert cpp, "the progress never reached the second half"
        cpp_out, _ = cpp[0].communicate(timeout=600)
        assert cpp[0].returncode == 0
    finally:
        for group in (ours, theirs):
            _remove(group)

    report = json.loads(out)
    windows = report["windows"]
    speeds = [w["tokens_per_s"] for w in windows]
    assert len(windows) == 10
    # the drop, and the time it came: the sixth window, when the quota was tightened. Unbound, the speed here
    # swings by 15 % between windows (other work): the fifth may already be 10 % slow and start the fall.
    assert report["drop_pct"] > 40 and report["steady_ts"] < 0.6 * report["first_ts"], speeds
    assert report["fell_at_s"] in (windows[4]["start_s"], windows[5]["start_s"]), speeds
    assert all(s < 0.6 * report["first_ts"] for s in speeds[6:]), speeds
    (row,) = json.loads(cpp_out)
    assert row["n_prompt"] == 0 and row["n_gen"] == N_GEN and row["n_threads"] == 1
    # within 10 % of llama-bench's own samples: under the quota its two repetitions differ by up to 18 % here
    # (8.47 and 7.07 t/s in one CI run, where ours held 8.57: 1.10x their mean), so the band is theirs
    samples = row["samples_ts"]
    ratio = report["steady_ts"] / row["avg_ts"]
    assert 0.9 * min(samples) <= report["steady_ts"] <= 1.1 * max(samples), (ratio, speeds, samples)
