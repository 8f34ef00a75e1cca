"""`--draft auto`: speculate only as `tune --speculation` measured it faster on this device.

tune keeps, per kind of text, the speculation that beat plain generation by 5 % here (n-gram lookup, or a
draft model with its path) in the model's profile. auto takes what the profile keeps for the text at hand
(chat and serve: "chat"; `run`: "chat" when the prompt goes through the chat template, "rewrite" for a raw
prompt continued as text), and plain generation otherwise, saying why in one note. Plain is always the
fallback, so auto is never slower than what tune measured plain to be.

    AutoSpeculation(n_max)                          what the flag asks for, before the profile is read
    resolve_auto(spec, model, text_kind, root)    -> (Speculation | None, note | None)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgepilot.engine.speculation import LOOKUP_NGRAM, Speculation, check_pair
from edgepilot.errors import UserError

TUNE_HINT = "`edgepilot tune MODEL --speculation` measures it"


@dataclass(frozen=True)
class AutoSpeculation:
    n_max: int | None = None  # --draft-max, applied to what the profile kept


def resolve_auto(
    spec: Speculation | AutoSpeculation | None,
    model: Path,
    text_kind: str,
    root: Path = Path("/"),
    sustained: bool = False,
) -> tuple[Speculation | None, str | None]:
    """The speculation `spec` stands for with this model here, and a note when auto chose it (or plain)."""
    if not isinstance(spec, AutoSpeculation):
        return spec, None
    from edgepilot.tuned.profiles import load_profile

    profile = load_profile(model, root, sustained=sustained)
    if profile is None:
        return None, f"--draft auto: plain generation (no tuned profile for this model here; {TUNE_HINT})"
    kept = profile.speculation.get(text_kind)
    if kept is None:
        return None, (
            f"--draft auto: plain generation (the tuned profile keeps no speculation for {text_kind} "
            f"text: none measured 5 % faster, or not measured; {TUNE_HINT})"
        )
    gain = f"{kept['speedup']:.2f}x plain for {text_kind} text in tune"
    if kept["kind"] == "lookup":
        note = f"--draft auto: n-gram lookup ({gain})"
        if spec.n_max is not None and spec.n_max < LOOKUP_NGRAM:  # a length lookup cannot draft
            note += f"; --draft-max {spec.n_max} is under its {LOOKUP_NGRAM}-token n-gram: its default kept"
            return Speculation("lookup").validate(), note
        return Speculation("lookup", n_max=spec.n_max).validate(), note
    draft = Path(kept["draft"])
    try:
        from edgepilot.gguf.resolve import resolve_model

        check_pair(model, resolve_model(draft))
    except (UserError, OSError) as exc:
        return None, f"--draft auto: plain generation (the kept draft {draft.name} cannot be used now: {exc})"
    length = spec.n_max or kept.get("draft_max")  # --draft-max, else the length tune measured it at
    chosen = Speculation("draft", draft, length).validate()
    return chosen, f"--draft auto: draft model {draft.name} ({gain})"
