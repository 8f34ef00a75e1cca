"""CPU means CPU (issue 40, part 4): with Mesa's Vulkan drivers installed and nothing offloaded, a CPU run on
llama.cpp's programs (the tools engine, Debian's llama.cpp 0.7.0 with its Vulkan backend) peaks as the same
run with the drivers absent, and its plan is the same. Before, the drivers were kept out only after a failed
check, and the loaded lavapipe (its libLLVM) made the peak 382 MiB against 318 MiB."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import sidlane as lane

ABSENT = {"VK_DRIVER_FILES": "/nonexistent/no-driver.json"}
PEAK = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def _data() -> dict[str, str]:
    return {"EDGEPILOT_DATA_DIR": f"/tmp/ep-cpu-{uuid.uuid4().hex[:10]}"}


def _edgepilot(root: Path, env: dict[str, str], *args: str) -> dict:
    done = lane.run(root, [f"{lane.VENV}/bin/edgepilot", *args, "--json"], env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _raw_peak(root: Path, model: str, env: dict[str, str]) -> int:
    """llama-completion on the CPU as edgepilot started it before (-dev none, the devices hidden)."""
    argv = ["llama-completion", "-m", model, "-p", "Hi", "-n", "2", "-no-cnv", "-c", "512", "-dev", "none"]
    done = lane.run(root, ["python3", "-c", PEAK, *argv], {"GGML_VK_VISIBLE_DEVICES": "", **env}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.strip())


def test_a_cpu_run_peaks_and_plans_as_without_the_drivers(gpu_root: Path, smollm_in_root: str) -> None:
    installed, absent = _raw_peak(gpu_root, smollm_in_root, {}), _raw_peak(gpu_root, smollm_in_root, ABSENT)
    assert installed > absent * 1.02, "the drivers cost nothing here: this lane cannot tell"
    run = ["run", smollm_in_root, "-p", "Count: one, two, three,", "-n", "4", "--temp", "0", "--ctx", "512"]
    peaks, plans = [], []
    for env in ({**_data()}, {**_data(), **ABSENT}):
        result = _edgepilot(gpu_root, env, *run)
        assert result["settings"]["device"] == "none" and result["n_gen"] == 4
        peaks.append(result["peak_rss_bytes"])
        plans.append(
            _edgepilot(gpu_root, env, "fit", smollm_in_root, "--ctx", "512")["memory"]["peak_rss_bytes"]
        )
    with_drivers, without = peaks
    print(
        f"raw llama-completion: {installed >> 20} MiB with the drivers, {absent >> 20} MiB without; "
        f"edgepilot run: {with_drivers >> 20} / {without >> 20} MiB; plan {plans[0] >> 20} / {plans[1] >> 20}"
    )
    assert abs(with_drivers - without) <= 0.02 * without, (with_drivers, without)
    assert abs(plans[0] - plans[1]) <= 0.05 * plans[1], plans
