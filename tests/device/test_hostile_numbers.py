"""Numbers read from a device tree are bounded (issue 25): a meminfo, swaps, PSI or cgroup file of garbage,
huge, negative or non-ASCII figures leaves that figure unknown. Before, a 400-digit MemTotal ended in
OverflowError (int too large to convert to float) in probe, fit and cluster plan, a zero one in
ZeroDivisionError."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from edgepilot.device import fs
from edgepilot.device.memory import parse_meminfo, parse_psi, parse_swaps, read_memory
from edgepilot.errors import UserError
from edgepilot.jsonable import dumps
from edgepilot.plan.fit import fit_model
from edgepilot.plan.requested import RequestedSettings
from edgepilot.sizes import MAX_SIZE

BASE = "raspberry-pi5"
HUGE = "1" + "0" * 400
BAD_FIGURES = [HUGE, "99999999999999999999", "-5", "\u0663\u0661", "1_000", "0x10", "nan", "", "garbage"]


@pytest.fixture
def tree(tmp_path, devices) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(devices / BASE, root)
    return root


def _meminfo(root: Path, total: str, available: str) -> None:
    (root / "proc/meminfo").write_text(
        f"MemTotal: {total} kB\nMemFree: {total} kB\nMemAvailable: {available} kB\n"
    )


@pytest.mark.parametrize("figure", BAD_FIGURES)
def test_a_bad_meminfo_figure_is_left_out(figure):
    info = parse_meminfo(f"MemTotal: {figure} kB\nMemAvailable: 2048 kB\n")
    assert "MemTotal" not in info and info["MemAvailable"] == 2 << 20


def test_figures_within_bounds_are_read():
    assert parse_meminfo("MemTotal: 0 kB\nHugePages_Total: 4\n") == {"MemTotal": 0, "HugePages_Total": 4}
    assert parse_meminfo(f"X: {MAX_SIZE}\nY: {MAX_SIZE + 1}\n") == {"X": MAX_SIZE}


def test_swaps_and_psi_are_bounded():
    swaps = parse_swaps(
        "Filename Type Size Used Priority\n"
        f"/dev/zram0 partition {HUGE} 0 100\n/dev/sda2 partition -4 0 -2\n/dev/sda3 partition 1024 0 -2\n"
    )
    assert [s.path for s in swaps] == ["/dev/sda3"]
    assert parse_psi("some avg10=nan avg60=0\nfull avg10=inf\n") == {}
    assert parse_psi("some avg10=1e400\nfull avg10=-3\n") == {}
    assert parse_psi("some avg10=12.5\n") == {"some": 12.5}


@pytest.mark.parametrize("figure", [HUGE, "-1", "\u0663", "9" * 5000, "1_0"])
def test_read_int_refuses_what_no_kernel_writes(tree, figure):
    (tree / "proc/sys/vm").mkdir(parents=True, exist_ok=True)
    (tree / "proc/sys/vm/swappiness").write_text(figure + "\n")
    value, why = fs.read_int(tree, "proc/sys/vm/swappiness")
    assert (value, why is not None) == ((-1, False) if figure == "-1" else (None, True))


@pytest.mark.parametrize("limit", [HUGE, "-4096", "0x1000", "\u0661\u0662"])
def test_a_bad_cgroup_limit_is_no_limit(tree, limit):
    (tree / "proc/self").mkdir(parents=True, exist_ok=True)
    (tree / "proc/self/cgroup").write_text("0::/\n")
    (tree / "sys/fs/cgroup").mkdir(parents=True, exist_ok=True)
    (tree / "sys/fs/cgroup/memory.max").write_text(limit + "\n")
    (tree / "sys/fs/cgroup/memory.current").write_text(HUGE + "\n")
    assert read_memory(tree).cgroup_limit_bytes is None
    (tree / "sys/fs/cgroup/memory.max").write_text("536870912\n")
    m = read_memory(tree)
    assert (m.cgroup_limit_bytes, m.cgroup_usage_bytes) == (512 << 20, None)


@pytest.mark.parametrize("figure", [*BAD_FIGURES, "0", "4"])
def test_probe_fit_and_cluster_plan_survive_any_meminfo(cli_app, tree, smollm_path, figure):
    _meminfo(tree, figure, figure)
    from edgepilot.device.probe import probe

    dumps(probe(tree))
    with contextlib.suppress(UserError):  # "no usable figure": the plan needs one
        dumps(fit_model(smollm_path, RequestedSettings(), root=tree))
    helper = ["--helper", f"127.0.0.1:50052={tree}"]
    result = CliRunner().invoke(cli_app, ["cluster", "plan", str(smollm_path), *helper])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and "--helper" in result.output, result.output


def test_a_garbage_meminfo_is_one_line_for_a_cluster_helper(cli_app, tree, smollm_path):
    (tree / "proc/meminfo").write_text("\x00garbage\xff: ::\n" * 50)
    helper = ["--helper", f"127.0.0.1:50052={tree}"]
    result = CliRunner().invoke(cli_app, ["cluster", "plan", str(smollm_path), *helper])
    assert result.exit_code == 2 and "no usable memory figure" in result.output, result.output
    _meminfo(tree, "4000000", "3000000")  # a sane one still plans
    result = CliRunner().invoke(cli_app, ["cluster", "plan", str(smollm_path), "--json", *helper])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["helpers"][0]["budget_bytes"] > 1 << 30
