"""What `edgepilot compare` reports: one row per file, and the comparison (shared by compare.py, which
measures, and compare_plot.py, which draws it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from edgepilot.engine.choice import EngineInfo
from edgepilot.plan.settings import EngineSettings


@dataclass
class Compared:
    name: str
    path: str
    file_type: str | None
    file_bytes: int
    bits_per_weight: float
    reference: bool
    predicted_peak_bytes: int
    measured_peak_bytes: int
    peak_error: float  # (predicted - measured) / measured
    pp_tps: float
    tg_tps: float
    perplexity: float
    ppl_stderr: float
    kl_mean: float | None
    kl_max: float | None
    same_top: float | None
    settings: EngineSettings
    n_prompt: int = 0  # the memory run's prompt, in tokens (it fills the context less n_gen)
    fits: bool = True


@dataclass
class CompareResult:
    reference: str
    reference_note: str
    text: str
    text_tokens: int
    ppl_ctx: int
    n_scored: int
    n_ctx: int
    n_gen: int
    rows: list[Compared] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    plot: str | None = None
    engine: EngineInfo | None = None  # in-process, or llama-perplexity with its version
