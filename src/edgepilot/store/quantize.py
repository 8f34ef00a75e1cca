"""`edgepilot quantize`: llama.cpp's quantizer (llama_model_quantize, src/llama-quant.cpp) in this process,
or without llama-cpp-python the installed llama-quantize (quantize_tool.py), which is a thin CLI over it.

A source that is already quantized cannot give better variants than itself. Where no F16/BF16/F32 source
exists, a reference is made first: the shipped model dequantized to F16 by the same quantizer (ftype
MOSTLY_F16 with allow_requantize: every quantized tensor goes through its type's to_float and is written as
F16; 1-D tensors stay F32). It holds that model's values (rounded to F16: the relative error per weight is at
most 2^-11), and every variant is quantized from it. The reference records its origin in its own metadata
(`edgepilot.reference.source`), which `compare` shows.
"""

from __future__ import annotations

import ctypes
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.device.process import allowed_cpus
from edgepilot.engine.choice import EngineInfo
from edgepilot.errors import UserError
from edgepilot.file_errors import writable_folder
from edgepilot.gguf.gguf_info import file_type_name
from edgepilot.gguf.quant_types import output_stem
from edgepilot.gguf.resolve import resolve_model
from edgepilot.gguf.verdict import header_of
from edgepilot.safe_write import atomic_path, check_target, same_file
from edgepilot.store.quantize_checks import (
    OUT_FIX,
    REFERENCE_ID_KEY,
    REFERENCE_KEY,
    check_disk_space,
    check_imatrix_needs,
    estimate_bytes,
    reusable_reference,
    source_identity,
)

if TYPE_CHECKING:
    from edgepilot.store.quantize_imatrix import Imatrix

PRECISE_TYPES = {"F32", "F16", "BF16"}  # a source in one of these is its own reference


def quant_types() -> dict[str, int]:
    """Type name (as llama-quantize spells it: Q4_K_M, IQ4_XS, F16) -> llama_ftype, from llama-cpp-python's
    constants for the vendored llama.h."""
    from edgepilot.engine.llama_binding import llama_cpp

    names = {"F32": llama_cpp.LLAMA_FTYPE_ALL_F32}
    for key, value in vars(llama_cpp).items():
        if key.startswith("LLAMA_FTYPE_MOSTLY_") and isinstance(value, int):
            names[key.removeprefix("LLAMA_FTYPE_MOSTLY_")] = value
    return names


def split_types(text: str) -> list[str]:
    """`Q4_K_M,q3_k_m` -> ["Q4_K_M", "Q3_K_M"] (checked against the quantizer's types by quantize_model)."""
    wanted = [t.strip().upper() for t in text.split(",") if t.strip()]
    if not wanted:
        raise UserError("--to needs at least one type, e.g. --to Q4_K_M,Q3_K_M")
    return list(dict.fromkeys(wanted))


def parse_types(text: str) -> list[str]:
    """split_types, checked against the in-process quantizer's types."""
    wanted = split_types(text)
    _check_types(wanted, quant_types())
    return wanted


def _check_types(wanted: list[str], known: dict[str, int]) -> None:
    bad = [t for t in wanted if t not in known]
    if bad:
        raise UserError(f"unknown quantization type {bad[0]}; valid types: {', '.join(sorted(known))}")


@dataclass
class Variant:
    type: str
    path: str
    file_bytes: int
    bits_per_weight: float
    seconds: float
    fallback_tensors: int = 0  # tensors whose row length does not fit the type's block: another type


@dataclass
class QuantizeResult:
    source: str
    source_type: str | None
    reference: str | None  # the F16 made from a quantized source, None when the source is F16/F32/BF16
    reference_note: str | None
    variants: list[Variant] = field(default_factory=list)
    imatrix: str | None = None
    engine: EngineInfo | None = None  # the quantizer: in-process, or llama-quantize with its version


def bits_per_weight(path: Path) -> float:
    header = header_of(path)
    weights = sum(t.n_elements for t in header.tensors)
    data = sum(t.n_bytes or 0 for t in header.tensors)
    return 8 * data / weights if weights else 0.0


def describe_source(path: Path) -> tuple[str | None, str | None]:
    """(file type name, the reference's recorded origin if this file is a reference edgepilot made)."""
    header = header_of(path)
    origin = header.metadata.get(REFERENCE_KEY)
    return file_type_name(header.metadata.get("general.file_type")), origin if isinstance(
        origin, str
    ) else None


def _overrides(items: dict[str, str]) -> ctypes.Array:
    from edgepilot.engine.llama_binding import llama_cpp

    array = (llama_cpp.llama_model_kv_override * (len(items) + 1))()  # zeroed: the last one ends the list
    for slot, (key, value) in zip(array, items.items(), strict=False):
        slot.tag = llama_cpp.LLAMA_KV_OVERRIDE_TYPE_STR
        slot.key = key.encode()[:127]
        slot.value.val_str = value.encode()[:127]
    return array


def run_quantizer(
    source: Path,
    target: Path,
    ftype: int,
    threads: int,
    requantize: bool,
    metadata: dict[str, str] | None = None,
    imatrix: ctypes.Array | None = None,
    pure: bool = False,
) -> int:
    """llama_model_quantize into target (written to a fresh temporary file beside it, renamed when complete);
    returns the number of fallback tensors llama.cpp reported. A UserError with llama.cpp's reason on
    failure."""
    from edgepilot.engine import interrupts, llama_log
    from edgepilot.engine.inprocess import init_backend
    from edgepilot.engine.llama_binding import llama_cpp

    init_backend(False)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = threads
    params.allow_requantize = requantize
    params.pure = pure
    keep = _overrides(metadata) if metadata else None
    if keep is not None:
        params.kv_overrides = ctypes.cast(keep, type(params.kv_overrides))
    if imatrix is not None:
        params.imatrix = ctypes.cast(imatrix, type(params.imatrix))
    start = llama_log.mark()
    with atomic_path(target, inputs=[source], what="quantized model", fix=OUT_FIX) as part:
        with interrupts.deferred():  # Ctrl-C: raised once llama.cpp returns; atomic_path removes the part
            rc = llama_cpp.llama_model_quantize(
                str(source).encode(), str(part).encode(), ctypes.byref(params)
            )
        log = llama_log.lines_since(start)
        if rc != 0:
            reason = next(
                (ln.split("failed to quantize:", 1)[1] for ln in log if "failed to quantize:" in ln), ""
            )
            raise UserError(f"llama.cpp could not quantize {source.name}: {reason.strip() or f'error {rc}'}")
    found = [re.search(r"WARNING: (\d+) of \d+ tensor\(s\) required fallback", ln) for ln in log]
    return next((int(m.group(1)) for m in found if m), 0)


class Quantizer:
    """llama.cpp's quantizer in this process (llama-cpp-python), or the installed llama-quantize."""

    def __init__(self, tool: Path | None = None) -> None:
        self.tool = tool
        if tool is None:
            self.types = quant_types()
        else:
            from edgepilot.store.quantize_tool import tool_quant_types

            self.types = tool_quant_types(tool)
        self.imatrix_file: str | None = None
        self.imatrix: Imatrix | None = None  # kept: its array points into its entries

    def load_imatrix(self, file: str) -> None:
        from edgepilot.store.quantize_imatrix import load_imatrix, read_imatrix

        if self.tool is None:
            self.imatrix = load_imatrix(file)
        else:
            read_imatrix(file)  # checked here, read again by llama-quantize
        self.imatrix_file = str(Path(file).expanduser())

    def run(
        self,
        source: Path,
        target: Path,
        type_name: str,
        threads: int,
        metadata: dict[str, str] | None = None,
        imatrix: bool = False,
        pure: bool = False,
    ) -> int:
        """Quantize source to target as type_name (pure: every tensor in it); the number of fallback
        tensors."""
        if self.tool is None:
            array = self.imatrix.array if imatrix and self.imatrix else None
            return run_quantizer(
                source, target, self.types[type_name], threads, True, metadata, array, pure=pure
            )
        from edgepilot.store.quantize_tool import QuantizeJob, run_tool_quantizer

        file = self.imatrix_file if imatrix else None
        job = QuantizeJob(self.tool, source, target, type_name, threads, metadata, file, pure=pure)
        return run_tool_quantizer(job)


def output_folder(out_dir: str | None, source: Path) -> Path:
    """--out, else the source's folder: a directory this user can write in, checked before any work."""
    if out_dir:
        return writable_folder(Path(out_dir).expanduser(), "the quantized model", OUT_FIX, make=False)
    return writable_folder(source.parent, "the quantized model", OUT_FIX, make=False)


def _check_targets(targets: list[Path], inputs: list[Path], force: bool) -> None:
    """Before any byte is written: no target is an input (the source, the imatrix), a device or a
    directory (not even with --force), and without --force none exists."""
    for target in targets:
        if same_file(target, inputs[0]):
            raise UserError(
                f"{target} would replace the source model itself; choose another folder with --out "
                "(nothing was written)"
            )
        check_target(target, inputs=inputs, what="output", fix=OUT_FIX)
    existing = [p for p in targets if p.exists() or p.is_symlink()]
    if existing and not force:
        raise UserError(
            f"{existing[0]} exists; remove it, choose another --out or add --force to overwrite it"
        )


def _reuse_reference(reference: Path, source: Path, identity: str, force: bool) -> bool:
    """True when an F16 reference from an earlier run of this source is there to quantize from; an F16 of
    another origin at that name is refused (overwritten with --force)."""
    if not (reference.exists() or reference.is_symlink()) or same_file(reference, source):
        return False
    why_not = reusable_reference(reference, identity) if reference.is_file() else "it is not a regular file"
    if why_not is None:
        return True
    if force:
        return False
    raise UserError(
        f"{reference} exists and is not reusable as the F16 reference of {source.name}: {why_not}; "
        "remove it, choose another --out or add --force to remake it (nothing was quantized)"
    )


def quantize_model(
    model: str,
    types: list[str],
    out_dir: str | None = None,
    imatrix_file: str | None = None,
    threads: int | None = None,
    force: bool = False,
    on_progress: Callable[[str], None] | None = None,
    engine: str | None = None,
    pure: bool = False,
) -> QuantizeResult:
    """engine: "auto", "inprocess" or "tools" (llama.cpp's llama-quantize; engine.choice). pure: every
    tensor in the type asked (llama-quantize --pure: the output and embeddings too), into
    STEM-TYPE-pure.gguf."""
    from edgepilot.engine.choice import choose_engine

    say = on_progress or (lambda _msg: None)
    info = choose_engine(engine, tool="llama-quantize")
    quantizer = Quantizer(Path(str(info.path)) if info.kind == "tools" else None)
    _check_types(types, quantizer.types)
    source = resolve_model(model)
    if not header_of(source).tensors:
        raise UserError(f"{source} holds no tensors (a vocabulary-only file): there is nothing to quantize")
    out = output_folder(out_dir, source)
    if threads is not None and not 1 <= threads <= 1024:
        raise UserError(f"--threads {threads}: out of range (1 to 1024)")
    n_threads = threads or len(allowed_cpus())
    stem = output_stem(source)
    source_type, _origin = describe_source(source)
    check_imatrix_needs(types, imatrix_file)
    need_reference = (source_type or "").upper() not in PRECISE_TYPES
    reference = out / f"{stem}-F16.gguf" if need_reference else None
    identity = source_identity(source) if reference is not None else ""
    reuse = reference is not None and _reuse_reference(reference, source, identity, force)
    tag = "-pure" if pure else ""
    targets = [out / f"{stem}-{t}{tag}.gguf" for t in types]
    inputs = [source] + ([Path(imatrix_file).expanduser()] if imatrix_file else [])
    fresh = [reference] if reference is not None and not reuse else []
    _check_targets(
        list(dict.fromkeys(fresh + [t for t in targets if not (reuse and t == reference)])), inputs, force
    )
    n_weights = sum(t.n_elements for t in header_of(source).tensors)
    planned = [(p.name, estimate_bytes("F16", n_weights)) for p in fresh]
    planned += [
        (t.name, estimate_bytes(n, n_weights)) for n, t in zip(types, targets, strict=True) if t != reference
    ]
    check_disk_space(out, planned)
    if imatrix_file is not None:
        quantizer.load_imatrix(imatrix_file)
    result = QuantizeResult(str(source), source_type, str(reference) if reference else None, None)
    result.imatrix = imatrix_file
    result.engine = info
    base = source
    if reference is not None:
        note = (
            f"{source.name} ({source_type}) dequantized to F16: exactly that model's values, rounded to F16"
        )
        if reuse:
            say(f"F16 reference: {reference.name} (made earlier from this {source.name})")
            result.reference_note = f"reference = {note} (reused)"
        else:
            say(f"F16 reference from {source.name}")
            t0 = time.perf_counter()
            quantizer.run(
                source, reference, "F16", n_threads, {REFERENCE_KEY: note, REFERENCE_ID_KEY: identity}
            )
            seconds = time.perf_counter() - t0
            say(f"  {reference.name}: {reference.stat().st_size / 2**20:.1f} MiB in {seconds:.1f} s")
            result.reference_note = f"reference = {note}"
        base = reference
    for i, (name, target) in enumerate(zip(types, targets, strict=True), 1):
        say(f"[{i}/{len(types)}] {name} from {base.name}")
        t0 = time.perf_counter()
        if target == reference:  # --to F16 of a quantized source: the reference is that variant
            fallback = 0
        else:
            fallback = quantizer.run(
                base, target, name, n_threads, imatrix=imatrix_file is not None, pure=pure
            )
        seconds = time.perf_counter() - t0
        size = target.stat().st_size
        say(f"  {target.name}: {size / 2**20:.1f} MiB in {seconds:.1f} s")
        result.variants.append(
            Variant(name, str(target), size, round(bits_per_weight(target), 3), seconds, fallback)
        )
    return result
