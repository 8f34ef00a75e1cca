"""One shared server for the API tests: SmolLM2, a small context, an API key, a short queue."""

from __future__ import annotations

import pytest
from servekit import SHARED_MAX_QUEUE, SHARED_MAX_TOKENS, Served, start_server, write_device


@pytest.fixture(scope="session")
def served(smollm_path, tmp_path_factory) -> Served:
    tmp = tmp_path_factory.mktemp("serve-shared")
    write_device(tmp / "device")  # the memory gate watches a calm device: real pressure must not flake tests
    args = ["--ctx", "512", "--max-queue", str(SHARED_MAX_QUEUE), "--max-tokens", str(SHARED_MAX_TOKENS)]
    args += ["--max-body", "64KiB", "--watch-root", str(tmp / "device")]
    server = start_server(smollm_path, *args, tmp=tmp)
    yield server
    code = server.stop()
    assert code == 0, server.stderr()
