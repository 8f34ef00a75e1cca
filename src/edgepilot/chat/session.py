"""A multi-turn chat on one loaded model: the messages, the KV cache kept between turns, save and load.

Settings come from the same decision as `run` (tuned.decide), for a context that holds the whole session
(RUN_CTX unless --ctx says otherwise). Each turn renders the conversation with the model's chat template,
drops the oldest turns when it would not fit (with a note), reuses the cache for what the previous turn
already processed (engine/session.py) and measures itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from edgepilot.chat.saved_messages import saved_messages
from edgepilot.chat.template_note import no_template_note
from edgepilot.device.process import rss_bytes
from edgepilot.engine.choice import EngineInfo, choose_engine, open_engine, open_session
from edgepilot.engine.conversation import TRANSCRIPT_STOP, answer_room, fit_conversation
from edgepilot.engine.kv_slide import context_shift
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.engine.speculation import Speculation, speculating_engine
from edgepilot.engine.stops import StopMatcher
from edgepilot.engine.thermal_guard import ThermalReport
from edgepilot.errors import UserError
from edgepilot.gguf.resolve import resolve_model
from edgepilot.plan.requested import RequestedSettings
from edgepilot.plan.settings import EngineSettings
from edgepilot.plan.types import DoesNotFit
from edgepilot.tuned.decide import RUN_CTX, decide
from edgepilot.tuned.speculation_auto import AutoSpeculation, resolve_auto

MIB = 1 << 20
SAVE_FIX = "give /save a path in a folder you can write, e.g. /save ~/chat.sess"


@dataclass
class ChatTurn:
    n_prompt: int
    n_prompt_new: int  # prompt tokens processed this turn
    n_reused: int  # prompt tokens kept from the KV cache
    n_gen: int
    ttft_ms: float
    prompt_tps: float
    gen_tps: float
    rss_bytes: int
    stopped_by: str  # "eog" | "limit" | "context" | "caller" (a stop string, or Ctrl-C)
    notes: list[str] = field(default_factory=list)
    text: str = ""
    dropped: int = 0  # messages dropped this turn to fit the context
    n_slid: int = 0  # of n_reused: cached tokens slid down after the drop instead of processed again
    # design.md's context_shift, on a turn that dropped messages: cached tokens dropped, kept (slid or the
    # common prefix), and kept ones processed again (a cache that cannot slide)
    context_shift: dict[str, int] | None = None
    # --lookup / --draft: {kind, drafted, accepted, acceptance_rate, tokens_per_step} (None: not speculating)
    speculation: dict[str, Any] | None = None


@dataclass
class ChatResult:
    model: str
    settings: EngineSettings
    cache_reuse: bool
    turns: list[ChatTurn] = field(default_factory=list)
    llama_cpp_args: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    engine: EngineInfo | None = None
    thermal: ThermalReport | None = None  # --max-temp: the readings, each thread switch, what was said
    session_file: str | None = None  # where the chat is kept as it goes (None: --no-save)
    resumed: Any = None  # chat/persist.Resumed: what --resume brought back


class ChatSession:
    """Use as a context manager (the model's memory is freed at the end)."""

    def __init__(
        self,
        model: str | None,
        requested: RequestedSettings | None = None,
        system: str | None = None,
        n_predict: int = 512,
        sampler: SamplerSettings | None = None,
        cache_reuse: bool = True,
        verbose: bool = False,
        force: bool = False,
        budget_bytes: int | None = None,
        engine: str | None = None,
        save: bool = False,
        resume: str | None = None,
        speculation: Speculation | AutoSpeculation | None = None,
    ) -> None:
        """save: keep the session on disk after every turn (chat/keeper.py); resume: "" the newest session
        of this model, or a session file (chat/persist.py)."""
        if n_predict < 1:
            raise UserError("-n must be at least 1")
        auto_note = None
        if isinstance(speculation, AutoSpeculation):  # what tune kept for chat text, or plain
            speculation, auto_note = resolve_auto(speculation, resolve_model(model), "chat")
        engine = speculating_engine(engine, speculation)
        self.engine_info = choose_engine(engine, gpu=requested is not None and requested.wants_gpu)
        self.path = resolve_model(model)
        decision = decide(
            self.path, requested, ctx_needed=RUN_CTX, budget_bytes=budget_bytes, engine=self.engine_info,
            speculation=speculation,
        )  # fmt: skip
        self.plan = decision.plan
        if auto_note:
            self.plan.notes.append(auto_note)
        if not self.plan.fits and not force:
            raise DoesNotFit(self.plan)
        self.on_phase = decision.pin()
        self.system = system
        self.n_predict = n_predict
        self.sampler = sampler or SamplerSettings()
        self.messages: list[tuple[str, str]] = []
        self.engine = open_engine(
            self.engine_info,
            self.path,
            self.plan.settings,
            verbose,
            decision.cpus,
            decision.prompt_cpus,
            speculation,
        )
        self.kv = open_session(self.engine, reuse=cache_reuse)
        load = self.engine.load
        self.result = ChatResult(
            model=str(self.path),
            settings=replace(
                self.plan.settings, n_ctx=load.n_ctx, n_batch=load.n_batch, n_ubatch=load.n_ubatch
            ),
            cache_reuse=cache_reuse,
            llama_cpp_args=self.plan.llama_cpp_args,
            notes=list(self.plan.notes),
            engine=self.engine_info,
        )
        # a base model (no chat template): said once at the start, the chat goes on as a transcript
        self._full_said = False  # the context-full note is said once
        self.template_note = no_template_note(self.path)
        if self.template_note:
            self.result.notes.append(self.template_note)
        self.reset()
        self.resumed = None
        self.keeper = None
        self.save_note = ""
        try:
            self._persist(save, resume)
        except BaseException:
            self.engine.close()
            raise

    def _persist(self, save: bool, resume: str | None) -> None:
        from edgepilot.chat import persist
        from edgepilot.engine.session_state import model_identity

        if resume is not None:
            self.resumed = self.result.resumed = persist.resume(self, resume)
        if save:
            self._identity = model_identity(self.path)
            try:
                self.keeper = persist.keeper_for(self, self.resumed)
            except UserError as exc:  # a data folder we may not write: the chat goes on, unsaved, said once
                self.save_note = f"the chat is not being saved: {exc}"
                self.result.notes.append(self.save_note)
                return
            self.result.session_file = str(self.keeper.path)

    @property
    def max_state_bytes(self) -> int:
        return 2 * self.plan.memory.kv_bytes + 64 * MIB

    def __enter__(self) -> ChatSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.keeper is not None:
            self.keeper.wait()
        speculating = getattr(self.engine, "speculation", None) is not None  # a draft: not the plan
        if self.engine.kind == "tools" and self.result.turns and not speculating:
            from edgepilot.tuned.calibrate import learn_from_run

            used = max(t.n_prompt + t.n_gen for t in self.result.turns)
            learn_from_run(
                self.engine_info, self.path, self.plan, self.engine, self.engine.peak_rss_bytes(), used
            )
        self.engine.close()

    @property
    def n_ctx(self) -> int:
        return self.engine.load.n_ctx

    def reset(self) -> None:
        """Forget the conversation (the system prompt stays) and the KV cache."""
        self.messages = [("system", self.system)] if self.system else []
        self.kv.reset()

    def turn(
        self,
        user_text: str,
        on_text: Callable[[str], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> ChatTurn:
        """Answer one user message. `stop()` true (Ctrl-C) ends the answer where it is; the partial answer
        stays in the history (and in the cache). Too long a message: UserError, the history unchanged."""
        if self.keeper is not None:
            self.keeper.before_turn(user_text, len(self.messages))
        rendered = fit_conversation(
            self.engine,
            [*self.messages, ("user", user_text)],
            self.n_ctx,
            answer_room(self.n_predict, self.n_ctx),
        )
        pieces: list[str] = []
        lead = not rendered.templated  # a transcript: drop the space the model puts after "Assistant:"
        matcher = StopMatcher([] if rendered.templated else [TRANSCRIPT_STOP])

        def on_piece(text: str) -> bool:
            nonlocal lead
            if stop is not None and stop():
                return True
            if lead:
                text = text.lstrip(" ")
                lead = not text
            out, hit = matcher.feed(text)
            if out:
                pieces.append(out)
                if on_text is not None:
                    on_text(out)
            return hit

        slide = bool(rendered.dropped)  # the turns kept move down in the cache (engine/kv_slide.py)
        gen, t = self.kv.generate(
            rendered.tokens, self.n_predict, self.sampler, on_piece, self.on_phase, slide=slide
        )
        rest = matcher.flush()
        if rest:
            pieces.append(rest)
            if on_text is not None:
                on_text(rest)
        answer = "".join(pieces)
        self.messages = [*rendered.messages, ("assistant", answer.strip())]
        notes = self._full_notes(rendered.notes, t) + ([t.reuse_note] if t.reuse_note else [])
        turn = ChatTurn(
            n_prompt=t.n_prompt,
            n_prompt_new=t.n_prompt_new,
            n_reused=t.n_reused,
            n_gen=t.n_gen,
            ttft_ms=round(t.ttft_seconds * 1000, 1),
            prompt_tps=round(t.prompt_tps, 2),
            gen_tps=round(t.gen_tps, 2),
            rss_bytes=rss_bytes()[0] or 0,
            stopped_by=gen.stopped_by,
            notes=notes,
            text=answer,
            dropped=rendered.dropped,
            n_slid=t.n_slid,
            context_shift=context_shift(t) if rendered.dropped else None,
            speculation=None if gen.speculation is None else gen.speculation.to_json(),
        )
        self.result.turns.append(turn)
        if self.keeper is not None:
            from edgepilot.chat.persist import keep_turn

            keep_turn(self, self.keeper, self._identity)
        return turn

    def _full_notes(self, dropped_notes: list[str], t: Any) -> list[str]:
        """The context-full note, said at the first drop only (later turns count their drops in `dropped`),
        with what the cache did: slid, or (a memory that cannot shift) processed the kept turns again."""
        if not dropped_notes or self._full_said:
            return []
        self._full_said = True
        if t.n_slid:
            how = f"the turns kept slid down in the cache ({t.n_slid} tokens not processed again)"
        elif t.slide_blocked:
            how = t.slide_blocked
        else:
            return list(dropped_notes)
        return [f"{dropped_notes[0]}; {how}"]

    def save(self, path: str | Path) -> int:
        from edgepilot.engine.session_state import save_session

        return save_session(self.kv, path, {"messages": [list(m) for m in self.messages]}, SAVE_FIX)

    def load(self, path: str | Path) -> int:
        """Load a saved chat; returns the number of messages. The session is unchanged on refusal."""
        from edgepilot.engine.session_state import load_session

        max_state = self.max_state_bytes
        before = (list(self.messages), list(self.kv.cached))

        def check(header: dict[str, Any]) -> None:  # the messages too, before the cache is touched
            saved_messages(header, path, self.n_ctx)

        try:
            messages = saved_messages(load_session(self.kv, path, max_state, check), path, self.n_ctx)
        except UserError:
            if self.kv.cached != before[1]:  # llama.cpp refused the state after the cache was cleared
                self.kv.reset()
            self.messages = before[0]
            raise
        self.messages = messages
        return len(messages)

    def status(self) -> dict[str, Any]:
        turns = self.result.turns
        return {
            "messages": len(self.messages),
            "cached_tokens": len(self.kv.cached),
            "n_ctx": self.n_ctx,
            "turns": len(turns),
            "prompt_tokens_processed": sum(t.n_prompt_new for t in turns),
            "prompt_tokens_reused": sum(t.n_reused for t in turns),
            "rss_bytes": rss_bytes()[0] or 0,
        }
