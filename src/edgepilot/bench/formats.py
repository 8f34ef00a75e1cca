"""llama-bench's CSV and markdown outputs (tools/llama-bench/llama-bench.cpp: csv/markdown_printer)."""

from __future__ import annotations

import csv
import io

from edgepilot.bench.results import BenchReport, BenchRow
from edgepilot.device.cpusets import cpulist
from edgepilot.shown import shown

# llama-bench's CSV columns, in its order; edgepilot's own follow.
LLAMA_BENCH_FIELDS = [
    "build_commit", "build_number", "cpu_info", "gpu_info", "backends", "model_filename", "model_type",
    "model_size", "model_n_params", "n_batch", "n_ubatch", "n_threads", "cpu_mask", "cpu_strict", "poll",
    "type_k", "type_v", "n_gpu_layers", "n_cpu_moe", "split_mode", "main_gpu", "no_kv_offload", "flash_attn",
    "devices", "tensor_split", "tensor_buft_overrides", "use_mmap", "embeddings", "no_op_offload", "no_host",
    "repack", "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts",
]  # fmt: skip
EXTRA_FIELDS = [
    "cores", "temp_start_c", "temp_max_c", "temp_end_c", "watts", "joules_per_token", "throttled", "roofline",
]  # fmt: skip


def _fixed(report: BenchReport) -> dict[str, str]:
    """Columns that are the same for every row: the build and what llama-bench would default."""
    inprocess = f"llama-cpp-python-{report.build.get('llama-cpp-python', 'unknown')}"
    return {
        "build_commit": report.build.get("build_commit") or inprocess,  # llama-bench's own, when it measured
        "build_number": report.build.get("build_number", "0"),
        "cpu_info": report.device.description,
        "gpu_info": "",
        "backends": "CPU",
        "cpu_strict": "0",
        "poll": "50",
        "n_cpu_moe": "0",
        "split_mode": "layer",
        "main_gpu": "0",
        "no_kv_offload": "0",
        "devices": "auto",
        "tensor_split": "0.00",
        "tensor_buft_overrides": "none",
        "embeddings": "0",
        "no_op_offload": "0",
        "no_host": "0",
    }


def _value(row: BenchRow, name: str) -> str:
    value = getattr(row, name)
    if name == "cores":
        return cpulist(value) if value else ""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.6f}"
    return str(value)


def to_csv(report: BenchReport) -> str:
    out = io.StringIO()
    out.write(",".join(LLAMA_BENCH_FIELDS + EXTRA_FIELDS) + "\n")
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    fixed = _fixed(report)
    for row in report.rows:
        values = [fixed[f] if f in fixed else _value(row, f) for f in LLAMA_BENCH_FIELDS]
        writer.writerow(values + [_value(row, f) for f in EXTRA_FIELDS])
    return out.getvalue()


def _size(n: int) -> str:
    return f"{n / 1048576:.2f} MiB" if n < 1 << 30 else f"{n / (1 << 30):.2f} GiB"


def _params(n: int) -> str:
    return f"{n / 1e6:.2f} M" if n < 1e9 else f"{n / 1e9:.2f} B"


def md_columns(rows: list[BenchRow]) -> list[str]:
    """llama-bench's choice: settings columns only where they are not the default or vary."""
    cols = ["model", "size", "params", "backend", "threads"]
    if any(r.device != "none" for r in rows):
        cols += ["dev", "ngl"]
    if any(r.cores for r in rows):
        cols.append("cores")
    if len({r.n_ubatch for r in rows}) > 1 or any(r.n_ubatch != 512 for r in rows):
        cols.append("n_ubatch")
    if len({r.flash_attn for r in rows}) > 1 or any(r.flash_attn for r in rows):
        cols.append("fa")
    return [*cols, "test", "t/s"]


# llama-bench's widths: negative = left-aligned
_WIDTH = {"model": -30, "size": 10, "params": 10, "backend": -7, "dev": -8, "ngl": 3, "threads": 7,
          "cores": -9, "n_ubatch": 8, "fa": 3, "test": 15, "t/s": 20}  # fmt: skip


def md_cell(row: BenchRow, col: str) -> str:
    return {
        "model": lambda: row.model_type,
        "size": lambda: _size(row.model_size),
        "params": lambda: _params(row.model_n_params),
        "backend": lambda: "CPU" if row.device == "none" else row.device.rstrip("0123456789"),
        "dev": lambda: row.device,
        "ngl": lambda: str(row.n_gpu_layers),
        "threads": lambda: str(row.n_threads),
        "cores": lambda: cpulist(row.cores) if row.cores else "-",
        "n_ubatch": lambda: str(row.n_ubatch),
        "fa": lambda: str(int(row.flash_attn)),
        "test": lambda: row.test,
        "t/s": lambda: f"{row.avg_ts:.2f} ± {row.stddev_ts:.2f}",
    }[col]()


def to_markdown(report: BenchReport) -> str:
    cols = md_columns(report.rows)
    widths = [_WIDTH.get(c, 10) for c in cols]

    def line(cells: list[str]) -> str:  # a table for people: the model's strings escaped (edgepilot.shown)
        cells = [shown(c) for c in cells]
        parts = [c.ljust(-w) if w < 0 else c.rjust(w) for c, w in zip(cells, widths, strict=True)]
        return "| " + " | ".join(parts) + " |"

    out = [line(cols), "| " + " | ".join("-" * (abs(w) - 1) + ("-" if w < 0 else ":") for w in widths) + " |"]
    out += [line([md_cell(r, c) for c in cols]) for r in report.rows]
    build = report.build
    if build.get("engine") == "tools":
        llama = f"llama-bench {build.get('llama.cpp')}"  # its path is in --json
    else:
        llama = f"llama-cpp-python {build.get('llama-cpp-python')}"
    out += ["", f"build: {llama} (edgepilot {build.get('edgepilot')})"]
    return "\n".join(out) + "\n"
