"""Architecture hyper-parameters from GGUF metadata, the way llama.cpp reads them.

Mirrors llama_model_base::load_hparams (src/llama-model.cpp) and the per-architecture load_arch_hparams
(src/models/<arch>.cpp) of the llama.cpp that llama-cpp-python 0.3.36 vendors (ggml-org/llama.cpp@0c1e57098):
which layers hold a KV cache, how wide it is, which layers use a sliding window, MLA, recurrent state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from edgepilot.errors import UserError

RECURRENT_ARCHS = frozenset(
    {"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"}
)  # llm_arch_is_recurrent
# llm_arch_is_hybrid: some layers attend, the others carry recurrent state.
HYBRID_ARCHS = frozenset(
    {
        "jamba",
        "falcon-h1",
        "plamo2",
        "granitehybrid",
        "lfm2",
        "lfm2moe",
        "nemotron_h",
        "nemotron_h_moe",
        "qwen3next",
        "kimi-linear",
        "bailingmoe3",
        "kimi-k3",
        "glm5-next",
        "qwen35",
        "qwen35moe",
        "qwen4exp",
        "deepseek4",
        "minimax-01",
    }
)
# Hybrids that mark recurrent layers by the recurrent_layers array or every full_attention_interval-th layer
# (src/models/qwen3next.cpp and siblings); the others mark them with head_count_kv == 0.
_INTERVAL_HYBRIDS = frozenset({"qwen3next", "qwen35", "qwen35moe", "qwen4exp", "minimax-01"})
# llama_model::create_memory returns no memory for these (encoders, embedding and diffusion models).
NO_CACHE_ARCHS = frozenset(
    {
        "bert",
        "jina-bert-v2",
        "jina-bert-v3",
        "nomic-bert",
        "nomic-bert-moe",
        "neo-bert",
        "eurobert",
        "wavtokenizer-dec",
        "modern-bert",
        "gemma-embedding",
        "dream",
        "llada",
        "llada-moe",
        "rnd1",
    }
)
# Architectures with caches of their own kind (sparse-attention indexers, compressed KV): sized approximately.
SPECIAL_CACHE_ARCHS = frozenset(
    {
        "minimax-m3",
        "glm-dsa",
        "deepseek32",
        "glm5-next",
        "hy_v4",
        "dots3note",
        "deepseek4",
        "dflash",
        "qwen4exp",
    }
)


@dataclass(frozen=True)
class _SwaRule:
    when: str  # "always" | "window>0" (only if sliding_window > 0) | "array" (per-layer array required)
    n_pattern: int = 0  # default period; the GGUF's sliding_window_pattern (u32 or bool array) overrides
    dense_first: bool = False
    swa_type: str = "standard"
    default_n_swa: int = 0
    forced_n_swa: int | None = None  # the arch ignores the GGUF's window size


# From the load_arch_hparams of each src/models/<arch>.cpp.
SWA_RULES: dict[str, _SwaRule] = {
    "gemma2": _SwaRule("always", 2, default_n_swa=4096),
    "gemma3": _SwaRule("window>0", 6),
    "gemma3n": _SwaRule("always", 5),
    "gemma4": _SwaRule("array"),
    "cohere2": _SwaRule("always", 4),
    "cohere2moe": _SwaRule("always", 4, dense_first=True),
    "gpt-oss": _SwaRule("always", 2),
    "exaone-moe": _SwaRule("always", 4, default_n_swa=128),
    "olmo2": _SwaRule("window>0", 4),
    "afmoe": _SwaRule("window>0", 4),
    "mellum": _SwaRule("window>0", 4),
    "plamo3": _SwaRule("window>0", 8),
    "laguna": _SwaRule("window>0", 4, dense_first=True),
    "smallthinker": _SwaRule("window>0", 4, dense_first=True, forced_n_swa=4096),
    "muse-glimmer": _SwaRule("always", 4),
    "maple": _SwaRule("array"),
    "step35": _SwaRule("array"),
    "spark2_5": _SwaRule("array"),
    "mimo2": _SwaRule("array"),
    "granite_swa": _SwaRule("array"),
}


@dataclass
class ArchParams:
    arch: str
    n_layer_all: int  # block_count
    n_layer: int  # block_count minus the MTP (nextn) layers, which the main context does not cache
    n_embd: int
    n_head: list[int]  # per layer
    n_head_kv: list[int]  # per layer; 0 marks a recurrent layer in most hybrids
    head_k: int  # key_length of full-attention layers (default n_embd / n_head)
    head_v: int
    head_k_swa: int  # key_length_swa (default: head_k)
    head_v_swa: int
    n_vocab: int | None
    n_ctx_train: int | None
    n_swa: int  # sliding window in tokens (0: none)
    swa_type: str  # "none" | "standard" | "chunked"
    is_swa: list[bool]
    is_mla: bool  # K cache only (deepseek2-style latent attention, llama.cpp PR #19067)
    kv_lora_rank: int | None
    is_recurrent: list[bool]  # layers holding recurrent state
    is_attention: list[bool]  # layers attending over a KV cache (both are true in falcon-h1)
    has_kv: list[bool]  # False for layers that reuse another layer's cache (gemma3n, gemma4)
    n_embd_r: int  # recurrent conv / token-shift state per layer and sequence, f32 elements
    n_embd_s: int  # recurrent SSM / WKV state per layer and sequence, f32 elements
    has_cache: bool = True  # False for encoders / embedding models (no KV cache at all)
    notes: list[str] = field(default_factory=list)

    def n_embd_k_gqa(self, il: int) -> int:
        return (self.head_k_swa if self.is_swa[il] else self.head_k) * self.n_head_kv[il]

    def n_embd_v_gqa(self, il: int) -> int:
        return (self.head_v_swa if self.is_swa[il] else self.head_v) * self.n_head_kv[il]

    def attention_layers(self) -> list[int]:
        """Layers with a KV cache of their own in the main context."""
        if not self.has_cache:
            return []
        return [il for il in range(self.n_layer) if self.has_kv[il] and self.is_attention[il]]

    def recurrent_layers(self) -> list[int]:
        return [il for il in range(self.n_layer) if self.is_recurrent[il]] if self.has_cache else []


def _value(md: Mapping[str, Any], key: str) -> Any:
    v = md.get(key)
    # Values the header parser summarized (huge arrays, long strings) count as absent.
    return v if isinstance(v, (bool, int, float, str, list)) else None


def _int(md: Mapping[str, Any], key: str, default: int | None = None) -> int | None:
    v = _value(md, key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return default
    return int(v)


def _per_layer(md: Mapping[str, Any], key: str, n: int, default: list[int]) -> list[int]:
    """A scalar or per-layer array (ml.get_key_or_arr); missing entries keep the default."""
    v = _value(md, key)
    if isinstance(v, list):
        vals = [int(x) for x in v[:n] if isinstance(x, (int, float))]
        return vals + default[len(vals) :]
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return [int(v)] * n
    return list(default)


def _pattern(n_layer: int, n_layer_all: int, n_pattern: int, dense_first: bool) -> list[bool]:
    """llama_hparams::set_swa_pattern (src/llama-hparams.cpp)."""
    out = []
    for il in range(n_layer_all):
        if il >= n_layer:
            out.append(False)
        elif dense_first:
            out.append(n_pattern == 0 or il % n_pattern != 0)
        else:
            out.append(n_pattern == 0 or il % n_pattern < n_pattern - 1)
    return out


def arch_params(md: Mapping[str, Any]) -> ArchParams:
    """Hyper-parameters from a GGUF's metadata (a dict such as GGUFHeader.metadata).

    Raises UserError when keys llama.cpp requires are missing (llama.cpp would refuse the model too).
    """
    arch = _value(md, "general.architecture")
    if not isinstance(arch, str) or not arch:
        raise UserError("the model has no general.architecture key; llama.cpp cannot load it")
    notes: list[str] = []

    def need(suffix: str) -> int:
        v = _int(md, f"{arch}.{suffix}")
        if v is None:
            raise UserError(f"the model lacks '{arch}.{suffix}', which llama.cpp requires to load it")
        return v

    n_layer_all = need("block_count")
    if not 0 < n_layer_all <= 512:  # LLAMA_MAX_LAYERS
        raise UserError(f"'{arch}.block_count' is {n_layer_all}; llama.cpp accepts 1..512")
    n_embd = need("embedding_length")
    n_nextn = min(_int(md, f"{arch}.nextn_predict_layers", 0) or 0, n_layer_all)
    n_layer = n_layer_all - n_nextn
    n_head = _per_layer(md, f"{arch}.attention.head_count", n_layer_all, [0] * n_layer_all)
    n_head_kv = _per_layer(md, f"{arch}.attention.head_count_kv", n_layer_all, n_head)

    # src/llama-model.cpp: key/value length default to n_embd / n_head(0); 0 for attention-free models.
    h0 = n_head[0] if n_head else 0
    head_k = _int(md, f"{arch}.attention.key_length", n_embd // h0 if h0 else 0) or 0
    head_v = _int(md, f"{arch}.attention.value_length", n_embd // h0 if h0 else 0) or 0
    if not h0:
        head_k = head_v = 0
    head_k_swa = _int(md, f"{arch}.attention.key_length_swa", head_k) or 0
    head_v_swa = _int(md, f"{arch}.attention.value_length_swa", head_v) or 0

    tokens = md.get("tokenizer.ggml.tokens")
    n_vocab = _int(md, f"{arch}.vocab_size")
    if n_vocab is None and tokens is not None:
        n_vocab = len(tokens) if isinstance(tokens, list) else getattr(tokens, "count", None)

    # MLA: the GGUF stores the compressed latent as one KV head of key_length = kv_lora_rank + rope dims;
    # hparams.is_mla() is true when both *_mla lengths are set, and then no V cache is allocated.
    k_mla = _int(md, f"{arch}.attention.key_length_mla", 0) or 0
    v_mla = _int(md, f"{arch}.attention.value_length_mla", 0) or 0
    is_mla = k_mla > 0 and v_mla > 0

    n_swa, swa_type, is_swa = _sliding_window(md, arch, n_layer, n_layer_all, notes)
    is_attention, is_recurrent = _layer_kinds(md, arch, n_layer, n_layer_all, n_head_kv)
    window = _int(md, f"{arch}.attention.sliding_window", 0) or 0
    if arch == "lfm2" and window > 0:  # src/models/lfm2.cpp: every attention layer slides
        n_swa, swa_type = window, "standard"
        is_swa = [il < n_layer and not is_recurrent[il] for il in range(n_layer_all)]
    has_kv = [True] * n_layer_all
    kv_from_start = None
    if arch == "gemma3n":
        kv_from_start = 20  # src/models/gemma3n.cpp: later layers reuse the caches of layers 18/19
    elif arch == "gemma4":
        kv_from_start = n_layer_all - (_int(md, f"{arch}.attention.shared_kv_layers", 0) or 0)
    if kv_from_start is not None:
        has_kv = [il < kv_from_start for il in range(n_layer_all)]

    if arch in SPECIAL_CACHE_ARCHS:
        notes.append(f"{arch} uses a cache of its own kind in llama.cpp; its size here is approximate")
    elif arch in HYBRID_ARCHS:
        notes.append(f"{arch} is a hybrid: attention layers exact, recurrent state from the generic formula")

    p = ArchParams(
        arch=arch,
        n_layer_all=n_layer_all,
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_k=head_k,
        head_v=head_v,
        head_k_swa=head_k_swa,
        head_v_swa=head_v_swa,
        n_vocab=n_vocab,
        n_ctx_train=_int(md, f"{arch}.context_length"),
        n_swa=n_swa,
        swa_type=swa_type,
        is_swa=is_swa,
        is_mla=is_mla,
        kv_lora_rank=_int(md, f"{arch}.attention.kv_lora_rank"),
        is_recurrent=is_recurrent,
        is_attention=is_attention,
        has_kv=has_kv,
        n_embd_r=0,
        n_embd_s=0,
        has_cache=arch not in NO_CACHE_ARCHS,
        notes=notes,
    )
    if any(is_recurrent):
        p.n_embd_r, p.n_embd_s = _recurrent_sizes(md, arch, n_embd, h0)
    return p


def _sliding_window(
    md: Mapping[str, Any], arch: str, n_layer: int, n_layer_all: int, notes: list[str]
) -> tuple[int, str, list[bool]]:
    none = (0, "none", [False] * n_layer_all)
    window = _int(md, f"{arch}.attention.sliding_window")
    if arch == "phi3" and window:
        notes.append(
            "phi3: llama.cpp disables its sliding window (src/models/phi3.cpp), so every layer is full"
        )
        return none
    if arch == "llama4":
        # src/models/llama4.cpp: chunked attention of 8192 tokens, 3 chunked layers then 1 full,
        # unless the GGUF sets sliding_window = 0.
        if window == 0:
            return none
        rule = _SwaRule("always", 4, swa_type="chunked", forced_n_swa=8192)
    elif arch == "exaone4":
        if n_layer != 64:  # only the 32B model uses SWA (src/models/exaone4.cpp)
            return none
        rule = _SwaRule("always", 4, default_n_swa=4096)
    else:
        rule = SWA_RULES.get(arch)
        if rule is None:
            return none
    if rule.when == "window>0" and not window:
        return none
    n_swa = rule.forced_n_swa if rule.forced_n_swa is not None else (window or rule.default_n_swa)
    # load_swa_pattern (src/llama-model.cpp): a per-layer bool array wins, else a u32 period overrides.
    pat = _value(md, f"{arch}.attention.sliding_window_pattern")
    if isinstance(pat, list):
        is_swa = [bool(x) for x in pat[:n_layer_all]] + [False] * max(0, n_layer_all - len(pat))
    elif rule.when == "array":
        notes.append(f"{arch}: sliding_window_pattern array missing; llama.cpp would refuse the model")
        is_swa = [False] * n_layer_all
    else:
        n_pattern = (
            int(pat) if isinstance(pat, (int, float)) and not isinstance(pat, bool) else rule.n_pattern
        )
        is_swa = _pattern(n_layer, n_layer_all, n_pattern, rule.dense_first)
    if not any(is_swa):
        return none
    return n_swa, rule.swa_type, is_swa


def _layer_kinds(
    md: Mapping[str, Any], arch: str, n_layer: int, n_layer_all: int, n_head_kv: list[int]
) -> tuple[list[bool], list[bool]]:
    """(is_attention, is_recurrent) per layer: the filter_attn / filter_recr of llama_model::create_memory."""
    everything, nothing = [True] * n_layer_all, [False] * n_layer_all
    if arch in RECURRENT_ARCHS:
        return nothing, everything
    if arch not in HYBRID_ARCHS:
        return everything, nothing
    if arch == "falcon-h1":  # every layer has attention and an SSM side by side
        return everything, everything
    if arch in _INTERVAL_HYBRIDS:
        arr = _value(md, f"{arch}.attention.recurrent_layers")
        if isinstance(arr, list):
            recr = [bool(x) for x in arr[:n_layer_all]] + [False] * max(0, n_layer_all - len(arr))
        else:
            interval = _int(md, f"{arch}.full_attention_interval", 4) or 4
            recr = [il < n_layer and (il + 1) % interval != 0 for il in range(n_layer_all)]
        return [not r for r in recr], recr
    recr = [kv == 0 for kv in n_head_kv]
    if arch in ("nemotron_h", "nemotron_h_moe"):
        # layers with a feed-forward width are MLP-only: neither attention nor SSM
        n_ff = _per_layer(md, f"{arch}.feed_forward_length", n_layer_all, [0] * n_layer_all)
        mlp_only = [f > 0 for f in n_ff]
        return (
            [not r and not m for r, m in zip(recr, mlp_only, strict=True)],
            [r and not m for r, m in zip(recr, mlp_only, strict=True)],
        )
    return [not r for r in recr], recr


def _recurrent_sizes(md: Mapping[str, Any], arch: str, n_embd: int, n_head: int) -> tuple[int, int]:
    """llama_hparams::n_embd_r / n_embd_s (src/llama-hparams.cpp), in the same order of precedence."""
    wkv = _int(md, f"{arch}.wkv.head_size", 0) or 0
    d_conv = _int(md, f"{arch}.ssm.conv_kernel", 0) or 0
    d_inner = _int(md, f"{arch}.ssm.inner_size", 0) or 0
    d_state = _int(md, f"{arch}.ssm.state_size", 0) or 0
    n_group = _int(md, f"{arch}.ssm.group_count", 0) or 0
    l_cache = _int(md, f"{arch}.shortconv.l_cache", 0) or 0
    if wkv:  # RWKV: token-shift rows and the WKV matrix per head
        shift = _int(md, f"{arch}.token_shift_count", 2) or 2
        return shift * n_embd, n_embd * wkv
    n_embd_s = d_state * d_inner
    if l_cache:  # LFM2 short convolutions
        return n_embd * (l_cache - 1), n_embd_s
    # Mamba: the conv state keeps d_conv - 1 columns of x, B and C.
    return max(d_conv - 1, 0) * (d_inner + 2 * n_group * d_state), n_embd_s
