"""Poisoned-file tests: a memory calibration (tuned/calibrate.py, tuned/offload_calibration.py) holding values
no run can have measured (negative, NaN, infinity, booleans, strings, absurd sizes, wrong shapes) must never
take a plan below the plan with no calibration at all, never traceback, and be said in one note naming the
file. Before, a negative runtime gave a negative peak, a boolean runtime 305 MiB where the plan is 377, and a
negative driver term was clipped to 0 (611 -> 311 MiB)."""

from __future__ import annotations

import json
import math
import os
import signal
from pathlib import Path

import pytest

from edgepilot.engine.choice import EngineInfo
from edgepilot.kept import sealed
from edgepilot.plan.fit import fit_model
from edgepilot.plan.memory_model import runtime_bytes
from edgepilot.plan.requested import RequestedSettings
from edgepilot.tuned import calibrate

KEY = "llama-server-0.7.0-poisoned"
HOSTILE = [-1, -(10**9), True, math.nan, -math.inf, "300000000", None, [1], 2**62, -(2**62)]
_uncalibrated: dict[tuple[Path, str], int] = {}


@pytest.fixture
def tools(monkeypatch, tmp_path) -> EngineInfo:
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(calibrate, "version_key", lambda info: KEY)
    return EngineInfo("tools", "/usr/bin/llama-server", "0.7.0 (build 11669, commit Debian)", "test")


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "calibration" / f"{KEY}.json"
    path.parent.mkdir(exist_ok=True)
    return path


def _keep(path: Path, data: dict) -> None:
    """Written with a seal that matches, as a stranger who read edgepilot's source could: every value is
    still checked for type and range."""
    path.write_text(json.dumps(sealed(data)))


def _peak(info: EngineInfo, model: Path, device: str = "none") -> int:
    req = RequestedSettings(
        n_ctx=512, n_threads=2, device=device, n_gpu_layers=None if device == "none" else 10
    )
    plan = fit_model(
        model, req, budget_bytes=8 << 30, arithmetic=lambda arch: calibrate.arithmetic_for(info, model, arch)
    )
    return plan.memory.peak_rss_bytes


def _arch(model: Path):
    from edgepilot.gguf.arch import arch_params
    from edgepilot.gguf.gguf_header import read_header

    return arch_params(read_header(model).metadata)


def _none(info: EngineInfo, model: Path, device: str = "none") -> int:
    """The plan with no calibration file at all (computed once per model and device)."""
    if (model, device) not in _uncalibrated:
        _uncalibrated[model, device] = _peak(info, model, device)
    return _uncalibrated[model, device]


def _blocked(*_args) -> None:
    raise AssertionError("reading the calibration blocked")


def _notes(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("edgepilot: note:")]


@pytest.mark.parametrize(
    "field", ["runtime", "running_extra", "compute_delta", "n_vocab", "reserve_one_output"]
)
@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_a_poisoned_cpu_entry_never_plans_below_no_calibration(
    tools, tmp_path, gemma_path, capsys, field, value
):
    uncalibrated = _none(tools, gemma_path)
    arch = _arch(gemma_path)
    entry = {
        "n_vocab": arch.n_vocab,
        "runtime": [runtime_bytes(arch)],
        "running_extra": [0],
        "compute_delta": 0,
        "reserve_one_output": False,
    }  # fmt: skip  (as the pinned plan: neutral)
    entry[field] = [value] if field in ("runtime", "running_extra") else value
    path = _file(tmp_path)
    _keep(path, {"engine": "x", "models": {calibrate.model_key(gemma_path): entry}})
    capsys.readouterr()
    assert _peak(tools, gemma_path) >= uncalibrated
    said = _notes(capsys.readouterr().err)
    assert len(said) <= 1 and all(str(path) in n and field in n for n in said), said
    signed = field in ("running_extra", "compute_delta") and value in (-1, -(10**9))  # either sign is valid
    absent = value is None and field not in ("runtime", "running_extra")  # a field not given: nothing to say
    valid = absent or signed or (field == "reserve_one_output" and isinstance(value, bool))
    assert bool(said) != valid, (said, field, value)


@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_a_whole_entry_of_hostile_values_never_plans_below_no_calibration(tools, tmp_path, gemma_path, value):
    uncalibrated = _none(tools, gemma_path)
    entry = {"n_vocab": value, "runtime": [value, value], "running_extra": [value], "compute_delta": value,
             "reserve_one_output": value}  # fmt: skip
    other = dict(entry)
    _keep(
        _file(tmp_path),
        {"engine": value, "models": {calibrate.model_key(gemma_path): entry, "other.gguf:1": other}},
    )
    assert _peak(tools, gemma_path) >= uncalibrated


SAMPLE = {"driver": 200 << 20, "runtime": 100 << 20, "extra": 0, "n_ubatch": 512, "n_gpu_layers": 10,
          "weight_types": 2, "filled": True, "cold": False}  # fmt: skip


@pytest.mark.parametrize("field", sorted(SAMPLE))
@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_a_poisoned_offload_sample_never_plans_below_no_calibration(
    tools, tmp_path, smollm_path, field, value
):
    """The driver term of an offloaded run (611 MiB planned with none; a negative one gave 311)."""
    uncalibrated = _none(tools, smollm_path, "Vulkan0")
    sample = {**SAMPLE, field: value}
    data = {
        "engine": "x",
        "models": {},
        "offload": {
            "Vulkan0 (llvmpipe)": {
                "device": "Vulkan0",
                "description": "llvmpipe",
                "seen": value,
                "models": {calibrate.model_key(smollm_path): {"n_vocab": 49152, "runs": [sample]}},
            }
        },
    }
    _keep(_file(tmp_path), data)
    assert _peak(tools, smollm_path, "Vulkan0") >= uncalibrated


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "[]",
        "null",
        '"x"',
        "NaN",
        '{"models": []}',
        '{"models": {"a": 1}, "offload": [1]}',
        "[" * 100000 + "]" * 100000,
        '{"models": {}}' + " " * (2 << 20),
    ],  # fmt: skip
    ids=[
        "empty",
        "truncated",
        "list",
        "null",
        "string",
        "nan",
        "models-list",
        "offload-list",
        "deep",
        "huge",
    ],
)
def test_a_damaged_calibration_file_plans_as_none(tools, tmp_path, gemma_path, text):
    uncalibrated = _none(tools, gemma_path)
    _file(tmp_path).write_text(text)
    assert _peak(tools, gemma_path) == uncalibrated


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_fifo_or_directory_in_place_of_the_calibration_is_not_read(
    tools, tmp_path, gemma_path, capsys, kind
):
    uncalibrated = _none(tools, gemma_path)
    path = _file(tmp_path)
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    capsys.readouterr()
    signal.signal(signal.SIGALRM, _blocked)
    signal.alarm(60)  # a FIFO used to block here for good
    try:
        assert _peak(tools, gemma_path) == uncalibrated
    finally:
        signal.alarm(0)
    (note,) = _notes(capsys.readouterr().err)
    assert str(path) in note and ("FIFO" in note or "directory" in note), note


def test_the_writer_keeps_the_file_within_what_its_reader_accepts(tools, tmp_path, gemma_path):
    """Entries for many models (a long-lived device): the oldest go, the file stays readable."""
    arch = _arch(gemma_path)
    entry = {"n_vocab": arch.n_vocab, "runtime": [runtime_bytes(arch)] * 8, "running_extra": [0] * 8,
             "compute_delta": 0, "reserve_one_output": False}  # fmt: skip
    models = {f"model-{i:05d}.gguf:{i}": dict(entry) for i in range(6000)}
    calibrate._write(KEY, {"engine": "x", "models": models})
    path = _file(tmp_path)
    assert path.stat().st_size <= calibrate.MAX_FILE_BYTES
    kept = calibrate._read(KEY)
    assert kept and "model-05999.gguf:5999" in kept["models"] and "model-00000.gguf:0" not in kept["models"]


class _Server:
    """What learn_from_run reads of the tools engine after a CPU run."""

    LOG = [
        "I load_tensors:   CPU_Mapped model buffer size =    72.28 MiB",
        "I llama_kv_cache:        CPU KV buffer size =     3.94 MiB",
        "I llama_context:        CPU  output buffer size =     0.19 MiB",
        "I sched_reserve:        CPU compute buffer size =    7.69 MiB",
    ]

    def __init__(self, load_peak: int) -> None:
        self.log = list(self.LOG)
        self.load = type("Load", (), {"log": list(self.LOG), "n_ctx": 256})()
        self.load_peak_bytes = load_peak


@pytest.mark.parametrize("load_peak_mib", [1, 40])
def test_the_writer_keeps_no_runtime_its_reader_would_leave_out(tools, tmp_path, smollm_path, load_peak_mib):
    """A run whose load peak is below what it loaded (a swapped-out process) measured no runtime: before, a
    negative one was kept, and planned with."""
    req = RequestedSettings(n_ctx=256, n_threads=2)
    plan = fit_model(smollm_path, req, budget_bytes=8 << 30)
    peak = 300 << 20
    calibrate.learn_from_run(tools, smollm_path, plan, _Server(load_peak_mib << 20), peak, 232)
    path = _file(tmp_path)
    kept = json.loads(path.read_text()) if path.exists() else {"models": {}}
    for entry in kept["models"].values():
        assert all(v >= 1 << 20 for v in entry.get("runtime", [])), entry


def _measured(tools: EngineInfo, model: Path) -> Path:
    """A calibration as edgepilot keeps it: recorded from a run's figures (here the plan's own)."""
    arch = _arch(model)
    path = _file(_data_dir())
    entry = {"n_vocab": arch.n_vocab, "runtime": [runtime_bytes(arch)], "running_extra": [0],
             "compute_delta": 0, "reserve_one_output": False}  # fmt: skip
    calibrate._write(KEY, {"engine": "x", "models": {calibrate.model_key(model): entry}})
    return path


def _data_dir() -> Path:
    return Path(os.environ["EDGEPILOT_DATA_DIR"])


@pytest.mark.parametrize(
    "change",
    [
        ("runtime", [1 << 20]),  # cut to its floor: 1 MiB
        ("running_extra", [-(400 << 20)]),  # either sign is a valid extra
        ("compute_delta", -(300 << 20)),
    ],
    ids=lambda c: c[0],
)
def test_a_value_damaged_inside_its_range_leaves_the_file_unused(tools, gemma_path, capsys, change):
    uncalibrated = _none(tools, gemma_path)
    path = _measured(tools, gemma_path)
    assert _peak(tools, gemma_path) == uncalibrated  # as measured: the plan's own figures
    kept = json.loads(path.read_text())
    assert kept["seal"].startswith("sha256:")
    field, value = change
    (entry,) = kept["models"].values()
    entry[field] = value
    path.write_text(json.dumps(kept))
    capsys.readouterr()
    assert _peak(tools, gemma_path) == uncalibrated
    (note,) = _notes(capsys.readouterr().err)
    assert str(path) in note and "does not match its seal" in note, note


def test_a_kept_offload_sample_damaged_inside_its_range_leaves_the_file_unused(tools, smollm_path):
    """The driver term of a real sample set to 0 (a valid figure: a CPU-type device adds none)."""
    uncalibrated = _none(tools, smollm_path, "Vulkan0")
    runs = {calibrate.model_key(smollm_path): {"n_vocab": 49152, "runs": [dict(SAMPLE)]}}
    device = {"device": "Vulkan0", "description": "llvmpipe", "seen": 1.0, "models": runs}
    data = {"engine": "x", "models": {}, "offload": {"Vulkan0 (llvmpipe)": device}}
    calibrate._write(KEY, data)
    path = _file(_data_dir())
    kept = json.loads(path.read_text())
    (per_model,) = kept["offload"]["Vulkan0 (llvmpipe)"]["models"].values()
    per_model["runs"][0]["driver"] = 0
    path.write_text(json.dumps(kept))
    assert _peak(tools, smollm_path, "Vulkan0") == uncalibrated
