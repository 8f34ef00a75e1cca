"""Speculative decoding on llama-server (the tools engine): n-gram lookup in the text already there, or a
draft model, with llama.cpp verifying each drafted run of tokens in one batch. Greedy output is the target's
own; what it buys depends on how much a verify batch costs on this device against one token.

    Speculation(kind="lookup" | "draft", draft=PATH, n_max=N)
    speculation_args(spec, known_flags) -> llama-server flags (UserError when this llama-server has none)
    check_pair(target, draft) -> None, or UserError when the draft's tokenizer is not the target's
    SpecStats.from_timings(timings, n_gen) -> drafted, accepted, acceptance rate, tokens per verify step

llama-server spells the flags differently across versions (`--draft-max` became `--spec-draft-n-max`, the
kind became `--spec-type`): the installed program's `--help` says which it takes."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgepilot.errors import UserError

if TYPE_CHECKING:
    from edgepilot.plan.settings import EngineSettings

KINDS = ("lookup", "draft")
LOOKUP_TYPE = "ngram-simple"  # prompt lookup: a match in the context so far; nothing kept between requests
MAX_DRAFT_TOKENS = 64
# llama.cpp's --spec-ngram-simple-size-n default: lookup matches the last 12 tokens and drafts what followed
# only when at least that many follow (common_ngram_simple_draft), so a draft length under it drafts nothing
LOOKUP_NGRAM = 12


@dataclass(frozen=True)
class Speculation:
    kind: str  # "lookup" | "draft"
    draft: Path | None = None  # the draft model (kind "draft")
    n_max: int | None = None  # tokens drafted per verify step (None: llama.cpp's default)

    def validate(self) -> Speculation:
        if self.kind not in KINDS:
            raise UserError(f"speculation {self.kind!r}: give lookup or a draft model")
        if (self.kind == "draft") != (self.draft is not None):
            raise UserError("a draft model goes with --draft only")
        check_draft_max(self.n_max)
        if self.kind == "lookup" and self.n_max is not None and self.n_max < LOOKUP_NGRAM:
            raise UserError(
                f"--draft-max {self.n_max} with --lookup: llama.cpp's n-gram lookup drafts runs of at least "
                f"{LOOKUP_NGRAM} tokens (its n-gram), so it would draft nothing; give {LOOKUP_NGRAM} to "
                f"{MAX_DRAFT_TOKENS} or leave --draft-max out"
            )
        return self

    def describe(self) -> str:
        return "n-gram lookup" if self.kind == "lookup" else f"draft model {self.draft.name}"  # type: ignore[union-attr]

    def not_in_process(self) -> UserError:
        """The refusal where edgepilot's own (in-process) engine would run it."""
        what = "n-gram lookup in serve" if self.kind == "lookup" else "a draft model in serve"
        return UserError(
            f"{self.describe()} runs on llama-server in this version: add --engine tools "
            f"(the in-process engine has no {what} yet)"
        )


def check_draft_max(n_max: int | None) -> None:
    """--draft-max's bounds, whatever it drafts for."""
    if n_max is not None and not 1 <= n_max <= MAX_DRAFT_TOKENS:
        raise UserError(f"--draft-max {n_max}: give 1 to {MAX_DRAFT_TOKENS}")


def speculation_args(
    spec: Speculation, known: frozenset[str] | None, settings: EngineSettings | None = None
) -> list[str]:
    """llama-server's flags for `spec`, spelled as this llama-server knows them (known: its --help's), for a
    target run with `settings` (None: on the CPU). An offloaded target's draft goes to its device with as
    many layers, as the plan counts it: llama-server's own default for the draft's layers is "auto", whatever
    fits, and an older one's for its devices every device there is."""
    known = known or frozenset()
    args: list[str] = []
    if spec.kind == "lookup":
        if "--spec-type" not in known:
            raise UserError(
                "this llama-server has no n-gram lookup (no --spec-type in its --help): "
                "a llama.cpp from 2026 or later has it"
            )
        args += ["--spec-type", LOOKUP_TYPE]
    else:
        if "--spec-type" in known:
            args += ["--spec-type", "draft-simple"]
        if not ({"-md", "--model-draft"} & known):
            raise UserError("this llama-server takes no draft model (no -md in its --help)")
        args += ["-md", str(spec.draft)]
        if settings is None or settings.on_cpu:
            if "-devd" in known:
                args += ["-devd", "none"]  # the draft stays on the CPU with the target
        else:
            if settings.device and "-devd" in known:
                args += ["-devd", str(settings.device)]
            if "-ngld" in known:
                args += ["-ngld", str(settings.n_gpu_layers)]
    if spec.n_max is not None:
        flag = next((f for f in ("--spec-draft-n-max", "--draft-max") if f in known), None)
        if flag is None:
            raise UserError("this llama-server takes no draft length (--spec-draft-n-max)")
        if spec.kind == "lookup" and flag == "--spec-draft-n-max" and "--spec-ngram-simple-size-m" in known:
            flag = "--spec-ngram-simple-size-m"  # a lookup's draft is its m-gram
        args += [flag, str(spec.n_max)]
    return args


# the vendored llama-server's spellings (its --help): the advice line for what the in-process engine ran
VENDORED_FLAGS = frozenset(
    {"--spec-type", "-md", "-devd", "-ngld", "--spec-draft-n-max", "--spec-ngram-simple-size-m"}
)


def advice_args(spec: Speculation, settings: EngineSettings) -> list[str]:
    """The same speculation on llama-server, for the in-process engine's advice command line."""
    return speculation_args(spec, VENDORED_FLAGS, settings)


def speculating_engine(engine: str | None, spec: Speculation | None) -> str | None:
    """The engine to ask for: speculation runs on llama-server, so an automatic choice becomes "tools"; an
    explicit one (the flag, $EDGEPILOT_ENGINE) stands and the in-process engine refuses it with a reason."""
    if spec is not None and (engine or os.environ.get("EDGEPILOT_ENGINE") or "auto") == "auto":
        return "tools"
    return engine


def check_pair(target: Path, draft: Path) -> None:
    """Refuse a draft whose tokenizer is not the target's: its tokens would be verified as other words."""
    from edgepilot.gguf.tokenizer_id import differences, tokenizer_digests

    differ = differences(tokenizer_digests(target), tokenizer_digests(draft))
    if differ:
        raise UserError(
            f"{draft.name} cannot draft for {target.name}: their tokenizers differ ({', '.join(differ)}); "
            "a draft must be the same model family, ideally the same model at fewer bits (edgepilot quantize)"
        )


@dataclass
class SpecStats:
    kind: str
    drafted: int  # tokens the lookup or the draft model proposed
    accepted: int  # of them, what the target agreed with
    n_gen: int

    @property
    def acceptance_rate(self) -> float | None:
        return round(self.accepted / self.drafted, 3) if self.drafted else None

    @property
    def tokens_per_step(self) -> float | None:
        """Tokens per verify step of the target: each step gives its accepted drafts and one of its own."""
        steps = self.n_gen - self.accepted
        return round(self.n_gen / steps, 3) if steps > 0 and self.n_gen else None

    @classmethod
    def from_timings(cls, kind: str, timings: dict[str, Any], n_gen: int) -> SpecStats:
        drafted, accepted = timings.get("draft_n"), timings.get("draft_n_accepted")
        drafted = drafted if isinstance(drafted, int) and drafted >= 0 else 0
        accepted = accepted if isinstance(accepted, int) and 0 <= accepted <= drafted else 0
        return cls(kind, drafted, min(accepted, n_gen), n_gen)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "acceptance_rate": self.acceptance_rate,
            "tokens_per_step": self.tokens_per_step,
        }


def planned_extra_bytes(
    target: Path,
    settings: EngineSettings,
    spec: Speculation,
    root: str | Path = "/",
    compute_touched: int = 0,
) -> int:
    """What `spec` adds to the target's planned peak with these settings on the device at `root`, whose plan
    touches `compute_touched` bytes of its compute buffer (plan/speculation_memory.py)."""
    from edgepilot.plan.planner import load_model_facts
    from edgepilot.plan.speculation_memory import speculation_bytes

    _, _, arch = load_model_facts(target)
    n_vocab = arch.n_vocab or 0
    return speculation_bytes(n_vocab, settings, spec.kind, spec.n_max, spec.draft, root, compute_touched)


def extra_note(spec: Speculation, extra: int) -> str:
    what = (
        "the draft's weights and cache, the verify batch's logits"
        if spec.draft
        else "the verify batch's logits"
    )
    return f"the memory plan counts {spec.describe()}: {extra / (1 << 20):.0f} MiB more ({what})"
