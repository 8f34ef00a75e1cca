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


def test_the_doctors_cpu_fix_command_keeps_the_drivers_out_too(tmp_path, smollm_path, monkeypatch):
    """The doctor's `run:` line for a CPU llama.cpp run carries the same prefix fit's line does."""
    from rich.console import Console

    from edgepilot.cli.doctor_cmd import render_diagnosis
    from edgepilot.doctor.diagnose import diagnose

    failed = ["llama-cli", "-m", str(smollm_path), "-c", "32768", "-dev", "none", "-ngl", "0"]
    fail = ["ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 754974720"]
    d = diagnose(fail, exit_code=1, command=failed, root=None, budget_bytes=200 << 20)
    fix = next(c.fix_commands[0] for c in d.causes if c.fix_commands)
    assert fix[0] == "llama-cli" and "-dev" in fix and fix[fix.index("-dev") + 1] == "none", fix

    def shown(drivers: bool) -> list[str]:
        xdg = tmp_path / ("xdg" if drivers else "none")
        if drivers:
            (xdg / "vulkan" / "icd.d").mkdir(parents=True, exist_ok=True)
            (xdg / "vulkan" / "icd.d" / "lvp_icd.json").write_text(json.dumps(MANIFEST))
        monkeypatch.setenv("XDG_DATA_HOME", str(xdg))
        for k in [k for k in os.environ if k.startswith("VK_")]:
            monkeypatch.delenv(k)
        out = Console(width=400, record=True, force_terminal=False)
        render_diagnosis(d, out)
        return [ln.strip() for ln in out.export_text().splitlines() if ln.strip().startswith("run:")]

    with_drivers = shown(True)
    assert with_drivers and all(ln.startswith("run: VK_ICD_FILENAMES=/nonexistent/") for ln in with_drivers)
    assert all(" -dev none " in line for line in with_drivers)
    without = shown(False)
    assert without and all(line.startswith("run: llama-cli ") for line in without)
