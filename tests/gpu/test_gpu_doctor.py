"""`edgepilot doctor -- CMD` in the GPU lane, wrapping llama.cpp's real crash on the lying layer: edgepilot
survives, passes llama.cpp's exit status on, and names the cause with the device it probes there."""

from __future__ import annotations

import json
from pathlib import Path

import sidlane as lane
from gpulane import completion, lying_env


def _doctor(root: Path, layer: str, mode: str, *flags: str, model: str) -> tuple[int, dict]:
    argv = [f"{lane.VENV}/bin/edgepilot", "doctor", "--json", "--", *completion(model, *flags)]
    done = lane.run(root, argv, lying_env(layer, mode), timeout=300)
    return done.returncode, json.loads(done.stdout)


def test_doctor_names_the_null_function_of_the_old_mali(
    gpu_root: Path, lying_layer: str, smollm_in_root: str
) -> None:
    code, report = _doctor(gpu_root, lying_layer, "bda", "-ngl", "99", model=smollm_in_root)
    assert code == 139 and report["exit_code"] == 139 and report["signal"] == 11
    ids = [c["id"] for c in report["causes"]]
    assert ids[:3] == ["vulkan-null-function", "vulkan-api-too-old", "vulkan-driver-crash"], ids
    top = report["causes"][0]
    assert any("Mali-G77 MC9: Vulkan apiVersion 1.1.177" in e for e in top["evidence"]), top["evidence"]
    assert "-dev none -ngl 0" in top["fix"] and smollm_in_root in top["fix"]


def test_doctor_on_a_crash_in_vkcreatedevice(gpu_root: Path, lying_layer: str, smollm_in_root: str) -> None:
    code, report = _doctor(gpu_root, lying_layer, "create-device", "-ngl", "0", model=smollm_in_root)
    assert code == 139
    crash = next(c for c in report["causes"] if c["id"] == "vulkan-driver-crash")
    assert "the command offloads layers (-ngl 0" in " ".join(crash["evidence"])
    assert "-dev none -ngl 0" in crash["fix"]
