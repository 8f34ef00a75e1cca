"""What each serve worker is started with: the model, its private socket, its CPUs, and its command line."""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from edgepilot.plan.settings import EngineSettings

LOG_PREFIX = "edgepilot-worker: log: "  # a worker's line the supervisor puts in the server's log, not its own


@dataclass
class WorkerLaunch:
    """What every worker the watchdog starts is given: the model, its private socket, its CPUs."""

    model: Path
    model_name: str
    socket_path: str
    max_tokens: int
    cpus: list[int] | None = None
    verbose: bool = False
    prompt_cpus: list[int] | None = None
    short_ctx: int = 0  # the short lane's context (serve/short_lane.py): a second context or slot; 0: none
    keep_cache: Path | None = None  # where a restarted worker finds its cache (serve/kept_state.py)


@dataclass
class Launch(WorkerLaunch):
    """edgepilot's own worker (the in-process engine in a child process)."""

    cache_reuse: bool = True
    max_prompt_tokens: int | None = None  # None: the context
    max_temp_c: float | None = None  # the worker's thermal guard (engine/thermal_guard.py); None: none
    watch_root: Path = Path("/")  # whose thermal zones it reads (a device tree in tests)
    python: str = field(default_factory=lambda: sys.executable)

    def argv(self, settings: EngineSettings) -> list[str]:
        import json

        args = [self.python, "-m", "edgepilot.serve.worker", "--socket", self.socket_path]
        args += ["--model", str(self.model), "--model-name", self.model_name]
        args += ["--settings", json.dumps(asdict(settings)), "--max-tokens", str(self.max_tokens)]
        args += ["--parent", str(os.getpid())]
        if self.cpus:
            args += ["--cpus", ",".join(map(str, self.cpus))]
        if self.cpus and self.prompt_cpus:
            args += ["--prompt-cpus", ",".join(map(str, self.prompt_cpus))]
        if self.verbose:
            args.append("--verbose")
        if not self.cache_reuse:
            args.append("--no-cache-reuse")
        if self.max_prompt_tokens:
            args += ["--max-prompt-tokens", str(self.max_prompt_tokens)]
        if self.short_ctx:
            args += ["--short-ctx", str(self.short_ctx)]
        if self.keep_cache is not None:  # set only with cache reuse (server.py)
            args += ["--keep-cache", str(self.keep_cache)]
        if self.max_temp_c is not None:
            args += ["--max-temp", f"{self.max_temp_c:g}", "--watch-root", str(self.watch_root)]
        return args
