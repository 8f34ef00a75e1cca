"""What `edgepilot quantize` checks before it writes a byte: every requested type can be made (an importance
matrix where llama.cpp needs one), the output folder has room for every output, and an F16 reference left by
an earlier run is reused when it was made from this very source.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

from edgepilot.errors import UserError
from edgepilot.gguf.gguf_header import read_header
from edgepilot.gguf.gguf_info import file_type_name
from edgepilot.gguf.quant_types import NEEDS_IMATRIX
from edgepilot.sizes import MIB, show_size
from edgepilot.untrusted import failure

REFERENCE_KEY = "edgepilot.reference.source"
REFERENCE_ID_KEY = "edgepilot.reference.id"  # the source's identity: reuse the reference only for it
OUT_FIX = "choose a folder you can write with --out"
SAMPLE_BYTES = 1 << 20  # hashed from each end of the source: cheap, and changes with any re-download

# NEEDS_IMATRIX: llama.cpp refuses these without an importance matrix (llama-quant.cpp: "Missing importance
# matrix for tensor ... in a very low-bit quantization"; IQ2_M is mostly IQ2_S tensors), after writing part of
# the file.

# Bits per weight of a whole file of each type (llama.cpp's mixes: K_M/K_L keep some tensors wider).
BITS_PER_WEIGHT = {
    "F32": 32.0,
    "F16": 16.0,
    "BF16": 16.0,
    "Q8_0": 8.5,
    "Q6_K": 6.5625,
    "Q5_1": 6.0,
    "Q5_K_M": 5.7,
    "Q5_K_S": 5.55,
    "Q5_0": 5.5,
    "Q4_1": 5.0,
    "Q4_K_M": 4.9,
    "Q4_K_S": 4.6,
    "Q4_0": 4.5,
    "IQ4_NL": 4.5,
    "IQ4_XS": 4.25,
    "MXFP4_MOE": 4.25,
    "Q3_K_L": 4.3,
    "Q3_K_M": 3.9,
    "Q3_K_S": 3.5,
    "IQ3_M": 3.7,
    "IQ3_S": 3.45,
    "IQ3_XS": 3.3,
    "IQ3_XXS": 3.06,
    "Q2_K": 3.0,
    "Q2_K_S": 2.8,
    "IQ2_M": 2.7,
    "IQ2_S": 2.5,
    "IQ2_XS": 2.31,
    "IQ2_XXS": 2.06,
    "TQ2_0": 2.06,
    "IQ1_M": 1.75,
    "TQ1_0": 1.69,
    "IQ1_S": 1.56,
}
DISK_MARGIN = 0.10  # the estimate is per type, not per tensor: small models keep more tensors wide
DISK_SLACK = 32 * MIB


def check_imatrix_needs(types: list[str], imatrix_file: str | None) -> None:
    """Refuse the whole batch up front when a type needs an importance matrix and none was given."""
    if imatrix_file is not None:
        return
    needy = [t for t in types if t in NEEDS_IMATRIX]
    if needy:
        one = len(needy) == 1
        raise UserError(
            f"{', '.join(needy)} {'needs' if one else 'need'} an importance matrix: add --imatrix FILE "
            f"(llama-imatrix's output) or drop {'it' if one else 'them'} from --to (nothing was quantized)"
        )


def type_bits(type_name: str) -> float:
    """Bits per weight of a type; a type this table does not know (a newer llama-quantize's) by its digit."""
    if type_name in BITS_PER_WEIGHT:
        return BITS_PER_WEIGHT[type_name]
    digit = re.search(r"\d+", type_name)
    return float(digit.group()) + 1.0 if digit else 16.0


def estimate_bytes(type_name: str, n_weights: int) -> int:
    return int(n_weights * type_bits(type_name) / 8)


def check_disk_space(out: Path, planned: list[tuple[str, int]]) -> None:
    """Refuse before starting when the folder's free space is below the outputs' estimated sum (a margin
    added): a disk that fills half-way leaves the user with part of a batch and a full disk."""
    if not planned:
        return
    need = int(sum(n for _name, n in planned) * (1 + DISK_MARGIN)) + DISK_SLACK
    try:
        free = shutil.disk_usage(out).free
    except OSError:
        return  # no figure to judge by: the write itself reports a full disk
    if free < need:
        names = ", ".join(name for name, _n in planned)
        raise UserError(
            f"--out {out} has {show_size(free)} free; {names} need about {show_size(need)}: free some space "
            "or choose another folder with --out (nothing was quantized)"
        )


def source_identity(path: Path) -> str:
    """The source's size and a hash of its first and last MiB: what a reference records of its origin."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            digest.update(f.read(SAMPLE_BYTES))
            if size > SAMPLE_BYTES:
                f.seek(max(SAMPLE_BYTES, size - SAMPLE_BYTES))
                digest.update(f.read(SAMPLE_BYTES))
    except OSError as exc:  # read a moment ago: changed since (its mode, or the file itself)
        raise failure(exc, "model file", path) from None
    return f"{size} {digest.hexdigest()[:40]}"


def reusable_reference(reference: Path, identity: str) -> str | None:
    """None when `reference` is an F16 edgepilot made from the source of this identity (reuse it); else why
    not, for the refusal."""
    try:
        header = read_header(reference)
    except (OSError, ValueError, UserError) as exc:
        return f"it is not a readable model ({exc})"
    ends = [header.data_offset + t.offset + (t.n_bytes or 0) for t in header.tensors if header.data_offset]
    complete = header.complete and ends and max(ends) <= header.file_size
    if not complete or any(p.severity == "error" for p in header.problems):
        return "it is not a complete model file"
    recorded = header.metadata.get(REFERENCE_ID_KEY)
    if not isinstance(recorded, str) or not isinstance(header.metadata.get(REFERENCE_KEY), str):
        return "it records no source (not a reference this edgepilot made)"
    if file_type_name(header.metadata.get("general.file_type")) != "F16":
        return "it is not F16"
    if recorded != identity:
        return "it was made from another source (size or content differ)"
    return None
