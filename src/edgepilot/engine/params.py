"""EngineSettings as llama.cpp's model and context parameters: one mapping for the load and the dry run."""

from __future__ import annotations

import ctypes

from edgepilot.engine.interrupts import load_progress_callback
from edgepilot.engine.llama_binding import llama_cpp
from edgepilot.errors import UserError
from edgepilot.plan.settings import EngineSettings, kv_type_id

# llama.cpp's `-dev none`: a NULL-terminated device list holding no device (a NULL list means every device).
_NO_DEVICES = (ctypes.c_void_p * 1)()


def model_params(s: EngineSettings, no_alloc: bool = False) -> llama_cpp.llama_model_params:
    params = llama_cpp.llama_model_default_params()
    if not s.on_cpu:
        raise UserError(
            f"--device {s.device}: the in-process engine runs on the CPU (and --rpc helpers) only; "
            "`--engine tools` runs llama.cpp's own programs with their GPU backends"
        )
    if s.device is not None:  # None: the --rpc helpers' devices, which a NULL list includes
        params.devices = ctypes.addressof(_NO_DEVICES)
    params.n_gpu_layers = s.n_gpu_layers
    params.use_extra_bufts = s.repack  # False: no CPU_REPACK copies (llama.cpp's --no-repack)
    if no_alloc:  # a no-alloc pass maps nothing (llama-model.cpp asserts it)
        params.no_alloc = True
        params.load_mode = llama_cpp.LLAMA_LOAD_MODE_NONE
    else:
        params.load_mode = llama_cpp.LLAMA_LOAD_MODE_MMAP if s.use_mmap else llama_cpp.LLAMA_LOAD_MODE_NONE
    params.progress_callback = load_progress_callback()  # Ctrl-C stops the load
    return params


def context_params(s: EngineSettings) -> llama_cpp.llama_context_params:
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = s.n_ctx
    params.n_batch = s.n_batch
    params.n_ubatch = s.effective_ubatch
    params.n_seq_max = 1
    params.n_threads = s.n_threads
    params.n_threads_batch = s.n_threads_batch or s.n_threads
    params.type_k = kv_type_id(s.type_k)
    params.type_v = kv_type_id(s.type_v)
    params.flash_attn_type = (
        llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if s.flash_attn else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
    )
    params.swa_full = s.swa_full
    params.no_perf = True
    return params
