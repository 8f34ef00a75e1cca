"""Logs that point at two causes: the one that explains the failure comes first, the other is still listed."""

from __future__ import annotations

import pytest
from doctorkit import diagnose_log

# file, device, expected order of the first causes
AMBIGUOUS = [
    # A lost Vulkan device, with the model on ~/storage/shared: the crash is the GPU's, the storage only slow.
    ("vk-device-lost-mali-g715-10406.txt", None, ["vulkan-device-lost", "slow-storage-fuse"]),
    # The KV cache allocation failed at n_ctx = 1M: the context is the cause, the failed allocation a symptom.
    ("ctx-kv-1m-8101.txt", None, ["context-too-large", "out-of-memory-alloc"]),
    # A 32-bit (i686) build calls a 5 GB file "not within the file bounds": 32-bit offsets, not a broken file.
    ("bits32-i686-bounds-ollama-6228.txt", None, ["userland-32bit", "model-corrupt"]),
    # A 32-bit (armv7l) Termux and an SD card rejecting direct I/O: the card is what failed the read.
    ("fuse-sdcard-direct-io-18766.txt", None, ["slow-storage-fuse", "userland-32bit"]),
    # Termux's "signal 9" alone: the phantom-process killer, though memory is possible.
    ("phantom-signal9.txt", None, ["background-killed", "killed-by-system"]),
    # A mapping failure on a 32-bit Termux: address space, not free RAM.
    ("bits32-mapview-4521.txt", "redmi-note8-termux32", ["userland-32bit", "out-of-memory-alloc"]),
]


@pytest.mark.parametrize("name,device,order", AMBIGUOUS)
def test_ambiguous_logs_rank_the_right_cause_first(name, device, order):
    d = diagnose_log(name, device)
    ids = [c.id for c in d.causes]
    assert ids[: len(order)] == order, [(c.id, c.score) for c in d.causes]
    scores = [c.score for c in d.causes]
    assert scores == sorted(scores, reverse=True)


def test_lmkd_lines_beat_the_phantom_killer_for_a_plain_killed():
    # rknn-llm#249: `Killed` with lmkd killing other apps around it: memory, not the phantom killer.
    d = diagnose_log("killed-rknn-lmkd.txt", "sd8gen2-xiaomi13pro")
    assert d.causes[0].id == "killed-by-system"
    assert "background-killed" not in [c.id for c in d.causes]


def test_phantom_log_beats_memory_even_with_sigkill():
    d = diagnose_log("phantom-termux-2366.txt", "sd8gen2-xiaomi13pro", exit_code=137)
    assert [c.id for c in d.causes][:2] == ["background-killed", "killed-by-system"]
    assert any("SDK 33" in e for e in d.causes[0].evidence)


def test_sigkill_alone_on_an_android_12_phone_lists_both_killers():
    from doctorkit import DEVICES

    from edgepilot.doctor.diagnose import diagnose

    d = diagnose([], exit_code=137, root=DEVICES / "sd8gen2-xiaomi13pro")
    ids = [c.id for c in d.causes]
    assert ids[:2] == ["killed-by-system", "background-killed"]
    assert "exit status 137 = killed by SIGKILL (9)" in d.causes[0].evidence
