"""`serve --engine llama-server`: llama.cpp's own server as the worker, behind the same front and watchdog.

llama-server listens on the supervisor's private Unix socket (its --host takes a path ending in .sock), so
nothing but edgepilot's front is on the network: the front keeps the bind, API-key and hostile-input rules,
and the watchdog starts it, diagnoses its deaths with the doctor and restarts it, as it does edgepilot's own
worker.
With --rpc it drives llama.cpp's RPC backend: the layers go to the helpers' rpc-servers.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from edgepilot.engine.child_env import llama_env
from edgepilot.engine.native_tools import find_tool
from edgepilot.engine.parent_death import die_with_parent
from edgepilot.engine.server_slots import slot_flags
from edgepilot.engine.speculation import Speculation, speculation_args
from edgepilot.engine.tool_flags import adapt_args, known_flags
from edgepilot.plan.commands import llama_cpp_command
from edgepilot.plan.settings import EngineSettings
from edgepilot.serve.launch import WorkerLaunch

ENGINES = ("inprocess", "llama-server")
SHORT_SLOT_FLAGS = ("-kvu", "--kv-unified-per-slot")  # a llama-server without them gets one slot
# llama-server batches a short request's tokens with a long prompt's next chunk: with two slots the chunk is
# kept small, so each step of the short request waits for at most this many tokens of the long prompt.
SHORT_SLOT_BATCH = 64


def takes_short_slot(tool: str) -> bool:
    known = known_flags(tool)
    return known is not None and all(flag in known for flag in SHORT_SLOT_FLAGS)


@dataclass
class NativeLaunch(WorkerLaunch):
    """What the watchdog needs to start a llama-server worker."""

    rpc: list[str] = field(default_factory=list)
    tensor_split: list[float] = field(default_factory=list)
    cache_reuse: int | None = None
    gpu_layers: int | None = None  # -ngl with --rpc (None: all: 999)
    override_tensor: str | None = None  # -ot PATTERN=BUFFER_TYPE,... (a tied output kept on this device)
    speculation: Speculation | None = None  # --lookup / --draft
    tool: str = field(default_factory=lambda: str(find_tool("llama-server")))

    @property
    def preexec(self) -> Callable[[], None]:  # run in the child before exec: SIGTERM when the supervisor dies
        return die_with_parent(signal.SIGTERM)

    # every CPU start keeps GPU drivers out (engine/child_env.py): the watchdog's restart "with the drivers
    # kept out" after a crash while loading has nothing left to add
    keep_drivers_out: bool = True

    def environment(self, settings: EngineSettings) -> dict[str, str]:
        """llama-server's environment: on a CPU run the GPU devices hidden and the drivers kept out
        (engine/child_env.py)."""
        return llama_env(settings.on_cpu, self.tool, keep_drivers_out=self.keep_drivers_out)

    def argv(self, settings: EngineSettings) -> list[str]:
        slots = ["-np", "1"]
        if self.short_ctx:  # one KV pool of both contexts; no slot may take more than the main context
            slots = ["-np", "2", "-kvu", "--kv-unified-per-slot", str(settings.n_ctx)]
            n_batch = min(settings.n_batch, SHORT_SLOT_BATCH)
            n_ubatch = min(settings.n_ubatch, n_batch)
            settings = replace(
                settings, n_ctx=settings.n_ctx + self.short_ctx, n_batch=n_batch, n_ubatch=n_ubatch
            )
        extra = ["--host", self.socket_path, *slots, "-n", str(self.max_tokens), "--no-webui"]
        extra += ["--cache-ram", "0", "--fit", "off"]  # newer llama-servers: no RAM prompt cache, no auto-fit
        extra += ["-a", self.model_name]
        if self.cache_reuse is not None:
            extra += ["--cache-reuse", str(self.cache_reuse)]
        if self.keep_cache is not None:  # the main slot kept on disk (serve/slot_keeper.py)
            extra += slot_flags(str(self.keep_cache))
        if self.rpc:
            extra += ["--rpc", ",".join(self.rpc), "-ngl", str(self.gpu_layers or 999)]
            settings = replace(settings, device=None, n_gpu_layers=0)  # -dev none would drop the helpers
        if self.tensor_split:
            extra += ["--tensor-split", ",".join(f"{v:g}" for v in self.tensor_split)]
        if self.override_tensor:
            extra += ["-ot", self.override_tensor]
        if self.speculation is not None:
            extra += speculation_args(self.speculation, known_flags(self.tool), settings)
        argv = llama_cpp_command(self.model, settings, self.tool, self.cpus, self.prompt_cpus, extra)
        return adapt_args(self.tool, argv)  # the installed llama.cpp's flags (engine/tool_flags.py)
