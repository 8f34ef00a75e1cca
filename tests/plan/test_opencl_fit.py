"""fit on a phone with an Adreno (tests/devices): the offloaded run on its OpenCL device and, for a model
whose weights are of types ggml-opencl's kernels are slower for, the requantization to pure Q4_0 that
makes them fast; a Mali's OpenCL is said to be unusable; a model already fast there needs nothing."""

from __future__ import annotations

import io
import json

from click.testing import CliRunner
from rich.cells import cell_len
from rich.console import Console

from edgepilot.cli.fit_render import render_fit
from edgepilot.plan.fit import fit_model

ADRENO_750 = "sd8gen3-xiaomi14"
runner = CliRunner()


def _render(plan, width=50) -> str:
    buf = io.StringIO()
    render_fit(plan, Console(width=width, file=buf, color_system=None))
    return buf.getvalue()


def _joined(text: str) -> str:
    """The text's words on one line: wrapped prose and commands (print_command wraps them with ` \\`)."""
    return " ".join(w for w in text.split() if w != "\\")


def test_a_k_quant_model_gets_the_pure_q4_0_command(devices, gemma_path):
    plan = fit_model(gemma_path, root=devices / ADRENO_750, opencl=True)
    a = plan.opencl
    assert plan.settings.device == "none"  # the plan itself stays on the CPU until tune measures the GPU
    assert (a.device, a.verdict, a.fast, a.recommended_quant) == (
        "QUALCOMM Adreno(TM) 750",
        "supported",
        False,
        "Q4_0",
    )
    speeds = {name: v["speed"] for name, v in a.weight_types.items()}
    assert speeds == {"Q8_0": "fast", "Q5_0": "slower", "Q4_K": "slower", "Q6_K": "slower"}
    assert 0.2 < a.slower_share < 0.4  # Gemma's 170 MiB Q8_0 tied output is most of its matrix bytes
    out = str(gemma_path.parent / "gemma-3-270m-Q4_0-pure.gguf")
    assert a.requantize_out == out
    assert a.llama_quantize_args == [
        "llama-quantize",
        "--allow-requantize",
        "--pure",
        str(gemma_path),
        out,
        "Q4_0",
    ]
    assert a.edgepilot_quantize_args == ["edgepilot", "quantize", str(gemma_path), "--to", "Q4_0", "--pure"]
    o = a.offload
    assert (o.device, o.n_gpu_layers, o.fits) == ("GPUOpenCL", 19, True)  # Gemma 3 270M: 18 layers + output
    # the device's buffers count as RAM on a phone; no CPU_REPACK copy beside them (the CPU plan's 193 MiB)
    assert o.device_bytes > 0 and o.peak_rss_bytes > o.device_bytes + plan.memory.runtime_bytes
    assert o.llama_cpp_args[-4:] == ["-dev", "GPUOpenCL", "-ngl", "19"]
    assert any("no OpenCL driver measured on a phone yet" in n for n in o.notes)


def test_fit_prints_the_command_at_50_columns(cli_app, devices, gemma_path):
    res = runner.invoke(
        cli_app, ["fit", str(gemma_path), "--root", str(devices / ADRENO_750)], env={"COLUMNS": "50"}
    )
    assert res.exit_code == 0, res.output
    text = _joined(res.output)
    assert (
        f"llama-quantize --allow-requantize --pure {gemma_path} " in text and "-Q4_0-pure.gguf Q4_0" in text
    )
    assert f"edgepilot quantize {gemma_path} --to Q4_0 --pure" in text
    assert "GPU path: QUALCOMM Adreno(TM) 750 (OpenCL, GPUOpenCL)" in text
    for line in res.output.splitlines():  # only a single token (a path) may be wider than the screen
        assert cell_len(line) <= 50 or " " not in line.strip().removesuffix("\\").strip(), line


def test_fit_json_has_the_opencl_keys(cli_app, devices, gemma_path):
    res = runner.invoke(cli_app, ["fit", str(gemma_path), "--root", str(devices / ADRENO_750), "--json"])
    assert res.exit_code == 0, res.output
    a = json.loads(res.stdout)["opencl"]
    assert set(a) >= {
        "device",
        "verdict",
        "reasons",
        "fast_types",
        "weight_types",
        "fast",
        "slower_share",
        "recommended_quant",
        "requantize_out",
        "llama_quantize_args",
        "edgepilot_quantize_args",
        "offload",
    }
    assert set(a["offload"]) >= {
        "device",
        "n_gpu_layers",
        "peak_rss_bytes",
        "fits",
        "max_ctx",
        "llama_cpp_args",
    }


def test_a_model_of_fast_types_needs_no_requantization(devices, smollm_path):
    """SmolLM2 135M Q4_1: Q4_1 blocks and a Q8_0 tied output, both types the Adreno kernels are fast for."""
    plan = fit_model(smollm_path, root=devices / "sd8elite-galaxy-s25plus", opencl=True)
    a = plan.opencl
    assert a.fast and a.slower_share == 0 and a.llama_quantize_args == []
    assert set(a.weight_types) == {"Q4_1", "Q8_0"}
    text = _render(plan)
    assert "every matrix weight is of a type its kernels are fast for" in _joined(text)
    assert "llama-quantize" not in text


def test_a_mali_says_why_there_is_no_opencl_path(devices, gemma_path):
    plan = fit_model(gemma_path, root=devices / "rk3588-orangepi5plus", opencl=True)
    assert plan.opencl.offload is None and plan.opencl.verdict == "not-supported"
    text = _render(plan)
    assert "Mali-G610 r0p0: not usable by llama.cpp's OpenCL backend" in _joined(text)
    assert "llama-quantize" not in text


def test_no_opencl_device_no_section(devices, gemma_path):
    plan = fit_model(gemma_path, root=devices / "pixel6a-tensor-g1", opencl=True)
    assert plan.opencl is None and "GPU path" not in _render(plan)


def test_the_offloaded_run_named_by_the_user_is_the_plan(devices, gemma_path):
    from edgepilot.plan.requested import ALL_LAYERS, RequestedSettings

    req = RequestedSettings(device="GPUOpenCL", n_gpu_layers=ALL_LAYERS)
    plan = fit_model(gemma_path, req, root=devices / ADRENO_750, opencl=True)
    assert plan.settings.device == "GPUOpenCL" and set(plan.memory.device_bytes) == {"GPUOpenCL"}
    assert plan.opencl.offload.peak_rss_bytes == plan.memory.peak_rss_bytes
    # the OpenCL device binds up to its 1 GiB max allocation: Gemma's 170 MiB tied output is on it
    assert plan.memory.device_bytes["GPUOpenCL"] > 170 << 20
