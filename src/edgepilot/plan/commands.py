"""Settings as command lines users copy: llama.cpp's tools and edgepilot's own commands (one builder each)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from edgepilot.device.cpusets import cpu_mask, cpulist
from edgepilot.plan.settings import EngineSettings


def llama_cpp_command(
    model: Path | str,
    settings: EngineSettings,
    tool: str = "llama-cli",
    cpus: Sequence[int] | None = None,
    prompt_cpus: Sequence[int] | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """`taskset -c CPUS llama-cli -m MODEL <settings> [-C/-Cb masks] EXTRA`.

    `taskset` confines the process on every kernel (llama.cpp's own masks were a no-op on Android until
    mid-2026); the masks give prompt processing and generation their own CPUs when those differ."""
    args = [tool, "-m", str(model), *settings.llama_cpp_args()]
    if cpus and prompt_cpus and set(prompt_cpus) != set(cpus):
        args += [
            "-C",
            cpu_mask(cpus),
            "--cpu-strict",
            "1",
            "-Cb",
            cpu_mask(prompt_cpus),
            "--cpu-strict-batch",
            "1",
        ]
    args += list(extra)
    if cpus:
        return ["taskset", "-c", cpulist(sorted({*cpus, *(prompt_cpus or ())})), *args]
    return args


def edgepilot_command(model: Path | str, settings: EngineSettings, tool: str = "run") -> list[str]:
    """The edgepilot command line that asks for exactly these settings."""
    args = ["edgepilot", tool, str(model), "--ctx", str(settings.n_ctx), "--ubatch", str(settings.n_ubatch)]
    args += ["--threads", str(settings.n_threads)]
    if settings.type_k != "f16":
        args += ["--kv", settings.type_k]
    if settings.flash_attn:
        args.append("--flash-attn")
    if not settings.use_mmap:
        args.append("--no-mmap")
    if not settings.repack:
        args.append("--no-repack")
    if not settings.on_cpu:
        args += ["--device", str(settings.device), "--gpu-layers", str(settings.n_gpu_layers)]
    return args
