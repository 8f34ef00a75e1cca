"""The aarch64 lane (scripts/aarch64-lane.sh sets it up): find it, run llama.cpp's tools under qemu-user.

The lane is llama.cpp's tools from the engine's own vendored source (llama-cpp-python 0.3.36), cross-built for
armv8.2-a+dotprod+i8mm by `edgepilot build --target aarch64` (the build tests/toolchain use: one compile),
plus libggml-cpu alone for a dotprod CPU without i8mm and for a NEON-only one, which the lane keeps in
$EDGEPILOT_AARCH64_LANE or ~/.cache/edgepilot/aarch64-lane. In this llama.cpp the repack layouts follow the
compile flags (ggml_cpu_has_matmul_int8 / _dotprod are compile-time on ARM), so a feature set is a CPU
library: the `cpu` argument below picks it (LD_LIBRARY_PATH puts the variant first). QEMU_CPU chooses the
emulated CPU: `max` has dotprod and i8mm, `cortex-a53` neither (the i8mm library dies there with SIGILL, the
NEON-only one runs).

Peak RSS of a run is the kernel's high-water mark of the qemu process (wait4's ru_maxrss, through memlab's
launcher so this process's own peak does not leak into it). It includes qemu-user itself: its binary and heap,
the guest's libraries, and its translation cache (the anonymous executable mappings, sampled from smaps while
the process runs), which grows with the code the guest runs. `baseline()` measures the same binary under
qemu doing nothing (`--version`); `LaneRun.engine_peak_bytes` takes both off.

`python benchmarks/aarch64_lane.py` says whether the lane is ready (exit 0) or what is missing (exit 1).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edgepilot.plan.settings import EngineSettings  # noqa: E402
from edgepilot.toolchain.builder import BuildResult, build_tools  # noqa: E402
from memlab import parse_llama_log, run_measured  # noqa: E402

LANE_ENV = "EDGEPILOT_AARCH64_LANE"
SYSROOT = Path("/usr/aarch64-linux-gnu")
QEMU = "qemu-aarch64-static"
SETUP_SCRIPT = "scripts/aarch64-lane.sh"
# The tools' CPU (edgepilot build's default aarch64 target; the setup script asks for it by name).
ARM_ARCH = "armv8.2-a+dotprod+i8mm"
# The first line of LANE/cpu.stamp, which the setup script writes once the CPU libraries are built and one ran
# under qemu; the rest is the tools' build.stamp they were built against.
CPU_STAMP = "cpu=dotprod:armv8.2-a+dotprod neon:armv8-a"
# CPU library -> the capabilities device/isa.py's repack rules take for it.
CPU_VARIANTS: dict[str, set[str]] = {"i8mm": {"i8mm", "dotprod"}, "dotprod": {"dotprod"}, "neon": set()}
# The emulated CPU each library runs on: one that has its features and not the next ones.
QEMU_CPU_FOR = {"i8mm": "max", "dotprod": "cortex-a76", "neon": "cortex-a53"}
RUN_TIMEOUT_S = 1800.0
_VMA_HEAD = re.compile(r"^[0-9a-f]+-[0-9a-f]+ ")


def lane_dir() -> Path:
    if os.environ.get(LANE_ENV):
        return Path(os.environ[LANE_ENV])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "edgepilot" / "aarch64-lane"


def tools_build() -> BuildResult:
    """`edgepilot build --target aarch64 --arm-arch ARM_ARCH --print-only`: the tools, built or not."""
    return build_tools("aarch64", arm_arch=ARM_ARCH, print_only=True)


@dataclass
class Lane:
    root: Path  # the CPU library variants (root/cpu-NAME/bin) and cpu.stamp
    # the tools and their shared libraries (the i8mm CPU library among them)
    bin_dir: Path = field(default_factory=lambda: Path(tools_build().bin_dir))

    def tool(self, name: str) -> Path:
        return self.bin_dir / name

    def env(self, qemu_cpu: str = "max", cpu: str = "i8mm") -> dict[str, str]:
        """cpu: the CPU library (CPU_VARIANTS); the default build is the i8mm one."""
        if cpu not in CPU_VARIANTS:
            raise ValueError(f"unknown CPU library {cpu!r}; choose one of {', '.join(CPU_VARIANTS)}")
        dirs = [str(self.bin_dir)]
        if cpu != "i8mm":
            dirs.insert(0, str(self.root / f"cpu-{cpu}" / "bin"))
        env = dict(os.environ)
        env.update(QEMU_LD_PREFIX=str(SYSROOT), LD_LIBRARY_PATH=":".join(dirs), QEMU_CPU=qemu_cpu)
        return env


def lane_problem(root: Path | None = None) -> str | None:
    """Why the lane cannot run here (None: it can)."""
    root = root or lane_dir()
    if shutil.which(QEMU) is None:
        return f"{QEMU} is not installed (set the lane up: {SETUP_SCRIPT})"
    if not (SYSROOT / "lib").is_dir():
        return f"no aarch64 sysroot at {SYSROOT} (set the lane up: {SETUP_SCRIPT})"
    tools = tools_build()
    if not tools.cached:
        return f"the aarch64 tools ({ARM_ARCH}) are not built or not up to date (set up: {SETUP_SCRIPT})"
    try:
        stamp = (root / "cpu.stamp").read_text()
        built_against = Path(tools.stamp).read_text()
    except OSError:
        stamp, built_against = "", None
    if stamp != f"{CPU_STAMP}\n{built_against}":
        return f"no CPU libraries for these aarch64 tools in {root} (set the lane up: {SETUP_SCRIPT})"
    for cpu in CPU_VARIANTS:
        if cpu != "i8mm" and not (root / f"cpu-{cpu}" / "bin" / "libggml-cpu.so").is_file():
            return f"the {cpu} CPU library is missing from {root} (rerun {SETUP_SCRIPT})"
    return None


def find_lane() -> Lane | None:
    return None if lane_problem() else Lane(lane_dir())


@dataclass
class LaneRun:
    argv: list[str]
    returncode: int
    peak_rss_bytes: int
    wall_seconds: float
    translated_code_bytes: int = 0  # qemu's translation cache, resident, at its largest
    log: dict[str, Any] = field(default_factory=dict)  # memlab.parse_llama_log of stderr
    repack_layouts: dict[str, int] = field(default_factory=dict)  # `q8_0_4x8` -> tensors repacked so
    stderr: str = field(default="", repr=False)

    def engine_peak_bytes(self, baseline: LaneRun) -> int:
        """The peak without qemu: minus the idle run's peak, minus what the translation cache grew since."""
        grown_code = max(0, self.translated_code_bytes - baseline.translated_code_bytes)
        return self.peak_rss_bytes - baseline.peak_rss_bytes - grown_code


def translated_code_bytes(pid: int) -> int:
    """Resident bytes of a process's anonymous executable mappings (qemu-user's TCG code buffer)."""
    total, anon_exec = 0, False
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                if _VMA_HEAD.match(line):
                    parts = line.split(None, 5)
                    anon_exec = "x" in parts[1] and (len(parts) < 6 or not parts[5].strip())
                elif anon_exec and line.startswith("Rss:"):
                    total += int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return total


def _measure(argv: list[str], env: dict[str, str], timeout: float, interval: float) -> tuple[Any, int]:
    code = [0]

    def probe(pid: int) -> None:
        code[0] = max(code[0], translated_code_bytes(pid))

    child = run_measured(
        argv, env=env, timeout=timeout, interval=interval, smaps_every=1_000_000, on_sample=probe
    )
    return child, code[0]


def completion_argv(
    lane: Lane,
    model: Path,
    settings: EngineSettings,
    prompt_file: Path | None = None,
    n_predict: int = 4,
) -> list[str]:
    """llama-completion with the planner's settings; in this llama.cpp the load mode is `-lm`."""
    argv = [QEMU, str(lane.tool("llama-completion")), "-m", str(model)]
    argv += ["-c", str(settings.n_ctx), "-b", str(settings.n_batch), "-ub", str(settings.n_ubatch)]
    argv += ["-t", str(settings.n_threads), "-ctk", settings.type_k, "-ctv", settings.type_v]
    argv += ["-fa", "on" if settings.flash_attn else "off", "-ngl", str(settings.n_gpu_layers)]
    argv += ["-lm", "mmap" if settings.use_mmap else "none", "--repack" if settings.repack else "--no-repack"]
    if settings.swa_full:
        argv.append("--swa-full")
    argv += ["-f", str(prompt_file)] if prompt_file else ["-p", "Hi"]
    argv += ["-n", str(n_predict), "-no-cnv", "--no-warmup", "-fit", "off", "--temp", "0", "-s", "1", "-v"]
    return argv


def _repack_layouts(stderr: str) -> dict[str, int]:
    """`ggml_repack_...: repack tensor blk.0.attn_q.weight with q4_K_8x8` lines, counted per layout."""
    counts: dict[str, int] = {}
    for line in stderr.splitlines():
        if "repack tensor" in line and " with " in line:
            layout = line.rsplit(" with ", 1)[1].strip()
            counts[layout] = counts.get(layout, 0) + 1
    return counts


def run_completion(
    lane: Lane,
    model: Path,
    settings: EngineSettings,
    prompt_file: Path | None = None,
    n_predict: int = 4,
    qemu_cpu: str = "max",
    cpu: str = "i8mm",
) -> LaneRun:
    argv = completion_argv(lane, model, settings, prompt_file, n_predict)
    child, code = _measure(argv, lane.env(qemu_cpu, cpu), RUN_TIMEOUT_S, 0.05)
    return LaneRun(
        argv=argv,
        returncode=child.returncode,
        peak_rss_bytes=child.ru_maxrss_bytes,
        wall_seconds=child.wall_seconds,
        translated_code_bytes=code,
        log=parse_llama_log(child.stderr),
        repack_layouts=_repack_layouts(child.stderr),
        stderr=child.stderr,
    )


def baseline(lane: Lane, qemu_cpu: str = "max", cpu: str = "i8mm") -> LaneRun:
    """llama-completion under qemu doing nothing but start (`--version`): qemu and the loaded libraries."""
    argv = [QEMU, str(lane.tool("llama-completion")), "--version"]
    child, code = _measure(argv, lane.env(qemu_cpu, cpu), 300.0, 0.005)
    if child.returncode != 0:
        raise RuntimeError(f"llama-completion --version under qemu failed: exit {child.returncode}")
    return LaneRun(argv, child.returncode, child.ru_maxrss_bytes, child.wall_seconds, code)


if __name__ == "__main__":  # the setup script's readiness check
    problem = lane_problem()
    print(problem or f"aarch64 lane ready: {lane_dir()}")
    sys.exit(1 if problem else 0)
