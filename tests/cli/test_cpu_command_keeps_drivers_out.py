"""A printed CPU command line keeps the GPU drivers out as edgepilot's own CPU runs do (issue 40, part 4):
where this machine has a Vulkan driver manifest, fit's `llama.cpp:` line starts with a shell assignment of
VK_ICD_FILENAMES that points nowhere (and still names `-dev none`); a copy of it runs as printed. A GPU plan,
or a machine without drivers, prints the command as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import edgepilot

SRC = str(Path(edgepilot.__file__).resolve().parent.parent)
MANIFEST = {"file_format_version": "1.0.0", "ICD": {"library_path": "libvulkan_lvp.so", "api_version": "1.4"}}


def _fit(tmp_path: Path, model: Path, drivers: bool, *flags: str) -> str:
    xdg = tmp_path / ("xdg" if drivers else "none")
    if drivers:
        (xdg / "vulkan" / "icd.d").mkdir(parents=True, exist_ok=True)
        (xdg / "vulkan" / "icd.d" / "lvp_icd.json").write_text(json.dumps(MANIFEST))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VK_", "GGML_VK_"))}
    env.update(
        PYTHONPATH=SRC, EDGEPILOT_DATA_DIR=str(tmp_path / "data"), XDG_DATA_HOME=str(xdg), COLUMNS="400"
    )
    argv = [sys.executable, "-m", "edgepilot", "fit", str(model), "--ctx", "512", *flags]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("llama.cpp:")]
    return line.removeprefix("llama.cpp:").strip()


def test_a_cpu_command_carries_the_keep_out_variable_where_drivers_are_installed(tmp_path, smollm_path):
    line = _fit(tmp_path, smollm_path, True)
    assert line.startswith("VK_ICD_FILENAMES=/nonexistent/") and " -dev none " in line
    program = line.index(" llama-cli ")
    shell = subprocess.run(  # the printed prefix is an assignment a shell makes, not a quoted word
        ["sh", "-c", line[:program] + " env"], capture_output=True, text=True, timeout=30
    )
    assert "VK_ICD_FILENAMES=/nonexistent/edgepilot-no-vulkan-driver.json" in shell.stdout.splitlines()
    assert _fit(tmp_path, smollm_path, False).startswith("llama-cli ")
    gpu = _fit(tmp_path, smollm_path, True, "--device", "Vulkan0", "--gpu-layers", "2")
    assert gpu.startswith("llama-cli ") and " -dev Vulkan0 " in gpu
