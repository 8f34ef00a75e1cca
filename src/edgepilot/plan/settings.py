"""The settings one llama.cpp load is made with (what `fit` plans and `run` uses)."""

from __future__ import annotations

from dataclasses import dataclass

from edgepilot.errors import UserError

# ggml_type ids (ggml/include/ggml.h) for the KV cache types llama.cpp accepts via --cache-type-k/-v.
KV_TYPES: dict[str, int] = {
    "f32": 0,
    "f16": 1,
    "q4_0": 2,
    "q4_1": 3,
    "q5_0": 6,
    "q5_1": 7,
    "q8_0": 8,
    "iq4_nl": 20,
    "bf16": 30,
}
UNQUANTIZED_KV = {"f32", "f16", "bf16"}


def kv_type_id(name: str) -> int:
    try:
        return KV_TYPES[name.lower()]
    except KeyError:
        raise UserError(f"unknown KV cache type '{name}'; choose one of: {', '.join(KV_TYPES)}") from None


@dataclass(frozen=True)
class EngineSettings:
    n_ctx: int = 2048
    n_batch: int = 512
    n_ubatch: int = 512
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: bool = False
    use_mmap: bool = True
    n_threads: int = 4
    n_threads_batch: int | None = None  # None: same as n_threads
    n_gpu_layers: int = 0
    # llama-cli's default: sliding-window layers keep only the window, not n_ctx cells (less memory).
    # llama-cpp-python's Llama() keeps them full (llama_context_default_params).
    swa_full: bool = False
    # llama.cpp's CPU_REPACK extra buffer (weights re-laid for the CPU's fast kernels); off: --no-repack.
    repack: bool = True

    def validate(self) -> EngineSettings:
        if self.n_ctx < 16:
            raise UserError(f"context size {self.n_ctx} is too small; use --ctx 16 or more")
        if self.n_batch < 1 or self.n_ubatch < 1:
            raise UserError("batch and ubatch sizes must be at least 1")
        if self.n_threads < 1 or (self.n_threads_batch is not None and self.n_threads_batch < 1):
            raise UserError("thread count must be at least 1")
        kv_type_id(self.type_k)
        kv_type_id(self.type_v)
        if self.type_v.lower() not in UNQUANTIZED_KV and not self.flash_attn:
            raise UserError(
                f"a quantized V cache ({self.type_v}) needs flash attention in llama.cpp; add --flash-attn"
            )
        return self

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
            "-ngl",
            str(self.n_gpu_layers),
        ]
        if self.n_threads_batch is not None and self.n_threads_batch != self.n_threads:
            args += ["-tb", str(self.n_threads_batch)]
        if not self.use_mmap:
            args.append("--no-mmap")
        if self.swa_full:
            args.append("--swa-full")
        if not self.repack:
            args.append("--no-repack")
        return args
