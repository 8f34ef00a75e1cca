"""The physical core count the default thread count is capped by, read from sysfs (not psutil: start-up)."""

from __future__ import annotations

import psutil

from edgepilot.plan.requested import physical_cores


def _cpu(root, n: int, siblings: str, name: str = "core_cpus_list") -> None:
    topology = root / f"sys/devices/system/cpu/cpu{n}/topology"
    topology.mkdir(parents=True)
    (topology / name).write_text(siblings + "\n")


def test_smt_siblings_count_once(tmp_path):
    for n, siblings in enumerate(["0,4", "1,5", "2,6", "3,7", "0,4", "1,5", "2,6", "3,7"]):
        _cpu(tmp_path, n, siblings)
    assert physical_cores(tmp_path) == 4


def test_an_older_kernel_names_them_thread_siblings(tmp_path):
    for n in range(6):  # a phone: no SMT, every CPU its own core
        _cpu(tmp_path, n, str(n), name="thread_siblings_list")
    assert physical_cores(tmp_path) == 6


def test_no_topology_is_unknown(tmp_path):
    assert physical_cores(tmp_path) is None


def test_this_machine_agrees_with_psutil():
    assert physical_cores() == psutil.cpu_count(logical=False)
