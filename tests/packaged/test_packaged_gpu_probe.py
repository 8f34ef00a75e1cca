"""probe's GPUs with Debian's llama.cpp 0.7.0, its Vulkan backend and lavapipe (Mesa's software Vulkan
driver): hidden from ggml without GGML_VK_VISIBLE_DEVICES, `Vulkan0` with it, where the real driver check
(a 2-layer llama-bench run in a child) passes and the verdict still says it runs on the CPU. Also measured
here: which environment keeps the Vulkan driver out of a llama.cpp process."""

from __future__ import annotations

import json

import pytest
import sidlane as lane

VISIBLE = {"GGML_VK_VISIBLE_DEVICES": "0"}


def probe(root, env, *args):
    done = lane.run(root, ["edgepilot", "probe", "--json", *args], env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout), done.stderr


def data_dir(name):
    return {"EDGEPILOT_DATA_DIR": f"/tmp/ep-{lane.CHECKOUT_ID}-gpu-{name}"}


@pytest.fixture(scope="module")
def lavapipe(sid_root):
    if not lane.host_path(sid_root, "/usr/share/vulkan/icd.d/lvp_icd.json").exists():
        pytest.skip("the packaged lane has no lavapipe: run scripts/packaged-lane.sh again")
    lane.run(sid_root, ["sh", "-c", f"rm -rf /tmp/ep-{lane.CHECKOUT_ID}-gpu-*"])
    return sid_root


def test_hidden_lavapipe_is_listed_by_vulkan_not_by_llama_cpp(lavapipe):
    data, stderr = probe(lavapipe, data_dir("hidden"))
    (gpu,) = data["gpus"]
    assert gpu["name"].startswith("llvmpipe") and gpu["device_type"] == "CPU"
    assert (gpu["llama_cpp_name"], gpu["check"], gpu["verdict"]) == (None, None, "slow-software")
    assert any("GGML_VK_VISIBLE_DEVICES" in r for r in gpu["reasons"])
    assert (gpu["buffer_device_address"], gpu["storage_16bit"], gpu["subgroup_size"]) == (True, True, 8)
    assert gpu["memory_heaps"][0]["device_local"] is True
    assert "checking" not in stderr


def test_visible_lavapipe_passes_the_check_and_is_still_software(lavapipe):
    env = {**VISIBLE, **data_dir("visible")}
    data, stderr = probe(lavapipe, env)
    (gpu,) = data["gpus"]
    assert (gpu["llama_cpp_name"], gpu["backend"], gpu["verdict"]) == ("Vulkan0", "vulkan", "slow-software")
    assert gpu["llama_total_bytes"] > 0 and "probe: checking Vulkan0 (llvmpipe" in stderr
    check = gpu["check"]
    assert (check["ok"], check["outcome"], check["cached"]) == (True, "ok", False), check
    assert 0 < check["seconds"] < 60 and check["tool"] == "/usr/bin/llama-bench"
    device = check["facts"]["device"]
    assert (device["driver"], device["warp_size"], device["uma"], device["fp16"]) == (
        "llvmpipe",
        8,
        False,
        True,
    )
    assert check["facts"]["buffers"]["Vulkan0 model"] > 0 and check["facts"]["buffers"]["Vulkan0 KV"] > 0
    again, stderr = probe(lavapipe, env)
    assert again["gpus"][0]["check"]["cached"] is True and "checking" not in stderr


def test_snapshot_keeps_llama_cpps_list_and_its_replay_runs_no_check(lavapipe):
    out = f"/tmp/ep-{lane.CHECKOUT_ID}-gpu-snap"
    lane.run(lavapipe, ["rm", "-rf", out])
    done = lane.run(lavapipe, ["edgepilot", "snapshot", "save", out], env=VISIBLE, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    saved = lane.host_path(lavapipe, f"{out}/commands/llama-server---list-devices.txt").read_text()
    assert saved.startswith("Available devices:") and "Vulkan0: llvmpipe" in saved
    data, stderr = probe(lavapipe, {**VISIBLE, **data_dir("replay")}, "--root", out)
    (gpu,) = data["gpus"]
    assert (gpu["llama_cpp_name"], gpu["check"], gpu["verdict"]) == ("Vulkan0", None, "slow-software")
    assert "checking" not in stderr


KEEP_OUT = (
    "import json; from edgepilot.engine.gpu_check import driver_kept_out_env; "
    "print(json.dumps(driver_kept_out_env()))"
)


def keep_out_env(root) -> dict[str, str]:
    done = lane.run(root, [f"{lane.VENV}/bin/python", "-c", KEEP_OUT])
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    ("name", "driver_loads"),
    [
        ("VK_DRIVER_FILES", False),
        ("VK_ICD_FILENAMES", False),
        ("VK_LOADER_DRIVERS_DISABLE", False),
        ("GGML_VK_VISIBLE_DEVICES", True),  # hides the device from ggml, yet the loader loads the driver
    ],
)
def test_what_keeps_the_driver_out_of_llama_cpp(lavapipe, name, driver_loads):
    env = {**VISIBLE, name: keep_out_env(lavapipe)[name], "LD_DEBUG": "files"}
    listed = lane.run(lavapipe, ["llama-server", "--list-devices"], env=env, timeout=120)
    assert listed.returncode == 0 and "  (none)" in listed.stdout, listed.stdout
    assert ("libvulkan_lvp.so" in listed.stderr) is driver_loads


def test_the_whole_keep_out_environment_leaves_a_cpu_run(lavapipe):
    model = lane.model_in_root(lavapipe, "smollm")
    env = {**VISIBLE, **keep_out_env(lavapipe), "LD_DEBUG": "files"}
    bench = ["llama-bench", "-m", model, "-p", "0", "-n", "1", "-r", "1"]
    ran = lane.run(lavapipe, bench, env=env, timeout=300)
    assert ran.returncode == 0 and "| CPU " in ran.stdout, ran.stdout
    assert "libvulkan_lvp.so" not in ran.stderr and "loaded Vulkan backend" not in ran.stderr
