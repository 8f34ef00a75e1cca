"""`edgepilot serve` warms the page cache with the model before the worker loads it; --no-preload skips it."""

from __future__ import annotations

from servekit import start_server


def test_the_shared_server_preloaded_its_model(served, smollm_path):
    size_mib = smollm_path.stat().st_size / 2**20
    assert f"preloaded {size_mib:.1f} MiB" in served.stderr()


def test_no_preload_is_honoured(smollm_path, tmp_path):
    server = start_server(smollm_path, "--ctx", "256", "--no-preload", tmp=tmp_path)
    try:
        assert server.info["model_name"] == smollm_path.name
    finally:
        assert server.stop() == 0
    assert "preload" not in server.stderr()
