"""llama.cpp in this process through llama-cpp-python's low-level API.

The per-token path stays in C (llama_decode + a llama_sampler chain): the high-level `Llama` loop copies the
whole logits row into numpy every token and loses 20-30 % of generation speed on small models.
"""

from __future__ import annotations

import copy
import ctypes
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from edgepilot.engine import interrupts, llama_log
from edgepilot.engine.base import EngineError, GenerationStats, LoadInfo
from edgepilot.engine.child_env import gpu_drivers_kept_out
from edgepilot.engine.llama_binding import llama_cpp
from edgepilot.engine.lookup_decoding import lookup_generate
from edgepilot.engine.params import context_params, model_params
from edgepilot.engine.sampling import GreedyPicker, SamplerSettings, build_chain
from edgepilot.engine.speculation import Speculation
from edgepilot.engine.token_text import TokenText
from edgepilot.engine.turns import Turns
from edgepilot.errors import UserError
from edgepilot.plan.settings import EngineSettings

_backend_ready = False


def init_backend(verbose: bool) -> None:
    global _backend_ready
    llama_log.install(echo=verbose)
    if not _backend_ready:
        with gpu_drivers_kept_out():
            llama_cpp.llama_backend_init()
            llama_cpp.llama_supports_gpu_offload()  # makes ggml's backend registry now, in the window
        _backend_ready = True


def _error_lines(log: list[str], limit: int = 2) -> str:
    keep = [
        ln.strip() for ln in log if any(w in ln.lower() for w in ("error", "failed", "unable", "invalid"))
    ]
    return "; ".join(keep[-limit:])


def _same_context(a: EngineSettings, b: EngineSettings) -> bool:
    """Whether one context serves both (thread counts can be changed on a live context)."""
    return replace(a, n_threads=1, n_threads_batch=None) == replace(b, n_threads=1, n_threads_batch=None)


class LlamaEngine:
    """One model + one context with fixed settings. Use as a context manager so C memory is freed."""

    kind = "inprocess"

    def __init__(self, model_path: Path, settings: EngineSettings, verbose: bool = False) -> None:
        settings.validate()
        self.settings = settings
        self.model_path = Path(model_path)
        self._parked: tuple[EngineSettings, llama_cpp.llama_context_p] | None = None
        self._owns_model = True
        self.turns: Turns | None = None  # serve's main lane: every decode is a step taken in turn
        # called before each decode with the tokens generated so far (0: a generation starts): the thermal
        # guard changes the thread count there (engine/thermal_guard.py)
        self.between_tokens: Callable[[int], None] | None = None
        self.speculation: Speculation | None = None  # --lookup: engine/lookup_decoding.py
        self.speculation_argv: list[str] = []  # its llama-server flags, for the advice line
        self.drafter: Any = None  # --draft: a DraftModel (engine/draft_decoding.py), closed with this engine
        init_backend(verbose)
        log_start = llama_log.mark()
        t0 = time.perf_counter()
        self._model = self._load_model()
        try:
            self._ctx = self._new_context()
        except BaseException:
            llama_cpp.llama_model_free(self._model)
            raise
        self.vocab = llama_cpp.llama_model_get_vocab(self._model)
        self._piece_buf = ctypes.create_string_buffer(256)
        self.load = LoadInfo(
            seconds=time.perf_counter() - t0,
            **self._context_sizes(),
            n_ctx_train=llama_cpp.llama_model_n_ctx_train(self._model),
            n_vocab=llama_cpp.llama_vocab_n_tokens(self.vocab),
            n_params=llama_cpp.llama_model_n_params(self._model),
            model_bytes=llama_cpp.llama_model_size(self._model),
            description=self._describe(),
            log=llama_log.lines_since(log_start),
        )

    def _load_model(self) -> llama_cpp.llama_model_p:
        params = model_params(self.settings)
        start = llama_log.mark()
        with interrupts.deferred() as interrupted:
            model = llama_cpp.llama_model_load_from_file(str(self.model_path).encode(), params)
            if not model:
                detail = _error_lines(llama_log.lines_since(start)) or "see --verbose for llama.cpp's log"
                raise EngineError(f"llama.cpp could not load {self.model_path}: {detail}")
            if interrupted():  # loaded all the same: free it, the interrupt is raised on the way out
                llama_cpp.llama_model_free(model)
        return model

    def _new_context(self) -> llama_cpp.llama_context_p:
        s = self.settings
        params = context_params(s)
        start = llama_log.mark()
        with interrupts.deferred() as interrupted:
            ctx = llama_cpp.llama_init_from_model(self._model, params)
            if not ctx:
                detail = _error_lines(llama_log.lines_since(start)) or "see --verbose for llama.cpp's log"
                raise EngineError(f"llama.cpp could not create a context (n_ctx={s.n_ctx}): {detail}")
            if interrupted():
                llama_cpp.llama_free(ctx)
        return ctx

    def reconfigure(self, settings: EngineSettings, park: bool = False) -> bool:
        """Context settings (ctx, batch, ubatch, threads, KV types, flash attention) changed: a fresh context
        on the loaded model. The weights stay mapped (and repacked, on ARM): no reload, which on a phone costs
        seconds per switch. mmap, repack and GPU layers shape the model itself and need a new engine.

        park=True keeps the current context aside (one at most): switching back to its settings swaps it in
        again, so A/B comparisons cost no new context each time. Returns True when a new context was created
        (its buffers are untouched memory: the first full-size batch pays the page faults)."""
        settings.validate()
        s = self.settings
        if (settings.use_mmap, settings.n_gpu_layers, settings.repack) != (
            s.use_mmap,
            s.n_gpu_layers,
            s.repack,
        ):
            raise ValueError("mmap, repack and GPU layers are model settings: load a new engine for them")
        parked, self._parked = self._parked, None
        if park:
            self._parked = (self.settings, self._ctx)
        elif self._ctx:
            llama_cpp.llama_free(self._ctx)
        self._ctx = None
        if parked is not None and _same_context(parked[0], settings):
            self._ctx = parked[1]
            self.settings = settings
            self.set_threads(settings.n_threads, settings.n_threads_batch)
            fresh = False
        else:
            if parked is not None:
                llama_cpp.llama_free(parked[1])  # first: a third context at once would need its KV cache too
            self.settings = settings
            self._ctx = self._new_context()
            fresh = True
        for name, value in self._context_sizes().items():  # in place: holders of self.load see them
            setattr(self.load, name, value)
        if self.drafter is not None:
            self.drafter.follow(settings)
        return fresh

    def sibling(self, settings: EngineSettings) -> LlamaEngine:
        """A second context with its own settings on this engine's model: the weights are shared, not loaded
        again. Close it before this engine (which frees the model)."""
        settings.validate()
        twin = copy.copy(self)
        twin.settings, twin._parked, twin._owns_model, twin.turns = settings, None, False, None
        twin.between_tokens, twin.drafter = None, None
        twin._piece_buf = ctypes.create_string_buffer(256)
        twin._ctx = twin._new_context()
        twin.load = replace(self.load, **twin._context_sizes(), seconds=0.0, log=[])
        return twin

    def _context_sizes(self) -> dict[str, int]:
        """What llama.cpp made of the context's settings (it clamps the batches to the context)."""
        ctx = self._ctx
        return {
            "n_ctx": llama_cpp.llama_n_ctx(ctx),
            "n_batch": llama_cpp.llama_n_batch(ctx),
            "n_ubatch": llama_cpp.llama_n_ubatch(ctx),
        }

    def _describe(self) -> str:
        buf = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_model_desc(self._model, buf, 256)
        return buf.value.decode("utf-8", errors="replace") if n > 0 else ""

    # -- lifecycle -------------------------------------------------------------------------------------------
    def close(self) -> None:
        drafter, self.drafter = getattr(self, "drafter", None), None
        if drafter is not None:
            drafter.close()
        parked = getattr(self, "_parked", None)
        if parked is not None:
            llama_cpp.llama_free(parked[1])
            self._parked = None
        if getattr(self, "_ctx", None):
            llama_cpp.llama_free(self._ctx)
            self._ctx = None
        if getattr(self, "_model", None):
            if self._owns_model:
                llama_cpp.llama_model_free(self._model)
            self._model = None

    def peak_rss_bytes(self) -> int:
        """The peak resident memory of the process that holds the model: this one."""
        from edgepilot.device.process import peak_rss_bytes

        return peak_rss_bytes()

    def __enter__(self) -> LlamaEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- text <-> tokens -------------------------------------------------------------------------------------
    def chat_prompt(self, user_text: str) -> str | None:
        from edgepilot.engine.chat import apply_chat_template

        return apply_chat_template(self._model, user_text)

    def chat_messages_prompt(self, messages: list[tuple[str, str]]) -> str | None:
        """A conversation of (role, content) pairs in the model's chat template, ready for the reply."""
        from edgepilot.engine.chat import apply_chat_messages

        return apply_chat_messages(self._model, messages)

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        data = text.encode("utf-8")
        n_max = len(data) + 8
        tokens = (llama_cpp.llama_token * n_max)()
        n = llama_cpp.llama_tokenize(self.vocab, data, len(data), tokens, n_max, add_special, parse_special)
        if n < 0:
            n_max = -n
            tokens = (llama_cpp.llama_token * n_max)()
            n = llama_cpp.llama_tokenize(
                self.vocab, data, len(data), tokens, n_max, add_special, parse_special
            )
        return list(tokens[:n])

    def bos_token(self) -> int | None:
        """The begin-of-text token, where a document starts (None: the model has none)."""
        token = llama_cpp.llama_vocab_bos(self.vocab)
        return token if token >= 0 else None

    def piece(self, token: int) -> bytes:
        n = llama_cpp.llama_token_to_piece(self.vocab, token, self._piece_buf, 256, 0, False)
        if n < 0:
            big = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, big, -n, 0, False)
            return big.raw[:n]
        return self._piece_buf.raw[:n]

    # -- evaluation ------------------------------------------------------------------------------------------
    def reset(self) -> None:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self._ctx), True)

    def _decode(self, tokens: ctypes.Array, n: int) -> None:
        rc = llama_cpp.llama_decode(self._ctx, llama_cpp.llama_batch_get_one(tokens, n))
        if rc != 0:
            self._decode_failed(rc)

    def _decode_failed(self, rc: int) -> None:
        detail = _error_lines(llama_log.lines_since(max(0, llama_log.mark() - 20)))
        raise EngineError(f"llama_decode failed with code {rc}" + (f": {detail}" if detail else ""))

    def set_threads(self, n_threads: int, n_threads_batch: int | None = None) -> None:
        """Change the thread counts of the live context (no reload; llama-bench does the same per test)."""
        if n_threads < 1 or (n_threads_batch is not None and n_threads_batch < 1):
            raise UserError("thread count must be at least 1")
        llama_cpp.llama_set_n_threads(self._ctx, n_threads, n_threads_batch or n_threads)

    def thread_counts(self) -> tuple[int, int]:
        """The live context's (generation, batch) thread counts, as llama.cpp holds them."""
        return llama_cpp.llama_n_threads(self._ctx), llama_cpp.llama_n_threads_batch(self._ctx)

    def eval_prompt(self, tokens: list[int]) -> float:
        """Decode the prompt in n_batch chunks (serve's main lane: in turns); returns the seconds it took."""
        n_batch = self.load.n_batch
        t0 = time.perf_counter()
        if self.turns is not None:
            self.turns.prompt_in_steps(tokens, n_batch, self._decode_tokens)
        else:
            for start in range(0, len(tokens), n_batch):
                self._decode_tokens(tokens[start : start + n_batch])
        return time.perf_counter() - t0

    def _decode_tokens(self, chunk: list[int]) -> None:
        self._decode((llama_cpp.llama_token * len(chunk))(*chunk), len(chunk))

    def generate(
        self,
        prompt_tokens: list[int],
        n_predict: int,
        sampler: SamplerSettings | None = None,
        on_text: Callable[[str], bool | None] | None = None,
        stop_at_eog: bool = True,
        on_phase: Callable[[str], None] | None = None,
        n_past: int = 0,
    ) -> GenerationStats:
        """Evaluate the prompt, then sample and decode up to n_predict tokens, streaming text to on_text.

        on_text may return True to stop early (a stop string was reached, the client went away): the result
        then says stopped_by="caller". on_phase is called with "prompt" and then "generate" before each
        phase starts (run and serve re-pin the process there when tune found other CPUs for each).
        n_past > 0: the KV cache already holds exactly prompt_tokens[:n_past] (engine/session.py made sure):
        only the rest is processed. The result's `tokens` are the generated tokens the KV cache now holds too.
        """
        n_ctx = llama_cpp.llama_n_ctx(self._ctx)
        if not prompt_tokens:
            raise UserError("the prompt is empty")
        if len(prompt_tokens) >= n_ctx:
            raise UserError(
                f"the prompt has {len(prompt_tokens)} tokens but the context holds {n_ctx}; "
                f"use a larger --ctx or a shorter prompt"
            )
        if not 0 <= n_past < len(prompt_tokens):
            raise ValueError("n_past must leave at least one prompt token to process")
        if n_past == 0:
            self.reset()
        between = self.between_tokens
        if between is not None:
            between(0)
        if on_phase is not None:
            on_phase("prompt")
        t_start = time.perf_counter()
        prompt_seconds = self.eval_prompt(prompt_tokens[n_past:] if n_past else prompt_tokens)
        if on_phase is not None:
            on_phase("generate")

        chosen = (sampler or SamplerSettings()).validate()
        ctx, vocab, llama_decode = self._ctx, self.vocab, llama_cpp.llama_decode
        if self.turns is not None:
            llama_decode = self.turns.in_turn(llama_decode)
        if chosen.temperature == 0:
            chain = None
            pick = GreedyPicker(ctx, llama_cpp.llama_vocab_n_tokens(vocab))
        else:
            chain = build_chain(chosen)
            sample_chain = llama_cpp.llama_sampler_sample

            def pick() -> int:
                return sample_chain(chain, ctx, -1)

        budget = min(n_predict, n_ctx - len(prompt_tokens))
        if self.speculation is not None:
            pick_at = pick.at if chain is None else (lambda i: sample_chain(chain, ctx, i))  # type: ignore[attr-defined]
            try:
                drafter = self.drafter.draft if self.drafter is not None else None
                out = lookup_generate(
                    self, prompt_tokens, budget, pick_at, on_text, stop_at_eog, t_start, drafter
                )
            finally:
                if chain is not None:
                    llama_cpp.llama_sampler_free(chain)
            return out.generation_stats(prompt_tokens, prompt_seconds, n_past, budget < n_predict)

        text_out = TokenText(vocab, self.piece, on_text, stop_at_eog)
        one = (llama_cpp.llama_token * 1)()
        batch = llama_cpp.llama_batch_get_one(one, 1)  # points at `one`: refilled per token, built once
        generated: list[int] = []
        keep = generated.append
        n_gen, stopped_by, first_token = 0, "limit", None
        t0 = t_end = time.perf_counter()
        try:
            while n_gen < budget:
                token = pick()
                if first_token is None:
                    first_token = time.perf_counter() - t_start
                why = text_out.stop_reason(token)
                if why is not None:
                    if why == "caller":
                        n_gen += 1
                        t_end = time.perf_counter()
                    stopped_by = why
                    break
                one[0] = token
                if between is not None:
                    between(n_gen + 1)
                rc = llama_decode(ctx, batch)
                if rc != 0:
                    self._decode_failed(rc)
                keep(token)
                n_gen += 1
                t_end = time.perf_counter()
            else:
                if budget < n_predict:
                    stopped_by = "context"
        finally:
            if chain is not None:
                llama_cpp.llama_sampler_free(chain)
        text_out.finish(stopped_by)
        return GenerationStats(
            n_prompt=len(prompt_tokens),
            n_gen=n_gen,
            prompt_seconds=prompt_seconds,
            gen_seconds=t_end - t0,
            stopped_by=stopped_by,
            first_token_seconds=first_token,
            n_past=n_past,
            tokens=generated,
        )
