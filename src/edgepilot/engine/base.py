"""The engine boundary: what run, chat and serve ask of llama.cpp, whichever implementation answers.

Two implementations: in-process through llama-cpp-python (engine/inprocess.py) and llama.cpp's own
llama-server as a child process (engine/server_engine.py). Neither this module nor its types load llama.cpp.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from edgepilot.errors import UserError

if TYPE_CHECKING:
    from edgepilot.engine.sampling import SamplerSettings
    from edgepilot.engine.speculation import SpecStats
    from edgepilot.plan.settings import EngineSettings


class EngineError(UserError):
    """llama.cpp refused to load or run (the message carries its last error lines; `log`, when the engine
    is a child process, its output for the doctor)."""

    def __init__(self, message: str, log: list[str] | None = None, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.log = log or []
        self.exit_code = exit_code  # the child's, as a shell reports it (137: SIGKILL), when it ended


@dataclass
class GenerationStats:
    n_prompt: int
    n_gen: int
    prompt_seconds: float
    gen_seconds: float
    stopped_by: str  # "eog" | "limit" | "context" | "caller"
    first_token_seconds: float | None = None  # from the start of prompt processing to the first sampled token
    n_past: int = 0  # prompt tokens that were already in the KV cache (not processed again)
    tokens: list[int] = field(default_factory=list, repr=False)  # generated and decoded: now in the KV cache
    speculation: SpecStats | None = None  # drafted and accepted tokens, when speculative decoding ran

    @property
    def prompt_tps(self) -> float:
        n = self.n_prompt - self.n_past  # the tokens really processed
        return n / self.prompt_seconds if self.prompt_seconds > 0 else 0.0

    @property
    def gen_tps(self) -> float:
        return self.n_gen / self.gen_seconds if self.gen_seconds > 0 else 0.0


@dataclass
class LoadInfo:
    seconds: float
    n_ctx: int  # what llama.cpp made of the settings (it pads n_ctx and clamps n_batch to it)
    n_batch: int
    n_ubatch: int
    n_ctx_train: int
    n_vocab: int
    n_params: int
    model_bytes: int
    description: str
    log: list[str] = field(default_factory=list)


@dataclass
class TurnStats:
    n_prompt: int  # the whole prompt, in tokens
    n_prompt_new: int  # processed this turn
    n_reused: int  # kept from the KV cache
    n_gen: int
    ttft_seconds: float  # from the turn's start to the first token's logits (cache trim + prompt processing)
    prompt_seconds: float
    gen_seconds: float
    gen_tps: float
    prompt_tps: float
    stopped_by: str
    reuse_note: str = ""  # why the cache could not be reused, when it could not
    n_slid: int = 0  # of n_reused: cached tokens moved down after dropped turns (engine/kv_slide.py)
    slide_blocked: str = ""  # why kept turns were processed again when they could have slid
    n_recomputed: int = 0  # kept tokens processed again because they could not slide
    n_cached_before: int = 0  # tokens the cache held when the turn began

    @classmethod
    def of(
        cls,
        gen: GenerationStats,
        ttft_seconds: float,
        reuse_note: str = "",
        n_slid: int = 0,
        slide_blocked: str = "",
        n_recomputed: int = 0,
        n_cached_before: int = 0,
    ) -> TurnStats:
        """A turn's figures from its generation (gen.n_past: the prompt tokens the cache kept)."""
        return cls(
            n_prompt=gen.n_prompt,
            n_prompt_new=gen.n_prompt - gen.n_past,
            n_reused=gen.n_past,
            n_gen=gen.n_gen,
            ttft_seconds=ttft_seconds,
            prompt_seconds=gen.prompt_seconds,
            gen_seconds=gen.gen_seconds,
            gen_tps=gen.gen_tps,
            prompt_tps=gen.prompt_tps,
            stopped_by=gen.stopped_by,
            reuse_note=reuse_note,
            n_slid=n_slid,
            slide_blocked=slide_blocked,
            n_recomputed=n_recomputed,
            n_cached_before=n_cached_before,
        )


PREFIX_BLOCK = 256


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many tokens two texts share from the start: blocks compared as whole lists (C speed), then the
    first block that differs token by token, so a step of a long context costs no Python loop over it."""
    n = min(len(a), len(b))
    i = 0
    while i + PREFIX_BLOCK <= n and a[i : i + PREFIX_BLOCK] == b[i : i + PREFIX_BLOCK]:
        i += PREFIX_BLOCK
    while i < n and a[i] == b[i]:
        i += 1
    return i


class Engine(Protocol):
    """One model + one context with fixed settings; a context manager that frees them."""

    kind: str  # "inprocess" | "tools"
    settings: EngineSettings
    load: LoadInfo

    def chat_prompt(self, user_text: str) -> str | None: ...

    def chat_messages_prompt(self, messages: list[tuple[str, str]]) -> str | None: ...

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]: ...

    def generate(
        self,
        prompt_tokens: list[int],
        n_predict: int,
        sampler: SamplerSettings | None = None,
        on_text: Callable[[str], bool | None] | None = None,
        stop_at_eog: bool = True,
        on_phase: Callable[[str], None] | None = None,
        n_past: int = 0,
    ) -> GenerationStats: ...

    def peak_rss_bytes(self) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> Engine: ...

    def __exit__(self, *exc: object) -> None: ...
