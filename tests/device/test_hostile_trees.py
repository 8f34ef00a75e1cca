"""Device trees and snapshot archives are untrusted input (issue 13): the worst cases stay cheap and confined.

Each worst case is probed in a child process (a regression must fail the test, not take the machine down: the
child has a 2 GiB address-space limit and a timeout) that reports its own time and peak RSS.
"""

from __future__ import annotations

import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from edgepilot.device import fs
from edgepilot.device.probe import probe
from edgepilot.device.root_archive import MAX_ARCHIVE_MEMBERS
from edgepilot.errors import UserError

MIB = 1 << 20
BASE_TREE = "sd8gen2-xiaomi13pro"  # Android + Termux: getprop, env.json, thermal, the Vulkan JSON fallback
MAX_RSS = 100 * MIB
MAX_SECONDS = 2.0

CHILD = textwrap.dedent(
    """
    import json, sys, time
    from edgepilot.device.probe import probe
    from edgepilot.device.process import rss_bytes
    from edgepilot.errors import UserError
    from edgepilot.jsonable import dumps

    wall, cpu = time.perf_counter(), time.process_time()
    try:
        out, error = dumps(probe(sys.argv[1])), None
    except UserError as exc:
        out, error = "null", str(exc)
    report = {
        "wall": time.perf_counter() - wall,
        "cpu": time.process_time() - cpu,
        "rss": rss_bytes()[1],  # VmHWM: ru_maxrss would include the pytest process the child forked from
        "json_bytes": len(out),
        "error": error,
        "probe": json.loads(out) if len(out) < 1 << 20 else None,
    }
    print(json.dumps(report))
    """
)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def probe_in_child(root: Path, timeout: float = 60.0) -> dict:
    """probe(root) in a child: {wall, cpu, rss (the whole interpreter's peak), json_bytes, error, probe}."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_limit_memory,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"probe of {root} did not finish in {timeout:g} s (a FIFO or a quadratic parse?)")
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    return json.loads(out)


def assert_cheap(report: dict) -> None:
    # CPU time, not wall time: the test machine is shared; the wall clock only guards against a hang.
    assert report["cpu"] < MAX_SECONDS, report
    assert report["wall"] < 3 * MAX_SECONDS, report
    assert report["rss"] < MAX_RSS, report
    assert report["json_bytes"] < 1 * MIB, report


@pytest.fixture
def tree(tmp_path, devices) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(devices / BASE_TREE, root)
    return root


def _write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def _sparse(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)


def test_a_base_tree_probes_cheaply(tree):
    report = probe_in_child(tree)
    assert_cheap(report)
    assert report["probe"]["cpu"]["clusters"][0]["core"] == "Cortex-X3"


@pytest.mark.parametrize("depth", [20_000, 100_000])
def test_a_deep_cgroup_path_is_linear(tree, depth):
    # Before: the ancestors walk built depth^2/2 characters (26 s and 1.2 GB at 20 000; OOM at 100 000).
    _write(tree / "proc/self/cgroup", "0::" + "/a" * depth + "\n")
    (tree / "sys/fs/cgroup").mkdir(parents=True, exist_ok=True)
    report = probe_in_child(tree)
    assert_cheap(report)
    assert report["probe"]["memory"]["cgroup_limit_bytes"] is None


def test_a_huge_sidecar_reason_is_cut(tree):
    # Before: a 100 MB thermal.error gave 1.4 GB of RSS and 600 MB of JSON.
    shutil.rmtree(tree / "sys/class/thermal", ignore_errors=True)
    with open(tree / "sys/class/thermal.error", "wb") as f:
        for _ in range(100):
            f.write(b"x" * MIB)
    report = probe_in_child(tree)
    assert_cheap(report)
    assert report["probe"]["thermal"] == []
    assert report["probe"]["reasons"]["thermal"] == [
        "thermal zones unavailable (missing: /sys/class/thermal)"
    ]


@pytest.mark.parametrize("name", ["commands/getprop.txt", "env.json", "proc/cpuinfo", "proc/mounts"])
def test_a_sparse_1gib_file_is_refused_unread(tree, name):
    # Before: a 1 GB sparse getprop.txt or env.json used 2 GB.
    _sparse(tree / name, 1 << 30)
    report = probe_in_child(tree)
    assert_cheap(report)
    assert "larger than" in json.dumps(report["probe"])


@pytest.mark.parametrize("depth", [60_000, 100_000])  # within env.json's 64 KiB cap, and the case
@pytest.mark.parametrize("name", ["env.json", "statvfs.json", "realpath.json", "commands/cmd-gpu-vkjson.txt"])
def test_deeply_nested_json_is_a_reason_not_a_traceback(tree, name, depth):
    # Before: RecursionError traceback from probe and fit --root.
    _write(tree / name, "[" * depth)
    report = probe_in_child(tree)
    assert_cheap(report)
    assert report["error"] is None
    if name == "env.json":
        why = "nested deeper than 32 levels" if depth < fs.SMALL_FILE else "larger than 64 KiB"
        assert why in report["probe"]["reasons"]["env"][0]


def test_json_nested_just_within_the_limit_is_read(tree):
    env = json.loads((tree / "env.json").read_text())
    env["DEEP"] = [[[[["ok"]]]]]
    _write(tree / "env.json", json.dumps(env))
    assert probe(tree).env["HOME"] == env["HOME"]


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("proc/cpuinfo", "processor\t: 0\n" * 300_000),  # 4 MiB: over the cap
        ("proc/cpuinfo", "".join(f"processor : {i}\n" for i in range(9000)) + "k: v\n" * 100_000),
        (
            "proc/cpuinfo",
            "".join(f"processor : {i}\n" + "".join(f"f{k}: 1\n" for k in range(40)) for i in range(6000)),
        ),
        ("proc/cpuinfo", "processor : 0\nFeatures : " + "fp " * 600_000 + "\n"),
        ("sys/devices/system/cpu/possible", "0-4000000000\n"),
        ("sys/devices/system/cpu/possible", "0-8191\n"),
        ("proc/mounts", "a b c d\n" * 130_000),
        ("commands/getprop.txt", "[a]: [" + "]" * 900_000 + "\n"),
        (
            "commands/cmd-gpu-vkjson.txt",
            '{"devices": [' + '{"deviceName": "x", "apiVersion": 1},' * 50_000 + "0]}",
        ),
        ("commands/cmd-gpu-vkjson.txt", '{"deviceName": "x", "apiVersion": "' + "(1.1" * 400_000 + '"}'),
        ("proc/swaps", "Filename Type Size Used Priority\n" + "/z partition 1 1 \u00b2\n" * 1000),
    ],
    ids=lambda v: v if len(v) < 40 else v[:20],
)
def test_pathological_shapes_within_the_caps(tree, name, content):
    _write(tree / name, content)
    report = probe_in_child(tree)
    assert_cheap(report)
    assert report["error"] is None


def test_a_cgroup_path_cannot_climb_out_of_the_root(tmp_path, tree):
    # Before: `0::/../../../../elsewhere` made probe read TREE/../elsewhere/memory.max of the machine.
    _write(tmp_path / "elsewhere/memory.max", "4096\n")
    _write(tree / "proc/self/cgroup", "0::/../../../../elsewhere\n")
    (tree / "sys/fs/cgroup").mkdir(parents=True, exist_ok=True)
    with fs.recording() as rec:
        p = probe(tree)
    assert p.memory.cgroup_limit_bytes is None
    assert "/sys/fs/cgroup/elsewhere/memory.max" in rec.files  # confined: read inside the tree
    assert all(".." not in dev for dev in rec.files)


def test_a_symlink_cannot_lead_out_of_the_root(tmp_path, tree):
    _write(tmp_path / "elsewhere/memory.max", "4096\n")
    _write(tree / "proc/self/cgroup", "0::/link\n")
    (tree / "sys/fs/cgroup").mkdir(parents=True, exist_ok=True)
    (tree / "sys/fs/cgroup/link").symlink_to(tmp_path / "elsewhere")
    (tree / "proc/meminfo").unlink()
    (tree / "proc/meminfo").symlink_to("/proc/meminfo")
    p = probe(tree)
    assert p.memory.cgroup_limit_bytes is None
    assert p.memory.total_bytes is None
    assert "outside the device tree: /proc/meminfo" in p.memory.reasons[0]
    assert fs.read_text(tree, "sys/fs/cgroup/link/memory.max") == (
        None,
        "outside the device tree: /sys/fs/cgroup/link/memory.max",
    )


def test_a_symlink_inside_the_tree_is_followed(tree):
    cpuinfo = tree / "proc/cpuinfo"
    cpuinfo.rename(tree / "cpuinfo.real")
    cpuinfo.symlink_to("../cpuinfo.real")
    assert probe(tree).cpu.clusters[0].core == "Cortex-X3"


FIFOS = [
    "proc/cpuinfo",
    "proc/meminfo",
    "commands/getprop.txt",
    "commands/uname-m.txt",
    "env.json",
    "sys/class/thermal/thermal_zone0/temp",
    "sys/devices/system/cpu/possible",
    "proc/pressure/memory.error",  # a sidecar: read only when the file itself is missing
]


def test_fifos_anywhere_in_a_tree_do_not_hang(tree):
    for name in FIFOS:
        target = tree / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.unlink()
        os.mkfifo(target)
    (tree / "proc/pressure/memory").unlink(missing_ok=True)
    report = probe_in_child(tree, timeout=20)
    assert_cheap(report)
    data = report["probe"]
    assert "a FIFO, not a regular file: /proc/cpuinfo" in " ".join(data["cpu"]["reasons"])
    assert data["env"] == {} and data["android"] is None
    assert "memory pressure (PSI) unavailable (missing: /proc/pressure/memory)" in data["memory"]["reasons"]


def _tar_gz(path: Path, tree: Path, extra: dict[str, bytes | int]) -> Path:
    """The tree plus extra members: bytes, or a number of zero bytes (streamed, never held in memory)."""
    with tarfile.open(path, "w:gz", compresslevel=1) as tar, open("/dev/zero", "rb") as zeros:
        tar.add(tree, arcname=".")
        for name, data in extra.items():
            info = tarfile.TarInfo(name)
            info.size = data if isinstance(data, int) else len(data)
            tar.addfile(info, zeros if isinstance(data, int) else io.BytesIO(data))
    return path


def test_an_archive_at_the_size_limit_stays_cheap(tmp_path, tree):
    (tree / "commands/getprop.txt").unlink()
    archive = _tar_gz(
        tmp_path / "big.tar.gz",
        tree,
        {
            "commands/getprop.txt": 60 * MIB,
            "proc/self/cgroup": b"0::" + b"/a" * 30_000 + b"\n",
        },
    )
    report = probe_in_child(archive)
    assert_cheap(report)
    assert report["error"] is None
    assert report["probe"]["cpu"]["clusters"][0]["core"] == "Cortex-X3"


def test_archive_limits_are_one_clear_error(tmp_path, tree):
    bomb = tarfile.TarInfo("proc/x")
    bomb.pax_headers = {"comment": "x" * (50 * MIB)}  # tarfile reads a pax header whole, whatever it claims
    with tarfile.open(tmp_path / "pax.tar.gz", "w:gz", format=tarfile.PAX_FORMAT, compresslevel=1) as tar:
        tar.addfile(bomb, io.BytesIO(b""))
    report = probe_in_child(tmp_path / "pax.tar.gz")
    assert_cheap(report)
    assert report["error"].startswith(f"--root {tmp_path / 'pax.tar.gz'}: not a snapshot archive")

    with tarfile.open(tmp_path / "many.tar.gz", "w:gz") as tar:
        for i in range(MAX_ARCHIVE_MEMBERS + 1):
            tar.addfile(tarfile.TarInfo(f"f{i}"), io.BytesIO(b""))
    with pytest.raises(UserError, match=f"more than {MAX_ARCHIVE_MEMBERS} archive entries"):
        probe(tmp_path / "many.tar.gz")

    too_big = tarfile.TarInfo("proc/cpuinfo")
    too_big.size = 65 * MIB
    with tarfile.open(tmp_path / "big.tar", "w") as tar:
        tar.addfile(too_big)  # the header claims 65 MiB: refused before any data is read
    with pytest.raises(UserError, match="archive expands beyond 64 MiB"):
        probe(tmp_path / "big.tar")

    fifo = tmp_path / "fifo.tar.gz"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="a FIFO, not a regular file"):
        probe(fifo)


def test_device_strings_are_not_rich_markup_and_surrogates_print(cli_app, tree, smollm_path):
    # Before: a core name or cgroup path like "[/red]" raised rich's MarkupError, and a "\ud800" escape in
    # env.json raised UnicodeEncodeError when the table was printed: tracebacks from probe and fit.
    _write(tree / "proc/cpuinfo", (tree / "proc/cpuinfo").read_text() + "Hardware\t: [/red] SM8550 [bold]\n")
    _write(tree / "proc/self/cgroup", "0::/[/red]\n")
    _write(tree / "sys/fs/cgroup/[/red]/memory.max", f"{200 * MIB}\n")
    env = json.loads((tree / "env.json").read_text())
    _write(tree / "env.json", json.dumps({**env, "HOME": "/data/\ud800"}))
    shown = {
        "probe": "[/red] SM8550 [bold]",
        "fit": "the memory cgroup /[/red] has a limit",  # the budget's note names the cgroup
    }
    for command, expected in shown.items():
        args = [command, "--root", str(tree)] + ([str(smollm_path)] if command == "fit" else [])
        proc = subprocess.run(
            [sys.executable, "-m", "edgepilot", *args], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert expected in " ".join(proc.stdout.split()), proc.stdout  # as shown, wrapped to the screen
