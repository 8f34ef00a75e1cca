"""The budget counts this process once and adds up on screen (issue 31): the plan's peak is the whole run
process, so what this process holds already is the run's, and a cgroup's inactive page cache is reclaimable.

Device trees are copied and given the two files a live system has: proc/self/status (this process) and the
limiting cgroup's memory.stat. Pure planning: no model is loaded.
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from edgepilot.cli import app
from edgepilot.cli.budget_line import account_lines
from edgepilot.plan.budget import compute_budget
from edgepilot.plan.fit import fit_model, read_device

DEVICES = Path(__file__).resolve().parents[1] / "devices"
MIB = 1 << 20
KIB = 1024


def _status(rss_kib: int, anon_kib: int) -> str:
    return (
        "Name:\tedgepilot\nVmPeak:\t  400000 kB\n"
        f"VmRSS:\t  {rss_kib} kB\nRssAnon:\t  {anon_kib} kB\nRssFile:\t  {rss_kib - anon_kib} kB\n"
        "RssShmem:\t       0 kB\nThreads:\t1\n"
    )


def _cgroup_tree(tmp: Path, limit: int, usage: int, inactive: int, rss_kib: int, anon_kib: int) -> Path:
    """The Raspberry Pi 5 tree inside a cgroup v1 memory group, with this process's status."""
    tree = tmp / "pi5"
    shutil.copytree(DEVICES / "raspberry-pi5", tree)
    (tree / "proc/self").mkdir(parents=True, exist_ok=True)
    (tree / "proc/self/cgroup").write_text("4:memory:/edgepilot-doctor-1-0\n")
    (tree / "proc/self/status").write_text(_status(rss_kib, anon_kib))
    group = tree / "sys/fs/cgroup/memory/edgepilot-doctor-1-0"
    group.mkdir(parents=True)
    (group / "memory.limit_in_bytes").write_text(f"{limit}\n")
    (group / "memory.usage_in_bytes").write_text(f"{usage}\n")
    (group / "memory.stat").write_text(
        f"cache {inactive + 2 * MIB}\nrss {usage - inactive}\ninactive_file {inactive // 2}\n"
        f"total_cache {inactive + 2 * MIB}\ntotal_inactive_file {inactive}\ntotal_active_file {2 * MIB}\n"
    )
    return tree


def _figures(account: str) -> list[float]:
    return [float(x) for x in re.findall(r"\d+\.\d", account)]


def test_a_cgroup_budget_counts_this_process_once_and_its_page_cache_as_free(tmp_path):
    # issue 31: 150 MiB limit, 52 MiB used of which this process 45.2 and inactive page cache 3.7
    tree = _cgroup_tree(tmp_path, 150 * MIB, 52 * MIB, int(3.7 * MIB), int(45.2 * KIB), int(40 * KIB))
    memory = read_device(tree).memory
    assert memory.own_rss_bytes == int(45.2 * KIB) * KIB and memory.own_anon_bytes == 40 * MIB
    assert memory.cgroup_inactive_file_bytes == int(3.7 * MIB)  # v1: the hierarchy's total_inactive_file

    budget = compute_budget(memory, None, own_process=True)
    assert budget.source.startswith("cgroup limit")
    assert budget.margin_bytes == 15 * MIB
    assert budget.budget_bytes == 150 * MIB - budget.others_bytes - 15 * MIB
    assert budget.others_bytes == 52 * MIB - int(3.7 * MIB) - int(45.2 * KIB) * KIB  # 3.1 MiB
    assert budget.account == (
        "budget 131.9 MiB = cgroup limit 150.0 − others 3.1 − kept free 15.0 "
        "(usage 52.0 = this process 45.2 + page cache 3.7 + others 3.1)"
    )
    # a plan for llama.cpp's own programs (or serve's worker): this process stays beside the run
    beside = compute_budget(memory, None, own_process=False)
    assert beside.own_bytes == 0 and beside.budget_bytes == budget.budget_bytes - budget.own_bytes
    assert beside.account.startswith("budget 86.7 MiB = cgroup limit 150.0 − others 48.3 − kept free 15.0")


def test_against_memavailable_this_process_gives_back_its_anonymous_pages(tmp_path):
    tree = _cgroup_tree(tmp_path, 64 << 30, MIB, 0, 60 * KIB, 41 * KIB)  # a limit that does not bind
    memory = read_device(tree).memory
    budget = compute_budget(memory, None, own_process=True)
    assert budget.source == "MemAvailable" and budget.limit_bytes is None
    assert budget.own_bytes == 41 * MIB  # its file pages are in MemAvailable's page cache already
    assert budget.budget_bytes == 7312880 * KIB + 41 * MIB - budget.margin_bytes
    assert budget.account == "budget 6779.9 MiB = MemAvailable 7141.5 + this process 41.0 − kept free 402.6"
    # fit plans for the run that will replace it: fit and run count the same budget
    assert compute_budget(memory, None).budget_bytes == budget.budget_bytes - 41 * MIB


@pytest.mark.parametrize("seed", range(3))
def test_the_account_adds_up_on_screen_whatever_the_rounding(seed):
    from dataclasses import replace

    rng = random.Random(seed)
    base = read_device(DEVICES / "raspberry-pi5").memory
    for _ in range(300):
        limit = rng.randrange(64 * MIB, 4 << 30)
        usage = rng.randrange(0, limit)
        memory = replace(
            base,
            available_bytes=rng.randrange(0, 8 << 30),
            cgroup_limit_bytes=limit if rng.random() < 0.7 else None,
            cgroup_usage_bytes=usage,
            cgroup_inactive_file_bytes=rng.randrange(0, usage + 1),
            own_rss_bytes=rng.randrange(0, 200 * MIB),
            own_anon_bytes=rng.randrange(0, 100 * MIB),
        )
        b = compute_budget(memory, None, own_process=rng.random() < 0.5)
        shown = b.account
        figures = _figures(shown)
        assert figures[0] == round(b.budget_bytes / MIB, 1) or abs(figures[0] - b.budget_bytes / MIB) <= 0.05
        if b.budget_bytes == 0:
            continue
        if b.limit_bytes is None:  # budget = MemAvailable (+ this process) - kept free
            *parts, kept = figures[1:]
            assert round(sum(parts) - kept, 1) == figures[0], shown
        else:  # budget = limit - others - kept free (usage = this process + page cache + others)
            budget, limit, others, kept, usage, *split = figures
            assert round(limit - others - kept, 1) == budget, shown
            assert round(sum(split), 1) == usage and split[-1] == others, shown
        true = (b.limit_bytes or b.mem_available_bytes or 0) / MIB
        assert abs(figures[1] - true) <= 0.15, shown  # the figure it starts from: within rounding


def test_the_account_wraps_between_its_terms_at_50_columns(tmp_path):
    tree = _cgroup_tree(tmp_path, 150 * MIB, 52 * MIB, int(3.7 * MIB), int(45.2 * KIB), int(40 * KIB))
    b = compute_budget(read_device(tree).memory, None, own_process=True)
    lines = account_lines(b.account_terms, 50)
    assert len(lines) > 1 and all(len(line) <= 50 for line in lines)
    assert " ".join(line.strip() for line in lines) == b.account
    assert lines[0] == "budget 131.9 MiB = cgroup limit 150.0 − others 3.1"


def test_fit_prints_the_account_it_planned_with(tmp_path, smollm_path):
    tree = _cgroup_tree(tmp_path, 300 * MIB, 20 * MIB, 5 * MIB, 0, 0)
    res = CliRunner().invoke(app, ["fit", str(smollm_path), "--root", str(tree)], env={"COLUMNS": "50"})
    assert res.exit_code == 0, res.output
    plan = fit_model(smollm_path, root=tree)
    out = res.stdout.splitlines()
    assert all(len(line) <= 50 for line in out if "/" not in line)  # (paths are never cut)
    start = next(i for i, line in enumerate(out) if line.startswith("budget "))
    shown = " ".join(line.strip() for line in out[start : start + 3] if line.startswith(("budget", "  ")))
    assert shown.startswith(plan.budget.account)
    assert plan.budget.account.startswith(
        "budget 255.0 MiB = cgroup limit 300.0 − others 15.0 − kept free 30.0"
    )
