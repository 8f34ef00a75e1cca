"""One settings decision: `fit`, `run` and `serve` show and use the same settings for the same model, device
and tuned profile."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from servekit import start_server

from edgepilot.tuned.decide import RUN_CTX
from edgepilot.tuned.pinning import allowed_cpus
from edgepilot.tuned.profiles import save_profile
from profilekit import make_profile

SETTINGS = (
    "n_ctx", "n_batch", "n_ubatch", "type_k", "type_v", "flash_attn", "use_mmap", "n_threads",
    "n_threads_batch", "repack",
)  # fmt: skip


def edgepilot_json(*args: str, timeout: float = 300) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "edgepilot", *args, "--json"], capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def pick(settings: dict) -> dict:
    return {k: settings[k] for k in SETTINGS}


@pytest.fixture
def own_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(tmp_path / "data"))  # subprocesses inherit it
    return tmp_path / "data"


@pytest.mark.parametrize("with_profile", [False, True], ids=["defaults", "tuned-profile"])
def test_fit_run_and_serve_use_the_same_settings(smollm_path, own_data_dir, tmp_path, with_profile):
    if with_profile:
        save_profile(make_profile(smollm_path, cpus=[allowed_cpus()[-1]]))
    planned = edgepilot_json("fit", str(smollm_path))
    ran = edgepilot_json("run", str(smollm_path), "-p", "Hi", "-n", "2", "--temp", "0")
    server = start_server(smollm_path, tmp=tmp_path, key=None)
    try:
        served = server.info["settings"]
    finally:
        assert server.stop() == 0, server.stderr()
    assert pick(planned["settings"]) == pick(ran["settings"]) == pick(served)
    assert planned["settings"]["n_ctx"] == RUN_CTX  # the run's context, not the whole trained one
    assert planned["max_ctx"] > RUN_CTX  # the largest that fits is still reported
    if with_profile:
        s = planned["settings"]
        assert (s["n_threads"], s["n_threads_batch"], s["n_ubatch"], s["flash_attn"]) == (1, 2, 256, True)
        assert planned["llama_cpp_args"][:3] == ["taskset", "-c", str(allowed_cpus()[-1])]
        assert any("tuned profile" in n for n in planned["notes"])
