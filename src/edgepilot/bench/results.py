"""What `edgepilot bench` returns: llama-bench-compatible rows plus edgepilot's extras."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from edgepilot.engine.choice import EngineInfo
from edgepilot.tuned.identity import DeviceId, MeasuredModel


@dataclass
class BenchRow:
    # llama-bench's fields (same names and meaning)
    model_filename: str
    model_type: str
    model_size: int
    model_n_params: int
    n_batch: int
    n_ubatch: int
    n_threads: int
    cpu_mask: str  # "0x0" = not pinned (llama-bench's default)
    type_k: str
    type_v: str
    n_gpu_layers: int
    flash_attn: bool
    use_mmap: bool
    n_prompt: int
    n_gen: int
    test_time: str
    samples_ns: list[int]
    samples_ts: list[float]
    avg_ns: int = 0
    stddev_ns: int = 0
    avg_ts: float = 0.0
    stddev_ts: float = 0.0
    n_depth: int = 0
    repack: bool = True  # llama.cpp's CPU_REPACK copies of weights (llama-bench --repack)
    device: str = "none"  # llama.cpp's -dev: none (the CPU) or the GPU the n_gpu_layers went to
    # edgepilot's
    test: str = ""  # pp512 / tg128, as llama-bench's markdown names them
    cores: list[int] | None = None  # the CPU set the process was pinned to (None: not pinned)
    temp_start_c: float | None = None
    temp_max_c: float | None = None
    temp_end_c: float | None = None
    watts: float | None = None
    joules_per_token: float | None = None
    throttled: bool | None = None
    notes: list[str] = field(default_factory=list)
    roofline: float | None = None  # tg only: avg_ts x bytes per token / memory bandwidth
    # tune --speculation's rows: "plain" or the candidate ("lookup", "draft") that generated, the kind of
    # text it generated from (chat, rewrite, code) and the share of drafted tokens the model kept
    speculation: str | None = None
    text_kind: str | None = None
    acceptance_rate: float | None = None

    def __post_init__(self) -> None:
        if self.samples_ts and not self.avg_ts:
            self.avg_ts = round(statistics.fmean(self.samples_ts), 3)
            self.stddev_ts = round(statistics.stdev(self.samples_ts), 3) if len(self.samples_ts) > 1 else 0.0
            self.avg_ns = int(statistics.fmean(self.samples_ns))
            self.stddev_ns = int(statistics.stdev(self.samples_ns)) if len(self.samples_ns) > 1 else 0
        if not self.test:
            if self.n_prompt and not self.n_gen:
                self.test = f"pp{self.n_prompt}"
            elif self.n_gen and not self.n_prompt:
                self.test = f"tg{self.n_gen}"
            else:
                self.test = f"pp{self.n_prompt}+tg{self.n_gen}"

    @property
    def kind(self) -> str:
        return "pp" if self.n_prompt and not self.n_gen else "tg"


@dataclass
class BenchReport:
    rows: list[BenchRow]
    model: MeasuredModel
    device: DeviceId
    build: dict[str, str]
    bandwidth_gbs: float | None
    bandwidth_threads: int | None
    bytes_per_token: int | None
    started: str
    seconds: float
    sensors: list[str] = field(default_factory=list)  # why temperature/power are missing, if they are
    warnings: list[str] = field(default_factory=list)
    run_id: int | None = None
    db_path: str | None = None
    plot_png: str | None = None
    engine: EngineInfo | None = None  # which llama.cpp measured: in-process, or llama-bench with its version
    partial: bool = False  # stopped (Ctrl-C) before every test ran: `rows` are the ones that finished
    kv_bytes_per_cell: int | None = None  # what a token of context adds to each generated token's reads
    bandwidth_how: str | None = None  # how the memory read bandwidth was measured (device/bandwidth.py)
