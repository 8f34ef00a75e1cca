"""The background watch over device trees whose /proc files the test rewrites, as Android would: each class
Android kills first (700-899 behind the apps in use, 900+ cached; AOSP ProcessList) is said once, on Android
with the doctor's words for that Android version, and an app's score counts for its children."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from edgepilot.device.background import adj_class, read_standing
from edgepilot.device.background_watch import BackgroundWatch


def _tree(tmp_path: Path, devices: Path | None = None, name: str = "") -> Path:
    root = tmp_path / "tree"
    if devices is not None:
        shutil.copytree(devices / name, root)
    (root / "proc/self").mkdir(parents=True, exist_ok=True)
    _process(root, "self", "python3", 4242, 0)
    return root


def _process(root: Path, pid: str | int, name: str, ppid: int, adj: int) -> None:
    d = root / "proc" / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    (d / "stat").write_text(f"{pid} ({name}) S {ppid} 1 1 0 -1 4194560 0 0 0 0\n")
    (d / "oom_score_adj").write_text(f"{adj}\n")


def _adj(root: Path, value: int, pid: str = "self") -> None:
    (root / "proc" / pid / "oom_score_adj").write_text(f"{value}\n")


@pytest.mark.parametrize(
    ("adj", "klass"),
    [(-1000, "kept"), (0, "kept"), (200, "kept"), (699, "kept"), (700, "background"), (899, "background")]
    + [(900, "cached"), (999, "cached"), (None, "kept")],
)
def test_classes_follow_androids_process_list(adj, klass):
    assert adj_class(adj) == klass


def test_each_class_is_said_once_off_android(tmp_path):
    root = _tree(tmp_path)
    said: list[str] = []
    watch = BackgroundWatch(said.append, root=root)
    assert watch.check() is None and watch.status()["class"] == "kept"
    _adj(root, 700)
    assert watch.check() is not None
    _adj(root, 800)
    assert watch.check() is None  # the same class: said already
    _adj(root, 900)
    assert watch.check() is not None
    _adj(root, 0)
    watch.check()
    _adj(root, 950)
    assert watch.check() is None  # cached again after coming back: said already
    assert said == watch.notes and len(said) == 2
    assert "oom_score_adj 700 (Android's background class)" in said[0]
    assert "oom_score_adj 900 (Android's cached class): the kernel's OOM killer picks it first" in said[1]
    assert watch.status() == {
        "oom_score_adj": 950,
        "class": "cached",
        "pid": None,
        "own": True,
        "warning": said[1],
    }


def test_on_android_12_the_fix_is_the_doctors_for_android_12(tmp_path, devices):
    root = _tree(tmp_path, devices, "xperia10ii-sd665")  # SDK 31
    env = json.loads((root / "env.json").read_text()) if (root / "env.json").exists() else {}
    (root / "env.json").write_text(json.dumps({**env, "TERMUX_VERSION": "0.118.1"}))
    watch = BackgroundWatch(root=root)
    _adj(root, 905)
    note = watch.check()
    assert note is not None and note.startswith("background: this process now has oom_score_adj 905")
    assert "Android counts it as a cached app, killed first" in note
    assert "termux-wake-lock" in note
    assert "Android 12: `adb shell" in note and "set_sync_disabled_for_tests" in note


def test_on_android_the_apps_score_counts_for_its_children(tmp_path, devices):
    root = _tree(tmp_path, devices, "sd8gen2-xiaomi13pro")  # Termux's environment
    _process(root, 4242, "bash", 4100, 0)
    _process(root, 4100, "com.termux", 700, 200)  # the app, with its foreground service
    _process(root, 700, "zygote64", 1, -1000)
    assert read_standing(root).klass == "kept"
    _adj(root, 915, "4100")  # the notification is gone: Termux is a cached app
    s = read_standing(root)
    assert (s.oom_score_adj, s.pid, s.name, s.own, s.klass) == (915, 4100, "com.termux", False, "cached")
    note = BackgroundWatch(root=root).check()
    assert note is not None and note.startswith("background: its app com.termux (pid 4100) now has")


def test_off_android_a_parents_score_is_not_ours(tmp_path):
    root = _tree(tmp_path)
    _process(root, 4242, "session", 1, 900)  # the kernel's OOM killer scores each process alone
    assert read_standing(root).klass == "kept"


def test_an_unreadable_score_is_no_warning(tmp_path):
    root = _tree(tmp_path)
    (root / "proc/self/oom_score_adj").unlink()
    s = read_standing(root)
    assert s.oom_score_adj is None and s.klass == "kept" and "oom_score_adj" in (s.reason or "")
    assert BackgroundWatch(root=root).check() is None


def test_hostile_process_files_are_no_error(tmp_path, devices):
    root = _tree(tmp_path, devices, "sd8gen2-xiaomi13pro")
    (root / "proc/self/stat").write_text("4242 (a) b) (c) S 4100 1 1\n")  # a name with parentheses
    _process(root, 4100, "loop", 4101, 100)
    _process(root, 4101, "loop", 4100, 300)  # parents in a cycle: the walk is bounded
    (root / "proc/self/oom_score_adj").write_text("nine hundred\n")
    s = read_standing(root)
    assert (s.oom_score_adj, s.pid, s.own, s.klass) == (300, 4101, False, "kept")
    (root / "proc/4101/stat").write_text("4101 (x) S " + "9" * 4000 + "\n")  # a parent no pid can be
    assert read_standing(root).klass == "kept"
