"""The model file: damaged, incomplete, a Git LFS pointer, an old GGML file, a sha256 mismatch."""

from __future__ import annotations

import re

from edgepilot.doctor.evidence import Evidence
from edgepilot.doctor.rulekit import model_name, model_word, thirty_two_bit_evidence
from edgepilot.doctor.types import Cause, cause

CORRUPT = re.compile(
    r"invalid magic|failed to read magic|bad magic|not within the file bounds|corrupted or incomplete|"
    r"unexpectedly reached end of file|failed to read (tensor|key|header)|wrong number of tensors|"
    r"gguf_init_from_file(?:(?!gguf_init_from_file)\S)*: failed|"
    r"is this really a GGML file|invalid model data",
    re.I,
)
# The header is sound but its tensors are not its architecture's: a broken or mismatched conversion,
# or a model newer than this llama.cpp. Validation cannot see this; llama.cpp's loader says it.
TENSOR_MISMATCH = re.compile(
    r"check_tensor_dims: tensor '[^']*' (?:not found|has wrong shape)|missing tensor '[^']*'", re.I
)
LFS_POINTER = re.compile(r"invalid magic characters '(vers|vers\S*)'|version https://git-lfs", re.I)
OLD_GGML = re.compile(
    r"invalid magic (number|characters) '?(67676a74|67676d66|67676d6c|ggjt|ggml|ggmf|tjgg)", re.I
)


def model_corrupt(ev: Evidence) -> list[Cause]:
    lines = ev.grep(CORRUPT, limit=3) or ev.grep(TENSOR_MISMATCH, limit=2)
    problems = []
    if ev.validation is not None:
        problems = [p for p in ev.validation.problems if p.severity == "error"]
    if not lines and not problems:
        return []
    evidence = list(lines)
    name, word = model_name(ev), model_word(ev)
    score = 85 if lines else 0
    if problems:
        evidence += [f"validation of {ev.model}: {p.code}: {p.message}" for p in problems[:4]]
        score = 95
    elif ev.validation is not None and ev.validation.ok and ev.has(TENSOR_MISMATCH):
        evidence.append(
            f"{ev.model} is structurally sound here: its tensors do not match its architecture "
            f"({ev.validation.architecture})"
        )
        score = 75
    elif ev.validation is not None and ev.validation.ok:
        evidence.append(f"{ev.model} validates cleanly here: the file that failed may not be this copy")
        score = 45
    bounds_only = lines and all("within the file bounds" in ln for ln in lines)
    if bounds_only and not problems and thirty_two_bit_evidence(ev):
        score = min(score, 60)  # a 32-bit build miscounts offsets past 4 GiB: userland-32bit explains it
    if ev.has(LFS_POINTER):
        fix = (
            f"{name} is a Git LFS pointer, not the model: run `git lfs pull` in the clone, or download the "
            "file itself (on Hugging Face: .../resolve/main/FILE.gguf)"
        )
    elif ev.has(OLD_GGML):
        fix = (
            "this is an old GGML (.bin) file, which current llama.cpp cannot load: download a GGUF version, "
            "or convert the original weights with llama.cpp's "
            "`python convert_hf_to_gguf.py HF_MODEL_DIR --outfile model.gguf --outtype q8_0`"
        )
    elif ev.has(TENSOR_MISMATCH) and not problems:
        fix = (
            f"{name} does not hold the tensors llama.cpp expects for its architecture: download it again or "
            "take another conversion (from the model's official GGUF repository); a model newer than this "
            "llama.cpp needs a newer llama-cpp-python"
        )
    else:
        fix = (
            f"download {name} again (`curl -L -C - -o {word} URL` resumes a broken download), compare "
            f"`sha256sum {word}` with the publisher's, then check it with "
            f"`edgepilot inspect {word} --sha256 HEX`"
        )
    return [cause("model-corrupt", score, evidence, fix)]


RULES = (model_corrupt,)
