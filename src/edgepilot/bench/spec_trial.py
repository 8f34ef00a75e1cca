"""`tune --speculation`: whether speculative decoding pays on this device, measured per kind of text.

On llama-server with the tuned settings, plain generation and each candidate (n-gram lookup; a draft model
when given) generate greedily from a built-in prompt per kind of text (chat, rewrite, code), in alternating
rounds (plain and the candidates take turns, so load that comes and goes weighs on all alike). Per kind, the
median speed of each against plain's; a candidate is kept only where it measured at least KEEP_GAIN faster,
and the trial says why it kept or dropped each.

    speculation_trial(model, settings, candidates, rounds, n_gen, progress) -> SpecTrial
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from edgepilot.engine.sampling import SamplerSettings
from edgepilot.engine.speculation import SpecStats, Speculation
from edgepilot.plan.settings import EngineSettings
from edgepilot.plan.speculation_memory import DEFAULT_N_MAX

KEEP_GAIN = 1.05
PARAGRAPH = (
    "The quick brown fox jumps over the lazy dog near the river bank, while the farmer watches from his old "
    "wooden porch and the sun sets slowly behind the hills. Children run home from school, laughing, and the "
    "baker closes his shop after a long day of making bread for the whole village."
)
CODE = """def read_config(path):
    with open(path) as f:
        lines = f.read().splitlines()
    config = {}
    for line in lines:
        key, _, value = line.partition("=")
        config[key.strip()] = value.strip()
    return config


def read_secrets(path):
"""
# kind -> (text, wrapped in the model's chat template)
PROMPTS: dict[str, tuple[str, bool]] = {
    "chat": ("Write a long story about a robot who learns to paint.", True),
    "rewrite": (f"{PARAGRAPH}\n\n{PARAGRAPH}\n\n", False),
    "code": (CODE, False),
}


@dataclass
class SpecCandidate:
    tg_ts: float  # median generation speed with it
    speedup: float  # against plain's median, same kind, same rounds
    acceptance_rate: float | None
    tokens_per_step: float | None
    drafted: int = 0  # the rounds together
    accepted: int = 0
    n_gen: int = 0
    # from this device's verify costs and the acceptance measured (bench/spec_costs.py; None: not predicted)
    predicted: float | None = None
    best_draft_max: int | None = None  # a draft model: the draft length predicted fastest
    samples_ts: list[float] = field(default_factory=list)  # each round's speed
    best_predicted: float | None = None  # the speed-up predicted at best_draft_max
    draft_max: int | None = None  # the draft length measured (None: llama-server's default)


@dataclass
class SpecKind:
    plain_tg_ts: float
    candidates: dict[str, SpecCandidate] = field(default_factory=dict)
    kept: str | None = None  # the candidate kept for this kind of text (None: plain)
    why: str = ""
    plain_samples_ts: list[float] = field(default_factory=list)  # each round's plain speed
    # a draft model measured at two lengths (bench/spec_lengths.py): length -> speed-up
    draft_lengths: dict[int, float] = field(default_factory=dict)
    # tune --sustained: the kept candidate's steady speed over plain's (bench/spec_hold.py; None: not held)
    steady_speedup: float | None = None
    # candidate -> (the prompt's tokens, what its last round generated): lookup's steps are replayed from them
    texts: dict[str, tuple[list[int], list[int]]] = field(
        default_factory=dict, repr=False, metadata={"json": False}
    )


@dataclass
class SpecTrial:
    rounds: int
    n_gen: int
    kinds: dict[str, SpecKind]
    seconds: float = 0.0
    draft: str | None = None  # the draft model measured (its path), when there was one
    settings: dict[str, Any] = field(default_factory=dict)  # the llama-server settings every run used
    lengths_measured: list[int] = field(default_factory=list)  # a draft model: the draft lengths measured
    hold: Any = None  # tune --sustained: the kept candidates held against plain in windows (a SpecHold)

    def kept(self) -> dict[str, dict[str, Any]]:
        """What a profile keeps: per kind of text, the speculation that measured faster, with its gain (and
        the draft model's path for a draft); the steady gain where it was held under --sustained."""
        out: dict[str, dict[str, Any]] = {}
        for kind, k in self.kinds.items():
            if k.kept is None:
                continue
            gain = k.steady_speedup if k.steady_speedup is not None else k.candidates[k.kept].speedup
            if k.kept == "lookup":
                out[kind] = {"kind": "lookup", "speedup": gain}
            elif k.kept == "draft" and self.draft is not None:
                c = k.candidates["draft"]
                out[kind] = {"kind": "draft", "speedup": gain, "draft": self.draft}
                if c.draft_max is not None:
                    out[kind]["draft_max"] = c.draft_max
        return out


def speculation_trial(
    model: Path,
    settings: EngineSettings,
    candidates: dict[str, Speculation],
    rounds: int = 3,
    n_gen: int = 64,
    progress: Callable[[str], None] | None = None,
    tool: Path | None = None,
) -> SpecTrial:
    """Plain and each candidate, `rounds` times in turn, every kind of text each time (greedy)."""
    import time

    from edgepilot.engine.server_engine import ServerEngine

    t0 = time.perf_counter()
    say = progress or (lambda _msg: None)
    names = ["plain", *candidates]
    speeds: dict[str, dict[str, list[float]]] = {n: {k: [] for k in PROMPTS} for n in names}
    stats: dict[str, dict[str, list[Any]]] = {n: {k: [] for k in PROMPTS} for n in names}
    texts: dict[str, dict[str, tuple[list[int], list[int]]]] = {n: {} for n in names}
    greedy = SamplerSettings(temperature=0.0)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            say(f"speculation: round {r + 1} of {rounds}, {name}")
            with ServerEngine(model, settings, tool=tool, speculation=candidates.get(name)) as server:
                for kind in PROMPTS:
                    tokens = prompt_tokens(server, kind)
                    gen = server.generate(tokens, n_gen, sampler=greedy, cache_prompt=False)
                    speeds[name][kind].append(gen.gen_tps)
                    stats[name][kind].append(gen.speculation)
                    texts[name][kind] = (tokens, list(gen.tokens))
    n_max = {name: spec.n_max for name, spec in candidates.items()}
    kinds = {kind: _judge(kind, speeds, stats, n_max) for kind in PROMPTS}
    for kind, k in kinds.items():
        k.texts = {name: texts[name][kind] for name in candidates if kind in texts[name]}
    draft = candidates["draft"].draft if "draft" in candidates else None
    kept = None if draft is None else os.path.abspath(draft)  # --draft auto finds it from any folder
    seconds = round(time.perf_counter() - t0, 1)
    measured = [candidates["draft"].n_max or DEFAULT_N_MAX["draft"]] if draft is not None else []
    return SpecTrial(rounds, n_gen, kinds, seconds, kept, asdict(settings), measured)


def prompt_tokens(engine: Any, kind: str) -> list[int]:
    """The kind's built-in prompt as the engine's tokens (a chat prompt through its chat template)."""
    text, templated = PROMPTS[kind]
    formatted = engine.chat_prompt(text) if templated else None
    return engine.tokenize(formatted if formatted is not None else text)


def _judge(kind: str, speeds: dict, stats: dict, candidates_n_max: dict[str, int | None]) -> SpecKind:
    plain = statistics.median(speeds["plain"][kind])
    out = SpecKind(round(plain, 2), plain_samples_ts=[round(v, 3) for v in speeds["plain"][kind]])
    for name in candidates_n_max:
        tg = statistics.median(speeds[name][kind])
        runs = [s for s in stats[name][kind] if s is not None]
        drafted, accepted = sum(s.drafted for s in runs), sum(s.accepted for s in runs)
        total = SpecStats(name, drafted, accepted, sum(s.n_gen for s in runs))  # the rounds together
        out.candidates[name] = SpecCandidate(
            round(tg, 2),
            round(tg / plain, 3) if plain > 0 else 0.0,
            total.acceptance_rate,
            total.tokens_per_step,
            drafted,
            accepted,
            total.n_gen,
            samples_ts=[round(v, 3) for v in speeds[name][kind]],
            draft_max=candidates_n_max[name],
        )
    decide_kept(out)
    return out


def candidate_label(name: str, c: SpecCandidate) -> str:
    """How a candidate is named to the user: a draft measured at a length of its own says which."""
    return f"draft ({c.draft_max})" if name == "draft" and c.draft_max else name


def decide_kept(out: SpecKind) -> None:
    """The candidate kept for this kind of text (5 %+ over plain, drafts kept by the model), and why."""
    # a gain needs drafts the model kept: one that drafted nothing can only have measured noise
    real = {n: c for n, c in out.candidates.items() if (c.tokens_per_step or 1.0) > 1.0}
    best = max(real.items(), key=lambda item: item[1].speedup, default=None)
    label = best and candidate_label(*best)
    out.kept = None
    if best is not None and best[1].speedup >= KEEP_GAIN:
        out.kept = best[0]
        out.why = f"{label} {best[1].speedup:.2f}x plain: kept"
    elif best is not None:
        out.why = f"{label} {best[1].speedup:.3f}x, under {KEEP_GAIN:.2f}x: plain kept"
    else:
        out.why = "no draft kept by the model: plain kept"
