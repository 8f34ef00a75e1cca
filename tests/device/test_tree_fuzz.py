"""Fuzz the device readers: `probe` and `fit --root` over mutated device trees give a result or a UserError,
quickly; never another exception (as test_gguf_fuzz does for model files).

Each example copies a real tree from tests/devices and applies one to three mutations to files the probe
reads: byte edits, truncation, hostile contents (deep JSON, huge numbers, Unicode digits, rich markup, cgroup
paths with `..`), a FIFO, a directory, a symlink out of the tree or a sparse 1 GiB file in a file's place.
"""

from __future__ import annotations

import atexit
import io
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from rich.console import Console

from edgepilot.cli.fit_render import render_fit
from edgepilot.cli.probe_render import render_probe
from edgepilot.device.probe import probe
from edgepilot.errors import UserError
from edgepilot.jsonable import dumps
from edgepilot.plan.fit import fit_model
from edgepilot.plan.requested import RequestedSettings

hypothesis = pytest.importorskip("hypothesis")
st = pytest.importorskip("hypothesis.strategies")
given, settings, HealthCheck = hypothesis.given, hypothesis.settings, hypothesis.HealthCheck

DEVICES = Path(__file__).resolve().parents[1] / "devices"
TREES = sorted(d for d in DEVICES.iterdir() if d.is_dir())
FILES = {
    t.name: sorted(str(p.relative_to(t)) for p in t.rglob("*") if p.is_file() and p.name != "SOURCE.md")
    for t in TREES
}
# Files a probe reads that some trees lack.
EXTRA = [
    "env.json",
    "statvfs.json",
    "realpath.json",
    "proc/self/cgroup",
    "proc/pressure/memory",
    "sys/fs/cgroup/memory.max",
    "sys/fs/cgroup/a/memory.max",
    "sys/fs/cgroup/memory/memory.limit_in_bytes",
    "sys/class/thermal/thermal_zone0/temp",
    "sys/class/thermal/thermal_zone0/type",
    "sys/class/thermal.error",
    "sys/class/power_supply/battery/type",
    "sys/class/power_supply/battery/current_now",
    "sys/devices/system/cpu/possible",
    "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
    "commands/getprop.txt",
    "commands/vulkaninfo-summary.txt",
    "commands/cmd-gpu-vkjson.txt",
    "commands/device_config-get-activity_manager-max_phantom_processes.txt",
]
HOSTILE = [
    b"",
    b"\n\n",
    b"\x00" * 64,
    b"\xff\xfe\xfd",
    b"[" * 3000,
    b'{"a":' * 3000,
    b'{"HOME": "\\ud800", "PREFIX": "/data/data/com.termux/files/usr"}',
    b'{"HOME": "/../../../../x", "ANDROID_ROOT": "/system"}',
    b'{"/data/data/com.termux/files/home": {"total_bytes": 1e400, "free_bytes": -1}}',
    b'{"/data/data/com.termux/files/home": "/sdcard/../../etc"}',
    b"9" * 5000 + b"\n",
    b"-1\n",
    b"nan\n",
    b"0-99999999999\n",
    b"7-3\n",
    "\u00b2\n".encode(),
    "\u0663\u0661\n".encode(),  # Arabic-Indic digits: int() reads them
    b"0::/../../../../elsewhere\n",
    b"0::" + b"/a" * 3000 + b"\n",
    b"4:memory:/" + b"../" * 50 + b"x\n",
    b"processor : 99999999999\nprocessor : -3\nFeatures : fp asimd\n",
    b"model name : [/red] [bold]\nHardware : [link=x]\n",
    b"[ro.build.version.sdk]: [\xe0\xa5\xa9\xe0\xa5\xa7]\n[ro.product.model]: [[/]]\n",
    b"GPU0:\n\tapiVersion = 99999999999999999999\n\tdeviceName = [/]\n\tvendorID = 0x" + b"f" * 300 + b"\n",
    b'{"devices": [{"deviceName": "[/]", "apiVersion": "' + b"(1.1" * 500 + b'"}]}',
    b"MemTotal: 1e309 kB\nMemAvailable: -5 kB\nSwapTotal: \xff kB\n",
    b"Filename Type Size Used Priority\n/dev/zram0 partition \xd9\xa3 1 \xc2\xb2\n",
    b"none / fuse rw 0 0\n" * 3,
]
# Values put after a line's `key:` / `key =` / `[key]: [` (every field of every file gets its turn).
HOSTILE_VALUES = [
    b"",
    b" ",
    b"[/red]",
    b"[bold",
    b"99999999999999999999999",
    b"-1",
    b"nan",
    b"1e400",
    "\u00b2".encode(),
    "\u0663".encode(),
    b"../../../..",
    b"\x00",
    b"\xed\xa0\x80",  # a UTF-16 surrogate in UTF-8: invalid
    b"0x" + b"f" * 300,
    b"(1.1" * 200,
    b"0-99999999999",
    b"[" * 200,
    b'"}',
    b"/a" * 2000,
    b'"\\ud800 [/red]"',  # in JSON: a lone surrogate, which no UTF-8 terminal can print
    b"[" * 40 + b"]" * 40,
]
_SEPARATORS = (b"]: [", b":", b"=", b" ")
_WORK = Path(tempfile.mkdtemp(prefix="edgepilot-tree-fuzz-"))  # hypothesis examples cannot use tmp_path
atexit.register(shutil.rmtree, _WORK, ignore_errors=True)


def _replace(path: Path, make) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    make(path)


def _line_with_value(line: bytes, value: bytes, keyed_only: bool = False) -> bytes:
    comma = b"," if line.rstrip().endswith(b",") else b""  # keeps a JSON object's shape
    for sep in _SEPARATORS:
        if sep in line:
            key, _, _ = line.partition(sep)
            return key + sep + value + (b"]" if sep == b"]: [" else b"") + comma
    return line if keyed_only else value + comma


def _with_value(old: bytes, where: float, value: bytes) -> bytes:
    """The line at `where` (every line when where is 1.0) keeps its key and separator, with `value`."""
    lines = old.split(b"\n")
    if where >= 1.0:
        return b"\n".join(_line_with_value(line, value, keyed_only=True) for line in lines)
    i = int(where * len(lines))
    lines[i] = _line_with_value(lines[i], value)
    return b"\n".join(lines)


def _apply(root: Path, name: str, kind: str, data: bytes, value: bytes, where: float) -> None:
    path = root / name
    if path.parent.exists() and not path.parent.is_dir():
        return  # an earlier mutation put a file where this one's folder is
    old = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
    cut = int(where * len(old))
    if kind == "value":
        _replace(path, lambda p: p.write_bytes(_with_value(old, where, value)))
    elif kind == "replace":
        _replace(path, lambda p: p.write_bytes(data))
    elif kind == "splice":
        _replace(path, lambda p: p.write_bytes(old[:cut] + data + old[cut:]))
    elif kind == "truncate":
        _replace(path, lambda p: p.write_bytes(old[:cut]))
    elif kind == "delete":
        _replace(path, lambda p: None)
    elif kind == "fifo":
        _replace(path, os.mkfifo)
    elif kind == "directory":
        _replace(path, lambda p: p.mkdir())
    elif kind == "symlink-out":
        _replace(path, lambda p: p.symlink_to("/proc/self/status"))
    elif kind == "sparse":
        _replace(path, _sparse_gib)


def _sparse_gib(path: Path) -> None:
    with open(path, "wb") as f:
        f.truncate(1 << 30)


KINDS = ["value"] * 4 + [
    "replace",
    "splice",
    "truncate",
    "delete",
    "fifo",
    "directory",
    "symlink-out",
    "sparse",
]
mutation = st.tuples(
    st.integers(0, 1 << 16),  # which file: an index into the tree's files + EXTRA
    st.sampled_from(KINDS),
    st.one_of(st.sampled_from(HOSTILE), st.binary(max_size=200)),
    st.sampled_from(HOSTILE_VALUES),
    st.floats(0, 1),
)


def _terminal() -> Console:
    """A console that encodes as a UTF-8 terminal does: a string it cannot print raises."""
    return Console(file=io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict"), width=100)


def _exercise(root: Path, model: Path) -> None:
    """probe and fit as the CLI runs them (result, JSON, table); only UserError may come out."""
    out = _terminal()
    try:
        found = probe(root)
    except UserError:
        pass
    else:
        dumps(found)
        render_probe(found, out)
    try:
        plan = fit_model(model, RequestedSettings(), root=root)
    except UserError:
        pass
    else:
        dumps(plan)
        render_fit(plan, out)


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=st.sampled_from(TREES), edits=st.lists(mutation, min_size=1, max_size=3))
def test_mutated_trees_give_a_result_or_a_user_error(smollm_path, tree, edits):
    root = _WORK / "tree"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(tree, root, symlinks=True)
    names = FILES[tree.name] + EXTRA
    for index, kind, data, value, where in edits:
        _apply(root, names[index % len(names)], kind, data, value, where)
    start = time.process_time()
    _exercise(root, smollm_path)
    assert time.process_time() - start < 2.0


def test_the_seed_trees_probe_and_fit(smollm_path):
    for tree in TREES:
        _exercise(tree, smollm_path)


# The text files the readers parse; the sweep gives every value in each of them every hostile value.
PARSED = [
    "proc/cpuinfo",
    "proc/meminfo",
    "proc/swaps",
    "proc/mounts",
    "proc/pressure/memory",
    "proc/sys/vm/overcommit_memory",
    "commands/getprop.txt",
    "commands/vulkaninfo-summary.txt",
    "commands/uname-m.txt",
    "env.json",
    "sys/devices/system/cpu/possible",
    "sys/devices/system/cpu/online",
    "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
    "sys/class/thermal/thermal_zone0/type",
    "sys/class/power_supply/battery/status",
]


@pytest.mark.parametrize("name", PARSED)
def test_every_value_of_a_parsed_file_can_be_hostile(name):
    trees = [t for t in TREES if (t / name).is_file()]
    assert trees, f"no device tree has {name}"
    root = _WORK / "sweep"
    for i, value in enumerate(HOSTILE_VALUES):
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(trees[i % len(trees)], root, symlinks=True)
        _apply(root, name, "value", b"", value, 1.0)
        out = _terminal()
        found = probe(root)
        dumps(found)
        render_probe(found, out)
