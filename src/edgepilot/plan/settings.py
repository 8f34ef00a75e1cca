"""The settings one llama.cpp load is made with (what `fit` plans and `run` uses)."""

from __future__ import annotations

from dataclasses import dataclass

from edgepilot.errors import UserError
from edgepilot.gguf.ggml_types import KV_CACHE_TYPES, type_id

UNQUANTIZED_KV = {"f32", "f16", "bf16"}
# llama.cpp keeps context and batch sizes in uint32: a larger value would silently wrap around.
MAX_TOKENS_SETTING = 1 << 30
MAX_THREADS = 1024
CPU_DEVICE = "none"  # llama.cpp's `-dev none`: no device but the CPU


def kv_type_id(name: str) -> int:
    """The ggml type id of a KV cache type llama.cpp accepts (--cache-type-k / --cache-type-v)."""
    if name.lower() not in KV_CACHE_TYPES:
        raise UserError(f"unknown KV cache type '{name}'; choose one of: {', '.join(KV_CACHE_TYPES)}")
    return type_id(name)


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    """Every field llama.cpp is given. The context and thread count have no default here: the settings
    decision (edgepilot.tuned.decide) chooses them, or the caller says what it measures."""

    n_ctx: int
    n_batch: int = 512
    n_ubatch: int = 512
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: bool = False
    use_mmap: bool = True
    n_threads: int
    n_threads_batch: int | None = None  # None: same as n_threads
    n_gpu_layers: int = 0
    # llama.cpp's -dev: "none" is a CPU run (an installed GPU backend can neither take ops nor crash it), a
    # name (Vulkan0) offloads n_gpu_layers there; None leaves llama.cpp's own choice (the --rpc helpers).
    device: str | None = CPU_DEVICE
    repack: bool = True  # llama.cpp's CPU_REPACK copies of weights for the CPU's fast kernels
    # llama-cli's default: sliding-window layers keep only the window, not n_ctx cells (less memory).
    # llama-cpp-python's Llama() keeps them full (llama_context_default_params).
    swa_full: bool = False

    def validate(self) -> EngineSettings:
        if self.n_ctx < 16:
            raise UserError(f"context size {self.n_ctx} is too small; use --ctx 16 or more")
        if self.n_ctx > MAX_TOKENS_SETTING:
            raise UserError(
                f"context size {self.n_ctx} is too large; llama.cpp takes at most {MAX_TOKENS_SETTING}"
            )
        if not (1 <= self.n_batch <= MAX_TOKENS_SETTING and 1 <= self.n_ubatch <= MAX_TOKENS_SETTING):
            raise UserError(f"batch and ubatch sizes must be between 1 and {MAX_TOKENS_SETTING}")
        threads = [self.n_threads] + ([self.n_threads_batch] if self.n_threads_batch is not None else [])
        if not all(1 <= t <= MAX_THREADS for t in threads):
            raise UserError(f"thread count must be between 1 and {MAX_THREADS}")
        if self.n_gpu_layers < 0:
            raise UserError(f"--gpu-layers {self.n_gpu_layers}: give 0 or more, all or auto")
        if self.device == CPU_DEVICE and self.n_gpu_layers:
            raise UserError(
                f"--gpu-layers {self.n_gpu_layers} with --device none: name a device (--device Vulkan0), "
                "or leave --gpu-layers out for a CPU run"
            )
        kv_type_id(self.type_k)
        kv_type_id(self.type_v)
        if self.type_v.lower() not in UNQUANTIZED_KV and not self.flash_attn:
            raise UserError(
                f"a quantized V cache ({self.type_v}) needs flash attention in llama.cpp; add --flash-attn"
            )
        return self

    @property
    def on_cpu(self) -> bool:
        """No GPU takes part (the --rpc helpers' devices are not GPUs of this device). A named device at
        -ngl 0 is not a CPU run: llama.cpp still sends large batches there (op offload)."""
        return self.device is None or self.device == CPU_DEVICE

    @property
    def effective_ubatch(self) -> int:
        return min(self.n_ubatch, self.n_batch)

    def llama_cpp_args(self) -> list[str]:
        """The same settings as llama.cpp command-line flags (llama-cli / llama-server / llama-bench)."""
        args = [
            "-c",
            str(self.n_ctx),
            "-b",
            str(self.n_batch),
            "-ub",
            str(self.n_ubatch),
            "-t",
            str(self.n_threads),
            "-ctk",
            self.type_k,
            "-ctv",
            self.type_v,
            "-fa",
            "on" if self.flash_attn else "off",
        ]
        if self.device is not None:
            args += ["-dev", self.device]
        args += ["-ngl", str(self.n_gpu_layers)]
        if self.n_threads_batch is not None and self.n_threads_batch != self.n_threads:
            args += ["-tb", str(self.n_threads_batch)]
        if not self.use_mmap:  # this llama.cpp's tools have no --no-mmap: the load mode says it
            args += ["-lm", "none"]
        if not self.repack:
            args.append("--no-repack")
        if self.swa_full:
            args.append("--swa-full")
        return args
