"""Two tests at a time (`pytest -n 2`, pytest-xdist), each file on one worker (the packaged and GPU lanes'
files together), and the tests that need the machine to themselves run alone.

A test is *solo* when it keeps both cores busy (lavapipe, qemu, llama.cpp on every core: a second test beside
it gains nothing and slows both) or when what it asserts hangs on time or on the machine's load (speed
measured and compared, a CPU quota, a memory limit, deadlines of a few seconds). The rest (parsers, refusals,
short model runs, servers waiting on a socket) run two at a time.

Workers take a shared lock on one lock file for each test and a solo test takes it exclusively, from its first
fixture to its last teardown; a turnstile lock in front keeps a waiting solo test from being overtaken
forever. Without xdist (plain `pytest`) there is one process and no lock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
LOCKS_ENV = "EDGEPILOT_TEST_LOCKS"

# path under tests/ -> why it runs alone
SOLO = {
    "packaged": "Debian's llama.cpp and lavapipe in one shared root, on both cores",
    "gpu": "lavapipe on both cores; GPU checks with deadlines",
    "arm": "qemu-user running llama.cpp on two threads",
    "bench": "speed measured and compared, CPU quotas",
    "speculation": "speed-ups measured against plain generation",
    "tuned": "profiles decided by measuring",
    "cluster/test_link_speed.py": "link speeds measured against predictions",
    "cluster/test_link_verdict.py": "a verdict from two measured speeds",
    "cluster/test_cluster_property.py": "measured transfer times",
    "cluster/test_cluster_cgroup.py": "a memory limit",
    "cluster/test_cluster_gemma.py": "memory limits",
    "android/test_android_cli.py": "a memory limit",
    "chat/test_chat_resume.py": "kills timed against a measured turn",
    "chat/test_chat_slide.py": "llama.cpp on both cores",
    "serve/test_short_lane.py": "a reply within 5 s while a long one runs",
    "serve/test_serve_hostile.py": "connection deadlines of a few seconds while a model generates",
    "serve/test_serve_restart.py": "a watchdog's timings",
    "serve/test_serve_thermal.py": "throttling timed",
    "serve/test_serve_concurrency.py": "requests timed side by side",
    "engine/test_turns.py": "a wait of a few main-lane steps of 20 ms",
    "engine/test_cpu_check.py": "llama.cpp on both cores, crash timings",
    "engine/test_thermal_guard.py": "throttling timed",
    "plan/test_survival.py": "a memory limit",
    "plan/test_budget_and_fit.py": "a memory limit",
    "doctor/test_e2e_cgroup.py": "a memory limit",
    "doctor/test_memory_evidence.py": "a memory limit",
    "doctor/test_memory_fixes.py": "a memory limit",
    "device/test_gpu_check_timeouts.py": "deadlines of a few seconds",
    # llama.cpp on both cores, measured 3-99x slower beside another such test in a `-n 2` run (its threads
    # wait on each other at every step while the other test holds a core)
    "engine/test_background_run.py": "llama.cpp on both cores",
    "engine/test_greedy.py": "llama.cpp on both cores",
    "engine/test_run.py": "llama.cpp on both cores",
    "chat/test_chat_pty.py": "llama.cpp on both cores",
    "chat/test_chat_save.py": "llama.cpp on both cores",
    "cli/test_widths.py": "llama.cpp on both cores",
    "cli/test_readme_check.py": "llama.cpp on both cores",
    "plan/test_touched_vs_reserved.py": "llama.cpp on both cores",
    "plan/test_context_limits.py": "llama.cpp on both cores",
    "serve/test_serve_cache.py": "llama.cpp on both cores",
    "gguf/test_one_read.py": "llama.cpp on both cores",
}
# the packaged and GPU lanes share one root and its installed checkout: one worker sets it up once
SHARED_ROOT = ("packaged", "gpu")


def _relative(item: pytest.Item) -> str:
    return Path(str(item.path)).resolve().relative_to(TESTS).as_posix()


def _solo(relative: str) -> bool:
    return any(relative == key or relative.startswith(key + "/") for key in SOLO)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "solo: runs with no other test beside it (tests/sidebyside.py)")
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None):
        # the controller: one folder of locks for this run, handed to its workers through the environment
        os.environ[LOCKS_ENV] = tempfile.mkdtemp(prefix="edgepilot-test-locks-")


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and LOCKS_ENV in os.environ:
        shutil.rmtree(os.environ.pop(LOCKS_ENV), ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _solo(_relative(item)):
            item.add_marker(pytest.mark.solo)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """xdist's by-file scheduling, with the two lanes sharing a root as one unit (a scheduler, since
    `xdist_group` marks are lost on pytest 9.2's node ids)."""
    from xdist.scheduler import LoadFileScheduling

    class ByFileLanesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]  # tests/<folder>/<file>.py
            folder = path.split("/")[1] if path.count("/") >= 2 else ""
            return "the shared root" if folder in SHARED_ROOT else path

    return ByFileLanesTogether(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    folder = os.environ.get(LOCKS_ENV)
    if not folder:
        yield
        return
    solo = item.get_closest_marker("solo") is not None
    with open(Path(folder) / "turnstile", "a") as turnstile, open(Path(folder) / "machine", "a") as machine:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(machine, fcntl.LOCK_EX if solo else fcntl.LOCK_SH)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(machine, fcntl.LOCK_UN)
