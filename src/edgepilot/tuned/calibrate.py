"""Learn how another llama.cpp's memory differs from the pinned one, per version, from its own runs.

After each run through llama.cpp's programs (the tools engine), three facts are kept for that llama.cpp
version and model (in the data dir's `calibration/`): the process's resident memory once loaded, minus the
buffers it logged (its runtime); the compute buffer it logged against the two layouts the memory model
knows (one logits row reserved, or one per ubatch token); and, for a run that filled its context, what it
used beyond the load and the compute it touched. The next plan for that version applies them
(plan/arithmetic.py).
A model not measured yet on a version borrows from the models that were, scaled by vocabulary (the per-token
structures are what differ most between models).
An offloaded run (layers on a GPU) keeps instead what its device's driver and the CPU's extra buffer types
added, per device (tuned/offload_calibration.py): the arithmetic's `offload` carries it to the plan.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from edgepilot.datadir import data_dir
from edgepilot.engine.choice import EngineInfo
from edgepilot.engine.load_log import LoggedBuffers
from edgepilot.engine.native_tools import tool_version
from edgepilot.errors import UserError
from edgepilot.file_errors import escaped, note_once
from edgepilot.gguf.arch import ArchParams
from edgepilot.gguf.gguf_records import GGUFHeader
from edgepilot.gguf.kv_cache import kv_cache_bytes
from edgepilot.kept import MAX_BYTES, Dropped, KeptFile, sealed, unsealed
from edgepilot.plan.arithmetic import EngineArithmetic
from edgepilot.plan.compute import compute_buffer
from edgepilot.plan.memory_model import VOCAB_BYTES_PER_TOKEN
from edgepilot.plan.types import FitResult
from edgepilot.tuned.calibration_check import clean_calibration, runtime_floor
from edgepilot.tuned.offload_calibration import learned_devices, offload_sample, record_offloaded

MAX_FILE_BYTES = 1 << 20
KEEP_SAMPLES = 8
FILLED = 0.9  # a run that processed this share of its context shows the running peak
KEPT = KeptFile(
    what="the memory calibration",
    limit=MAX_FILE_BYTES,
    then="planned without it (the next run's figures replace it)",
    refused="planned with the pinned llama.cpp's figures and not updated",
)


def version_key(info: EngineInfo) -> str | None:
    if info.kind != "tools" or not info.path:
        return None
    v = tool_version(Path(info.path))
    return f"llama-server-{v.key}" if v else None


def _file(key: str) -> Path:
    return data_dir() / "calibration" / f"{key}.json"


def _read(key: str) -> dict[str, Any] | None:
    """The version's calibration ({} when there is none or it is damaged), every value checked for type and
    range (what fails is left out, said once naming the file); None when permissions keep it from us (noted
    once): then it is neither used nor written over."""
    path = _file(key)
    data = KEPT.read(path)
    if not data:
        return data
    content = unsealed(data)
    if content is None:
        note_once(
            f"the memory calibration {escaped(path)} does not match its seal (damaged, or not written by "
            f"edgepilot): {KEPT.then}"
        )
        return {}
    dropped = Dropped(path, "the memory calibration", "planned without those values")
    cleaned = clean_calibration(content, dropped)
    dropped.note()
    return cleaned


def _write(key: str, data: dict[str, Any]) -> None:
    """Keep the calibration; a data folder that refuses only costs the learning (one note), not the run."""
    why = KEPT.write(_file(key), _fitting(data))
    if why:
        note_once(f"this run's memory figures are not kept: {why}")


def _fitting(data: dict[str, Any]) -> str:
    """The calibration as JSON within what its reader accepts (MAX_FILE_BYTES): the models measured longest
    ago go first, CPU entries and offloaded ones alike."""
    text = json.dumps(sealed(data), indent=1)
    while len(text.encode()) > MAX_FILE_BYTES:
        groups = [data.get("models", {})]
        groups += [e["models"] for e in data.get("offload", {}).values() if isinstance(e, dict)]
        largest = max(groups, key=len)
        if not largest:
            return json.dumps(sealed({"engine": data.get("engine"), "models": {}}))
        over = 1 - MAX_FILE_BYTES / len(text.encode())
        for key in list(largest)[: 1 + int(len(largest) * over)]:
            del largest[key]
        text = json.dumps(sealed(data), indent=1)
    return text


def model_key(model: Path) -> str:
    try:
        size = model.stat().st_size
    except OSError:
        size = 0
    return f"{model.name}:{size}"


def _push(samples: Any, value: int) -> list[int]:
    kept = [int(v) for v in samples if isinstance(v, int)] if isinstance(samples, list) else []
    return [*kept, int(value)][-KEEP_SAMPLES:]


def record_run(
    info: EngineInfo,
    model: Path,
    arch: ArchParams,
    plan: FitResult,
    logged: LoggedBuffers,
    load_peak_bytes: int,
    peak_bytes: int,
    n_processed: int,
    n_ctx: int,
) -> None:
    """Keep what this run of the tools engine showed about its llama.cpp's memory."""
    key = version_key(info)
    if key is None or load_peak_bytes <= 0 or logged.lines == 0:
        return
    m, s = plan.memory, plan.settings
    data = _read(key)
    if data is None:
        return
    data = data or {"engine": info.version, "models": {}}
    entry = data["models"].get(model_key(model))
    entry = entry if isinstance(entry, dict) else {}
    loaded = m.weights_bytes + m.repack_bytes + logged.kv_bytes + logged.output_bytes
    entry["n_vocab"] = int(arch.n_vocab or 0)
    runtime = load_peak_bytes - loaded
    if runtime < runtime_floor(int(arch.n_vocab or 0)) or runtime > MAX_BYTES:
        return  # what the reader would leave out (calibration_check.py) is not kept either
    entry["runtime"] = _push(entry.get("runtime"), runtime)
    n_batch = min(s.n_batch, n_ctx)
    n_ubatch = min(s.n_ubatch, n_batch)
    kv = kv_cache_bytes(
        arch, n_ctx, s.type_k, s.type_v, n_seq=1, swa_full=s.swa_full, n_ubatch=n_ubatch, n_batch=n_batch,
        flash_attn=s.flash_attn,
    )  # fmt: skip
    one, per_token = (
        compute_buffer(arch, kv.n_ctx, n_ubatch, s.flash_attn, kv.cells_full, kv.cells_swa, flag)
        for flag in (True, False)
    )
    entry["reserve_one_output"] = abs(logged.compute_bytes - one.reserved_bytes) < abs(
        logged.compute_bytes - per_token.reserved_bytes
    )
    chosen = one if entry["reserve_one_output"] else per_token
    entry["compute_delta"] = logged.compute_bytes - chosen.reserved_bytes
    if n_processed >= FILLED * n_ctx:
        entry["running_extra"] = _push(
            entry.get("running_extra"),
            peak_bytes - load_peak_bytes - m.compute_touched_bytes - m.compute_work_bytes,
        )
    data["models"][model_key(model)] = entry
    _write(key, data)


def arithmetic_for(info: EngineInfo | None, model: Path, arch: ArchParams) -> EngineArithmetic | None:
    """The learned corrections for this engine and model (None: the in-process, pinned llama.cpp)."""
    if info is None or info.kind != "tools":
        return None
    key = version_key(info)
    data = (_read(key) if key else None) or {}
    a = _cpu_arithmetic(info, data.get("models", {}), model, arch)
    return replace(a, offload=learned_devices(data, model_key(model)))


def _cpu_arithmetic(
    info: EngineInfo, models: dict[str, Any], model: Path, arch: ArchParams
) -> EngineArithmetic:
    name = f"llama-server {info.version or '(version unknown)'}"
    own = models.get(model_key(model))
    if isinstance(own, dict) and own.get("runtime"):
        return _from_entry(name, own, f"memory planned for {name} from its runs of this model here")
    measured = [e for e in models.values() if isinstance(e, dict) and e.get("runtime") and e.get("n_vocab")]
    if not measured:
        return EngineArithmetic(
            name,
            notes=[
                f"memory planned with the pinned llama.cpp's figures: {name} has not run here yet "
                "(its first run calibrates the plan)"
            ],
        )
    vocab = int(arch.n_vocab or 0)
    runtime = max(max(e["runtime"]) - VOCAB_BYTES_PER_TOKEN * e["n_vocab"] for e in measured)
    extra = max((max(e.get("running_extra") or [0]) / e["n_vocab"] for e in measured), default=0.0)
    return EngineArithmetic(
        name,
        runtime_bytes=runtime + VOCAB_BYTES_PER_TOKEN * vocab,
        running_extra_bytes=max(0, int(extra * vocab)),
        reserve_one_output=any(e.get("reserve_one_output") for e in measured),
        learned_from=sum(len(e["runtime"]) for e in measured),
        notes=[f"memory planned for {name} from its runs of other models here"],
    )


def _from_entry(name: str, entry: dict[str, Any], note: str) -> EngineArithmetic:
    runs = [int(v) for v in entry["runtime"]]
    extra = [int(v) for v in entry.get("running_extra") or []]
    a = EngineArithmetic(
        name,
        runtime_bytes=max(runs),
        running_extra_bytes=max(0, max(extra)) if extra else 0,  # never below the compute the plan touches
        reserve_one_output=bool(entry.get("reserve_one_output")),
        compute_reserved_delta_bytes=int(entry.get("compute_delta") or 0),
        learned_from=len(runs),
        notes=[f"{note} ({len(runs)} run{'s' if len(runs) != 1 else ''})"],
    )
    if not extra:
        a = replace(a, notes=[*a.notes, "no context-filling run yet: a long prompt may use a little more"])
    return a


def record_offloaded_run(
    info: EngineInfo,
    model: Path,
    header: GGUFHeader,
    arch: ArchParams,
    plan: FitResult,
    logged: LoggedBuffers,
    peak_bytes: int,
    n_processed: int,
    n_ctx: int,
) -> None:
    """Keep what an offloaded run of the tools engine showed about its device's driver."""
    key = version_key(info)
    device = str(plan.settings.device)
    if key is None or peak_bytes <= 0 or logged.lines == 0 or device not in logged.devices:
        return
    n_ubatch = min(plan.settings.n_ubatch, plan.settings.n_batch, n_ctx)
    sample = offload_sample(
        header, arch.n_layer, plan, logged, peak_bytes, n_processed >= FILLED * n_ctx, n_ubatch
    )
    data = _read(key)
    if data is None:
        return
    data = data or {"engine": info.version, "models": {}}
    if record_offloaded(data, model_key(model), int(arch.n_vocab or 0), device, logged, sample):
        _write(key, data)


def learn_from_run(
    info: EngineInfo, model: Path, plan: FitResult, engine: Any, peak: int, n_used: int
) -> None:
    """After a run on the tools engine (engine/server_engine.py): what its load log and peaks showed."""
    from edgepilot.engine.load_log import logged_buffers
    from edgepilot.gguf.arch import arch_params
    from edgepilot.gguf.verdict import header_of

    try:
        header = header_of(model)
        arch = arch_params(header.metadata)
    except (OSError, ValueError, UserError):
        return
    if not plan.settings.on_cpu:  # an offloaded run: its driver and device, not the CPU plan's terms
        load = getattr(engine, "load", None)
        logged = logged_buffers(getattr(load, "log", None) or engine.log)
        record_offloaded_run(info, model, header, arch, plan, logged, peak, n_used, engine.load.n_ctx)
        return
    logged = logged_buffers(engine.log)
    record_run(info, model, arch, plan, logged, engine.load_peak_bytes, peak, n_used, engine.load.n_ctx)
