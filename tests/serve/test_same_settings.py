"""One settings decision: `fit`, `run` and `serve` show and use the same settings for the same model, device
and tuned profile."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from servekit import start_server

from edgepilot.tuned.decide import RUN_CTX
from edgepilot.tuned.identity import device_id, model_id
from edgepilot.tuned.pinning import allowed_cpus
from edgepilot.tuned.profiles import Profile, save_profile

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


def tuned_profile(model: Path) -> Profile:
    device, key = device_id(), model_id(model)
    return Profile(
        device_fingerprint=device.fingerprint,
        device=device.description,
        model_key=key.key,
        model_name=key.name,
        model_size=key.size,
        n_threads=1,
        n_threads_batch=2,
        cpus=[allowed_cpus()[-1]],
        n_ubatch=256,
        flash_attn=True,
        gen_tps=1.0,
        prompt_tps=1.0,
        created="2026-11-30T00:00:00Z",
    )


@pytest.mark.parametrize("with_profile", [False, True], ids=["defaults", "tuned-profile"])
def test_fit_run_and_serve_use_the_same_settings(smollm_path, own_data_dir, tmp_path, with_profile):
    if with_profile:
        save_profile(tuned_profile(smollm_path))
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
