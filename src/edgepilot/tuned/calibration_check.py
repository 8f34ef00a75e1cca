"""Every value of a kept memory calibration (tuned/calibrate.py, tuned/offload_calibration.py) checked for
type and range before a plan uses it: a damaged or hostile file must never take a plan below the plan
without it.

The valid ranges, from how each figure is made:
- `runtime` (a CPU run's resident memory once loaded, less the buffers it logged): the process itself, at
  least llama.cpp's vocabulary structures (VOCAB_BYTES_PER_TOKEN per token) and never below 1 MiB (the
  program and its libraries); at most MAX_BYTES.
- `running_extra` (a context-filling run's peak beyond the load and the compute the plan touched) and
  `compute_delta` (the logged compute buffer less the estimate): either sign, within MAX_BYTES (the plan never
  lets either take a term below zero).
- `reserve_one_output`: a bool. `n_vocab`: a count.
- an offloaded run's sample: `driver` (its peak less every buffer, the resident weights and the runtime: the
  driver's own memory) and `extra` (the CPU's extra buffer types) at least 0; `runtime` as above; `n_ubatch`
  at least 1; `n_gpu_layers` and `weight_types` counts; `filled` and `cold` bools.
A bool is never a count (`True` is 1 to Python), NaN and infinity are never figures. What fails is left out
(a sample, a field, a whole entry) and said once, naming the file.
"""

from __future__ import annotations

from typing import Any

from edgepilot.kept import MAX_BYTES, MAX_COUNT, Dropped, is_int, is_number
from edgepilot.plan.memory_model import VOCAB_BYTES_PER_TOKEN

MIN_RUNTIME = 1 << 20
MAX_SAMPLES = 64  # far more than a writer keeps (KEEP_SAMPLES): beyond it, damage
SAMPLE_COUNTS = {"n_ubatch": (1, MAX_COUNT), "n_gpu_layers": (0, MAX_COUNT), "weight_types": (0, 4096)}
SAMPLE_BYTES = {"driver": (0, MAX_BYTES), "extra": (0, MAX_BYTES)}
SAMPLE_FLAGS = ("filled", "cold")


def runtime_floor(n_vocab: int) -> int:
    return max(MIN_RUNTIME, VOCAB_BYTES_PER_TOKEN * n_vocab)


def valid_sample(run: Any, n_vocab: int = 0) -> bool:
    """One offloaded run's sample, every field the plan reads of it in range."""
    if not isinstance(run, dict):
        return False
    for name, (low, high) in {**SAMPLE_COUNTS, **SAMPLE_BYTES}.items():
        if not is_int(run.get(name), low, high):
            return False
    if not is_int(run.get("runtime"), runtime_floor(n_vocab), MAX_BYTES):
        return False
    return all(isinstance(run.get(flag, False), bool) for flag in SAMPLE_FLAGS)


def clean_calibration(data: Any, dropped: Dropped) -> dict[str, Any]:
    """The calibration with every value out of type or range left out (each said in `dropped`); {} when it
    is no calibration at all."""
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        if data is not None:
            dropped.drop("the file", "not a calibration")
        return {}
    engine = data.get("engine")
    out: dict[str, Any] = {"engine": engine if isinstance(engine, str) and len(engine) <= 200 else None}
    out["models"] = {}
    for key, entry in data["models"].items():
        cleaned = _cpu_entry(entry, f"models[{key!r}]", dropped)
        if cleaned:
            out["models"][key] = cleaned
    if "offload" in data:
        out["offload"] = _offload(data["offload"], dropped)
    return out


def _n_vocab(entry: dict[str, Any], where: str, dropped: Dropped) -> int | None:
    value = entry.get("n_vocab")
    if value is None or is_int(value, 0, MAX_COUNT):
        return value
    dropped.drop(f"{where}.n_vocab", value)
    return None


def _samples(values: Any, low: int, high: int, where: str, dropped: Dropped) -> list[int] | None:
    if values is None:
        return None
    if not isinstance(values, list) or len(values) > MAX_SAMPLES:
        dropped.drop(where, values)
        return None
    kept = []
    for i, v in enumerate(values):
        if is_int(v, low, high):
            kept.append(v)
        else:
            dropped.drop(f"{where}[{i}]", v)
    return kept or None


def _cpu_entry(entry: Any, where: str, dropped: Dropped) -> dict[str, Any] | None:
    if not isinstance(entry, dict):
        dropped.drop(where, entry)
        return None
    out: dict[str, Any] = {}
    n_vocab = _n_vocab(entry, where, dropped)
    if n_vocab is not None:
        out["n_vocab"] = n_vocab
    runtime = _samples(
        entry.get("runtime"), runtime_floor(n_vocab or 0), MAX_BYTES, f"{where}.runtime", dropped
    )
    if runtime:
        out["runtime"] = runtime
    extra = _samples(entry.get("running_extra"), -MAX_BYTES, MAX_BYTES, f"{where}.running_extra", dropped)
    if extra:
        out["running_extra"] = extra
    flag = entry.get("reserve_one_output")
    if isinstance(flag, bool):
        out["reserve_one_output"] = flag
    elif flag is not None:
        dropped.drop(f"{where}.reserve_one_output", flag)
    delta = entry.get("compute_delta")
    if is_int(delta, -MAX_BYTES, MAX_BYTES):
        out["compute_delta"] = delta
    elif delta is not None:
        dropped.drop(f"{where}.compute_delta", delta)
    return out


def _offload(section: Any, dropped: Dropped) -> dict[str, Any]:
    if not isinstance(section, dict):
        dropped.drop("offload", section)
        return {}
    out: dict[str, Any] = {}
    for key, entry in section.items():
        where = f"offload[{key!r}]"
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("device"), str)
            and isinstance(entry.get("description"), str)
            and isinstance(entry.get("models"), dict)
        ):
            dropped.drop(where, entry)
            continue
        seen = entry.get("seen")
        cleaned = {**entry, "seen": seen if is_number(seen, 0, 1e12) else 0.0, "models": {}}
        for model, per_model in entry["models"].items():
            runs = _runs(per_model, f"{where}.models[{model!r}]", dropped)
            if runs is not None:
                cleaned["models"][model] = runs
        out[key] = cleaned
    return out


def _runs(per_model: Any, where: str, dropped: Dropped) -> dict[str, Any] | None:
    if not isinstance(per_model, dict) or not isinstance(per_model.get("runs", []), list):
        dropped.drop(where, per_model)
        return None
    n_vocab = _n_vocab(per_model, where, dropped)
    runs = per_model.get("runs", [])[:MAX_SAMPLES]
    kept = []
    for i, run in enumerate(runs):
        if valid_sample(run, n_vocab or 0):
            kept.append(run)
        else:
            dropped.drop(f"{where}.runs[{i}]", _first_bad(run, n_vocab or 0))
    return {**per_model, "n_vocab": n_vocab or 0, "runs": kept}


def _first_bad(run: Any, n_vocab: int) -> Any:
    """The value that made a sample invalid (for the note)."""
    if not isinstance(run, dict):
        return run
    for name in (*SAMPLE_COUNTS, *SAMPLE_BYTES, "runtime", *SAMPLE_FLAGS):
        value = run.get(name, False if name in SAMPLE_FLAGS else None)
        if not valid_sample({**_ok_sample(n_vocab), name: value}, n_vocab):
            return {name: value}
    return run


def _ok_sample(n_vocab: int) -> dict[str, Any]:
    return {"driver": 0, "extra": 0, "n_ubatch": 1, "n_gpu_layers": 0, "weight_types": 0,
            "runtime": runtime_floor(n_vocab)}  # fmt: skip
