"""One settings decision: one thread default, one context default, serve's reserve, --no-repack
(tests/serve/test_same_settings.py: fit, run and serve agree)."""

from __future__ import annotations

from edgepilot.plan.fit import read_device
from edgepilot.plan.requested import RequestedSettings
from edgepilot.tuned.decide import RUN_CTX, decide


def test_one_thread_default_from_the_big_cores(gemma_path, devices):
    # Snapdragon 8 Gen 2: 1 Cortex-X3 + 4 performance cores ahead of 3 Cortex-A510
    root = devices / "sd8gen2-xiaomi13pro"
    device = read_device(root)
    assert decide(gemma_path, root=root).settings.n_threads == len(device.cpu.big_cores) == 5
    assert decide(gemma_path, RequestedSettings(n_threads=3), root=root).settings.n_threads == 3


def test_the_context_grows_with_what_the_prompt_needs(gemma_path):
    assert decide(gemma_path).settings.n_ctx == RUN_CTX
    assert decide(gemma_path, ctx_needed=RUN_CTX + 1000).settings.n_ctx == RUN_CTX + 1000
    assert decide(gemma_path, RequestedSettings(n_ctx=512)).settings.n_ctx == 512


def test_serve_counts_its_http_stack_in_the_peak(gemma_path):
    plain = decide(gemma_path).plan.memory
    served = decide(gemma_path, reserve_bytes=24 << 20).plan.memory
    assert served.peak_rss_bytes - plain.peak_rss_bytes == 24 << 20
    assert served.runtime_bytes - plain.runtime_bytes == 24 << 20


def test_no_repack_reaches_the_plan_and_the_command_line(gemma_path):
    plan = decide(gemma_path, RequestedSettings.from_flags(no_repack=True)).plan
    assert plan.settings.repack is False and "--no-repack" in plan.llama_cpp_args
    assert "--no-repack" in plan.edgepilot_args
    no_mmap = decide(gemma_path, RequestedSettings.from_flags(no_mmap=True)).plan
    assert no_mmap.llama_cpp_args[-2:] == ["-lm", "none"]  # this llama.cpp's tools have no --no-mmap
