"""What `bench` is asked to measure, how it reports progress, and the sensor figures added to each row;
shared by the in-process runner (runner.py) and the llama-bench one (tool_bench.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from edgepilot.bench.monitor import Reading, throttle_verdict
from edgepilot.bench.results import BenchRow
from edgepilot.errors import UserError

# (what is running, units done, units in total); a unit is one repetition or warm-up
Progress = Callable[[str, int, int], None]


@dataclass
class BenchRequest:
    n_prompt: list[int] = field(default_factory=lambda: [512])
    n_gen: list[int] = field(default_factory=lambda: [128])
    reps: int = 5
    threads: list[int] = field(default_factory=list)  # empty: the thread count `run` would use
    ubatch: list[int] = field(default_factory=lambda: [512])
    flash_attn: list[bool] = field(default_factory=lambda: [False])
    repack: list[bool] = field(default_factory=lambda: [True])  # a model setting: one load per value
    core_sets: list[tuple[int, ...]] | None = None  # None: leave the process's affinity alone
    n_batch: int = 2048
    warmup: bool = True
    cooldown: float = 0.0  # seconds to wait at most before each test for the CPU to cool back
    roofline: bool = True
    device: str = "none"  # llama.cpp's -dev: none (the CPU) or a GPU (the tools engine measures it)
    gpu_layers: list[int] = field(default_factory=lambda: [0])  # -ngl values on `device`

    @property
    def on_gpu(self) -> bool:
        return self.device != "none"

    def validate(self) -> BenchRequest:
        if self.reps < 1:
            raise UserError("-r must be at least 1")
        if not any(self.n_prompt) and not any(self.n_gen):
            raise UserError("nothing to measure: -p and -n are both 0")
        if any(t < 1 for t in self.threads):
            raise UserError("-t: thread counts must be at least 1")
        if any(u < 1 for u in self.ubatch) or self.n_batch < 1:
            raise UserError("batch sizes must be at least 1")
        if any(n < 0 for n in self.gpu_layers) or (not self.on_gpu and any(self.gpu_layers)):
            raise UserError("--gpu-layers needs --device NAME (a GPU `edgepilot probe` lists)")
        if self.cooldown < 0:
            raise UserError("--cooldown must be 0 or more seconds")
        return self

    def check_threads(self, cpus: int) -> None:
        """Refuse a thread count no device of `cpus` CPUs can use, as run and serve do."""
        from edgepilot.plan.planner import check_thread_count

        for t in self.threads:
            check_thread_count(t, cpus, "-t")

    @property
    def tests(self) -> list[tuple[str, int]]:
        return [("pp", p) for p in self.n_prompt if p > 0] + [("tg", n) for n in self.n_gen if n > 0]


def with_reading(row: BenchRow, reading: Reading) -> BenchRow:
    """The sensors' figures of the row's test, its energy per token and the throttling verdict."""
    row.temp_start_c, row.temp_max_c, row.temp_end_c = (
        reading.temp_start_c,
        reading.temp_max_c,
        reading.temp_end_c,
    )
    row.watts = reading.watts
    if reading.watts is not None and row.avg_ts > 0:
        row.joules_per_token = round(reading.watts / row.avg_ts, 4)
    row.throttled, note = throttle_verdict(row.samples_ts, reading)
    if note:
        row.notes.append(note)
    return row
