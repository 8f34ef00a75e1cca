"""Speculative decoding that costs speed here: the bench history's last `tune --speculation` trial (added to
the log by `doctor --model`, cli/doctor_history.py) measured a candidate slower than plain generation on some
kind of text. On a phone that is common: a compute-bound CPU pays for every drafted token it verifies, and
free text gives n-gram lookup little to draft (issue 42)."""

from __future__ import annotations

import re

from edgepilot.doctor.evidence import Evidence
from edgepilot.doctor.types import LIKELY, STRONG, Cause, cause

# | lookup | chat | 9.81 | 12.40 |  (candidate, kind of text, its t/s, plain's t/s in the same rounds)
ROW = re.compile(r"^\| (lookup|draft) \| (\w+) \| (\d+(?:\.\d+)?) \| (\d+(?:\.\d+)?) \|$")
SLOWER = 0.97  # under this share of plain's speed: slower than measuring noise explains
# speculation in the command or the log: edgepilot's flags (not `--draft none`), llama-server's (`-md FILE`,
# a `--spec-type` other than none), its acceptance line
IN_USE = re.compile(
    r"--lookup\b|--draft(?!\s+none\b)\b|--spec-type\s+(?!none\b)|--spec-draft-model|--model-draft"
    r"|(?:^|\s)-md(?:\s|$)|draft acceptance rate"
)
DROP = {
    "lookup": "`--lookup` (llama-server: `--spec-type ngram-simple`)",
    "draft": "`--draft` (llama-server: `-md` / `--model-draft`)",
}


def speculation_slower_than_plain(ev: Evidence) -> list[Cause]:
    slower: dict[str, list[tuple[str, float, float]]] = {}
    for line in ev.lines:
        m = ROW.match(line)
        if m is None:
            continue
        name, text, spec_ts, plain_ts = m.group(1), m.group(2), float(m.group(3)), float(m.group(4))
        if plain_ts > 0 and spec_ts < SLOWER * plain_ts:
            slower.setdefault(name, []).append((text, spec_ts, plain_ts))
    if not slower:
        return []
    evidence = [
        f"{name} on {text} text: {spec:.2f} t/s, plain {plain:.2f} t/s ({spec / plain:.2f}x)"
        for name, rows in slower.items()
        for text, spec, plain in rows
    ]
    drops = "; ".join(
        f"drop {DROP[name]} for {', '.join(row[0] for row in rows)} text" for name, rows in slower.items()
    )
    fix = (
        f"{drops}: plain generation was faster on this device; `edgepilot tune MODEL --speculation` keeps "
        "speculation only where it measured at least 5 % faster, per kind of text"
    )
    command = " ".join(ev.command or [])  # a flag and its value are two words of the list
    used = IN_USE.search(command) is not None or any(IN_USE.search(line) for line in ev.lines)
    return [cause("speculation-slower-than-plain", STRONG + 5 if used else LIKELY, evidence, fix)]


RULES = (speculation_slower_than_plain,)
