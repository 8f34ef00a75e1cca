"""Done-when of issue 23 for Gemma 3 270M (tied output, vocabulary 262,144): the issue's plan (helpers of
120 MiB and 420 MiB at --ctx 1024) is valid, answers through the printed `edgepilot serve --rpc` command with
every device in a cgroup memory limit equal to its budget (the main device's holds all of `edgepilot serve`),
nobody is OOM-killed, and each device's measured peak is within 10 % of the plan's figure for it: the
helpers' rpc-servers and the main device's llama-server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from netkit import loopback_plan, start_helpers_in_limits, stop_helpers, vmhwm
from servekit import start_server

from edgepilot.doctor.cgroup import MemoryLimit, cgroup_problem

MiB = 1 << 20
BUDGETS = [120 * MiB, 420 * MiB]  # the example
CTX = 1024
MAIN_BUDGET = 360 * MiB
problem = cgroup_problem()
pytestmark = pytest.mark.skipif(problem is not None, reason=problem or "")


def _evict(path: Path) -> None:
    """The model file's clean pages out of the page cache, and only those: the main device's process reads
    them again, inside its limit, while the interpreter's and tools' files stay charged to whoever read them
    (dropping every cache would charge all of Python's files to the main device's group too)."""
    os.sync()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_gemma_plan_answers_under_cgroups_every_device_as_predicted(tmp_path, gemma_path, rpc_server_tool):
    helpers, plan = loopback_plan(str(gemma_path), BUDGETS, CTX, MAIN_BUDGET)
    assert plan.fits and plan.main.fits and all(s.fits for s in plan.helpers)
    assert [s.name for s in plan.helpers] == [h.endpoint for h in helpers]  # both helpers hold layers
    assert all(v > 0 for v in plan.tensor_split)
    # the tied output stays on the main device: no helper holds a copy of the 170 MiB token_embd
    assert plan.output_on_main and "--override-tensor" in plan.edgepilot_command
    assert all(s.weights_bytes < 100 * MiB for s in plan.helpers)
    serve_args = plan.edgepilot_command[3:]  # what follows `edgepilot serve MODEL`, as printed

    _evict(gemma_path)  # its pages are charged to whoever reads them first: the main device's llama-server
    limits, procs = [], []
    try:
        start_helpers_in_limits(helpers, limits, procs)

        main_limit = MemoryLimit(MAIN_BUDGET).__enter__()
        limits.append(main_limit)
        served = start_server(
            gemma_path, *serve_args, "--max-tokens", "64", tmp=tmp_path, wrap=main_limit.wrap
        )
        try:
            served.wait_ready(timeout=180)
            reply = served.client(timeout=120).chat.completions.create(
                model="x",
                messages=[{"role": "user", "content": "What is the capital of France?"}],
                max_tokens=16,
                temperature=0,
            )
            assert reply.choices[0].message.content.strip()

            worker = served.info["worker_pid"]
            rows = [(plan.main, worker, main_limit)]
            rows += list(zip(plan.helpers, [p.pid for p in procs], limits, strict=False))
            report = []
            for share, pid, limit in rows:
                measured, counters = vmhwm(pid), limit.counters()
                report.append(
                    f"{share.name}: layers {share.first_layer}-{share.end_layer - 1} predicted "
                    f"{share.predicted_peak_bytes / MiB:.1f} MiB, VmHWM {measured / MiB:.1f} MiB, cgroup max "
                    f"{counters['max_usage_bytes'] / MiB:.1f} of {counters['limit_bytes'] / MiB:.0f} MiB, "
                    f"OOM kills {counters['oom_kill']}"
                )
                assert counters["oom_kill"] == 0, report
                assert counters["limit_bytes"] == share.budget_bytes
            report.append(
                f"edgepilot serve's front (not in the plan): VmHWM {vmhwm(served.proc.pid) / MiB:.1f} MiB"
            )
            print("\n".join(report))
            for (share, pid, _), line in zip(rows, report, strict=False):
                measured = vmhwm(pid)
                assert abs(measured - share.predicted_peak_bytes) <= 0.10 * share.predicted_peak_bytes, line
            assert all(proc.poll() is None for proc in procs)
        finally:
            served.stop()
    finally:
        stop_helpers(procs, limits)
