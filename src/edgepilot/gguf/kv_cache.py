"""KV cache and recurrent state size, as llama.cpp allocates them.

Sources (llama.cpp vendored by llama-cpp-python 0.3.36, ggml-org/llama.cpp@0c1e57098):
- src/llama-context.cpp: n_ctx = 0 means n_ctx_train; n_batch = min(n_ctx, n_batch); n_ubatch = min(n_batch,
  n_ubatch); n_ctx is padded to 256; without a unified KV each of the n_seq streams gets pad256(n_ctx / n_seq)
  cells. llama_context_default_params: swa_full = true, kv_unified = false, type_k = type_v = f16.
- src/llama-model.cpp create_memory: kv_size = n_ctx_seq, n_pad = 1, v_trans = !flash_attn.
- src/llama-kv-cache-iswa.cpp: SWA layers get pad256(min(n_ctx_seq, n_swa * (unified ? n_seq : 1) + n_ubatch))
  cells unless swa_full.
- src/llama-kv-cache.cpp: per layer K = [n_embd_k_gqa, cells, n_stream] of type_k, V likewise (padded to the
  widest layer when V is transposed, i.e. without flash attention); MLA models have no V tensor.
- src/llama-memory-recurrent.cpp: per recurrent layer r = [n_embd_r, max(1, n_seq)] and s = [n_embd_s, ..]
  of f32.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from edgepilot.gguf import ggml_types
from edgepilot.gguf.arch import ArchParams

PAD = 256


def _pad(n: int, to: int = PAD) -> int:
    return (n + to - 1) // to * to


@dataclass
class KVCacheSize:
    n_ctx: int  # as llama.cpp ends up with (padded to 256)
    n_ctx_seq: int  # cells per sequence stream in full-attention layers
    n_stream: int  # separate streams (n_seq without a unified cache, else 1)
    cells_full: int
    cells_swa: int  # 0 when the model has no sliding-window layers
    n_layers_full: int
    n_layers_swa: int
    n_layers_recurrent: int
    type_k: str
    type_v: str
    k_bytes_full: int = 0
    v_bytes_full: int = 0
    k_bytes_swa: int = 0
    v_bytes_swa: int = 0
    recurrent_bytes: int = 0  # r + s state of recurrent layers (f32)
    buffer_bytes: int = 0  # K + V + recurrent state: the KV / RS buffers llama.cpp logs
    rotation_bytes: int = 0  # Hadamard matrices kept in host memory for quantized K/V (llama-kv-cache.cpp)
    total_bytes: int = 0  # buffer_bytes + rotation_bytes
    refusals: list[str] = field(default_factory=list)  # reasons llama.cpp would refuse these settings
    notes: list[str] = field(default_factory=list)

    @property
    def full_bytes(self) -> int:
        return self.k_bytes_full + self.v_bytes_full

    @property
    def swa_bytes(self) -> int:
        return self.k_bytes_swa + self.v_bytes_swa


def kv_cache_bytes(
    p: ArchParams,
    n_ctx: int,
    type_k: str = "f16",
    type_v: str = "f16",
    n_seq: int = 1,
    swa_full: bool = True,
    n_ubatch: int = 512,
    n_batch: int = 2048,
    flash_attn: bool = False,
    kv_unified: bool = False,
) -> KVCacheSize:
    """Bytes llama.cpp allocates for the KV cache (and recurrent state) of a context with these settings.

    Defaults are llama.cpp's library defaults, which llama-cpp-python keeps (swa_full=True: the SWA layers
    get the whole context). n_ctx=0 means the model's training context.
    """
    if n_ctx < 0 or n_seq < 1 or n_ubatch < 1 or n_batch < 1:
        raise ValueError("n_ctx must be >= 0 and n_seq, n_ubatch, n_batch >= 1")
    tk, tv = ggml_types.type_id(type_k), ggml_types.type_id(type_v)
    refusals = _refusals(p, tk, tv, type_k, type_v, flash_attn)
    if n_ctx == 0:
        if not p.n_ctx_train:
            raise ValueError("n_ctx=0 means the training context, but the model does not state one")
        n_ctx = p.n_ctx_train
    n_batch = min(n_ctx, n_batch) if n_ctx else n_batch
    n_ubatch = min(n_batch, n_ubatch)
    n_ctx_pad = _pad(n_ctx)
    if kv_unified:
        n_ctx_seq, n_stream = n_ctx_pad, 1
    else:
        n_ctx_seq, n_stream = _pad(n_ctx_pad // n_seq), n_seq
    n_ctx_eff = n_ctx_seq * n_seq if not kv_unified else n_ctx_pad

    layers = p.attention_layers()
    has_swa = p.swa_type != "none" and any(p.is_swa[il] for il in layers)
    cells_full = n_ctx_seq
    cells_swa = 0
    if has_swa:
        cells_swa = (
            n_ctx_seq if swa_full else _pad(min(n_ctx_seq, p.n_swa * (n_seq if kv_unified else 1) + n_ubatch))
        )

    # [TAG_V_CACHE_VARIABLE]: a transposed V cache is as wide as the widest layer of the model.
    v_trans = not flash_attn
    v_max = max((p.n_embd_v_gqa(il) for il in range(p.n_layer_all)), default=0)
    out = KVCacheSize(
        n_ctx=n_ctx_eff,
        n_ctx_seq=n_ctx_seq,
        n_stream=n_stream,
        cells_full=cells_full,
        cells_swa=cells_swa,
        n_layers_full=0,
        n_layers_swa=0,
        n_layers_recurrent=len(p.recurrent_layers()),
        type_k=type_k,
        type_v=type_v,
        refusals=refusals,
        notes=list(p.notes),
    )
    row_k, row_v = _row_bytes(tk), _row_bytes(tv)  # the planner's searches call this dozens of times
    for il in layers:
        swa = has_swa and p.is_swa[il]
        cells = cells_swa if swa else cells_full
        k = row_k(p.n_embd_k_gqa(il)) * cells * n_stream
        v = 0 if p.is_mla else row_v(v_max if v_trans else p.n_embd_v_gqa(il)) * cells * n_stream
        if swa:
            out.n_layers_swa += 1
            out.k_bytes_swa += k
            out.v_bytes_swa += v
        else:
            out.n_layers_full += 1
            out.k_bytes_full += k
            out.v_bytes_full += v
    if out.n_layers_recurrent:
        rows = max(1, n_seq)
        out.recurrent_bytes = out.n_layers_recurrent * 4 * (p.n_embd_r + p.n_embd_s) * rows
    out.rotation_bytes = _rotation_bytes(p, layers, tk, tv, has_swa)
    out.buffer_bytes = out.full_bytes + out.swa_bytes + out.recurrent_bytes
    out.total_bytes = out.buffer_bytes + out.rotation_bytes
    return out


def _row_bytes(type_id: int) -> Callable[[int], int]:
    """Bytes of a row of n values of this type."""
    block, size = ggml_types.block_and_type_size(type_id) or (1, 0)
    return lambda n: -(-n // block) * size  # llama.cpp refuses a partial block; the refusal says so


def _refusals(p: ArchParams, tk: int, tv: int, type_k: str, type_v: str, flash_attn: bool) -> list[str]:
    """The checks of llama_init_from_model (src/llama-context.cpp), in llama.cpp's words."""
    out = []
    if type_k not in ggml_types.KV_CACHE_TYPES or type_v not in ggml_types.KV_CACHE_TYPES:
        out.append(f"unsupported cache type (allowed: {', '.join(ggml_types.KV_CACHE_TYPES)})")
    if p.is_mla and tk != tv:
        out.append(f"model does not support different K ({type_k}) and V ({type_v}) cache types")
    if ggml_types.is_quantized(tv) and not flash_attn:
        out.append("quantized V cache requires flash_attn to be enabled")
    layers = p.attention_layers()
    for tid, name, heads in ((tk, "K", "n_embd_head_k"), (tv, "V", "n_embd_head_v")):
        if not (flash_attn and ggml_types.is_quantized(tid)):
            continue
        block = (ggml_types.block_and_type_size(tid) or (1, 0))[0]
        for il in layers:
            width = _head_width(p, il, name)
            if width % block:
                out.append(
                    f"{name} cache type {ggml_types.type_name(tid)} with block size {block} does not "
                    f"divide {heads}={width}"
                )
                break
    return out


def _head_width(p: ArchParams, il: int, which: str) -> int:
    if which == "K":
        return p.head_k_swa if p.is_swa[il] else p.head_k
    return p.head_v_swa if p.is_swa[il] else p.head_v


def _rotation_bytes(p: ArchParams, layers: list[int], tk: int, tv: int, has_swa: bool) -> int:
    """Hadamard matrices that llama-kv-cache.cpp keeps in host memory, per cache, when K or V is quantized:
    n x n f32 for n = 64, 128, ... up to the cache's head size (all its layers must share one head size)."""
    if not (ggml_types.is_quantized(tk) or ggml_types.is_quantized(tv)):
        return 0  # no rotation without a quantized cache: the planner's f16 searches skip the per-layer sets
    caches = (
        [[il for il in layers if p.is_swa[il]], [il for il in layers if not p.is_swa[il]]]
        if has_swa
        else [layers]
    )
    total = 0
    for cache in caches:
        if not cache:
            continue
        heads_k = {_head_width(p, il, "K") for il in cache}
        heads_v = set() if p.is_mla else {_head_width(p, il, "V") for il in cache}
        k_all = heads_k.pop() if len(heads_k) == 1 else -1
        v_all = heads_v.pop() if len(heads_v) == 1 else (0 if not heads_v else -1)
        rot_k = k_all > 0 and ggml_types.is_quantized(tk) and _head_width(p, 0, "K") % 64 == 0
        rot_v = v_all > 0 and ggml_types.is_quantized(tv) and _head_width(p, 0, "V") % 64 == 0
        n = 64
        while (rot_k or rot_v) and n <= max(k_all, v_all):
            total += n * n * 4
            n *= 2
    return total
