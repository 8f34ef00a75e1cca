"""`edgepilot serve`: the supervisor process that holds it all together.

    client ──TCP──> front (this process: auth, limits, queue, memory gate, status page)
                      └──Unix socket (private dir)──> worker (child process: llama.cpp + Starlette)
                    watchdog thread: starts the worker, diagnoses its deaths (doctor), restarts it

The model never loads in this process, so a memory kill takes the worker, not the port: the front keeps
answering (503 + Retry-After) while the watchdog brings the worker back.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from edgepilot.device.background_watch import BackgroundWatch
from edgepilot.engine.choice import EngineInfo, choose_engine
from edgepilot.engine.native_tools import find_tool
from edgepilot.engine.thermal_guard import ThermalLimit, guard_note, watch_only
from edgepilot.errors import UserError
from edgepilot.gguf.resolve import resolve_model
from edgepilot.plan.requested import RequestedSettings
from edgepilot.plan.settings import EngineSettings
from edgepilot.plan.types import DoesNotFit
from edgepilot.serve.config import ServeConfig, default_min_available
from edgepilot.serve.front import Front
from edgepilot.serve.kept_folder import NOT_KEPT, KeptFolder
from edgepilot.serve.listen import bind_front
from edgepilot.serve.native import NativeLaunch, takes_short_slot
from edgepilot.serve.planning import ServePlan, checked_inprocess, plan_serve
from edgepilot.serve.pressure import PressureWatch
from edgepilot.serve.short_lane import MAIN_SLOT_ID
from edgepilot.serve.slot_keeper import KeptSlot, SlotCache
from edgepilot.serve.state import Death, Pressure, ServerState, WorkerInfo
from edgepilot.serve.wakelock import WakeLock
from edgepilot.serve.watchdog import Launch, Watchdog

RPC_BUDGET = 1 << 50  # planning this device's settings with --rpc: not bounded by its memory (see prepare)


class ServeFailed(UserError):
    """The model server could not be started (the message carries the doctor's cause and fix)."""


@dataclass
class ServeStarted:
    """Printed once the model answers (`--json`: this object, on one line)."""

    url: str
    base_url: str
    host: str
    port: int
    model: str
    model_name: str
    settings: EngineSettings  # as the worker made them (context padded)
    predicted_peak_rss_bytes: int
    budget_bytes: int
    api_key_required: bool
    pid: int
    worker_pid: int
    wake_lock: bool
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # the context's limits (plan/context_limits.py)


@dataclass
class ServeStopped:
    uptime_seconds: float
    restarts: int
    requests: dict[str, int]
    deaths: list[Death]


def front_config(front: Front) -> Any:
    """The front's uvicorn.Config: bounds per connection, and a cap on idle connections only. No
    limit_concurrency: it counts idle connections too (a few dozen that send nothing would turn every keyed
    client away), and its 503 is plain text without Retry-After."""
    import uvicorn

    from edgepilot.serve.connections import MAX_HEAD_BYTES, ConnectionGuard, guarded_protocol

    return uvicorn.Config(
        front,
        http=guarded_protocol(ConnectionGuard.of(front.config, front.state.connections)),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        ws="none",
        log_level="warning",
        access_log=False,
        lifespan="off",
        server_header=False,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=5,
    )


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@dataclass
class NativeEngine:
    """`--engine llama-server` (and its --rpc helpers): llama.cpp's server as the worker."""

    rpc: list[str] = field(default_factory=list)
    tensor_split: list[float] = field(default_factory=list)
    cache_reuse: int | None = None
    gpu_layers: int | None = None  # -ngl with --rpc (None: every layer to the helpers)
    override_tensor: str | None = None  # llama.cpp's -ot (`cluster plan` keeps a tied output here with it)
    speculation: Any = None  # engine.speculation.Speculation: --lookup / --draft (None: off)


def prepare(
    model: str | None,
    requested: RequestedSettings,
    budget_bytes: int | None,
    force: bool,
    rpc: bool = False,
    engine: EngineInfo | None = None,
    short_ctx: int = 0,
    speculation: Any = None,
) -> ServePlan:
    path = resolve_model(model)
    # with --rpc the helpers hold the layers: the settings are the cluster plan's, which checked every
    # device's budget with them; fitting the whole model into this device's budget would shrink them
    # (a quantized KV cache on every helper, no mmap, a smaller ubatch) behind the plan's back
    budget = RPC_BUDGET if rpc else budget_bytes
    plan = plan_serve(path, requested, budget, engine=engine, short_ctx=short_ctx, speculation=speculation)
    if rpc:  # the helpers hold the layers: `edgepilot cluster plan` checks their budgets
        here = plan_serve(path, requested, budget_bytes, engine=engine).fit  # this device's own budget
        notes = [n for n in plan.fit.notes if n not in plan.fit.budget.reasons]  # RPC_BUDGET's
        plan.fit = replace(plan.fit, budget_bytes=here.budget_bytes, budget=here.budget, notes=notes)
        plan.fit.notes.append(
            "layers on the --rpc helpers: see `edgepilot cluster plan` for each one's memory"
        )
    elif not plan.fit.fits and not force:
        raise DoesNotFit(plan.fit)
    return plan


def warm_page_cache(plan: ServePlan, log: Callable[[str], None]) -> None:
    from edgepilot.engine.preload import preload, skip_reason

    skipped = skip_reason(plan.fit.fits, plan.settings.use_mmap)
    if skipped:
        log(f"no preload: {skipped}")
        return
    log(f"preloading {plan.model.name} into the page cache")
    done = preload(plan.model)
    log(f"preloaded {done.bytes_read / 2**20:.1f} MiB in {done.seconds:.2f} s")


class Supervisor:
    """The supervisor process's parts: front (uvicorn), watchdog and memory watch, and their lifetimes."""

    def __init__(
        self,
        plan: ServePlan,
        config: ServeConfig,
        on_ready: Callable[[ServeStarted], None] | None,
        log: Callable[[str], None],
        native: NativeEngine | None = None,
    ) -> None:
        self.plan, self.config, self.on_ready, self.log = plan, config, on_ready, log
        self.native = native
        self.state = ServerState(plan.model.name, config.retry_after)
        spec = native.speculation if native is not None else None
        self.state.speculation_kind = spec.kind if spec is not None else None
        self.wake = WakeLock()
        self.server: Any = None
        self.port = 0
        self.kept: KeptFolder = NOT_KEPT  # where the worker's cache outlives it (serve/cache_keeper.py)

    def stop_server(self) -> None:
        if self.server is not None:
            self.server.should_exit = True

    def worker_ready(self, info: WorkerInfo) -> None:
        plan, config = self.plan, self.config
        notes = [n for n in plan.fit.notes if n not in plan.fit.warnings]
        if self.wake.note:
            notes.append(self.wake.note)
        if config.max_temp_c is not None:
            notes.append(guard_note(config.max_temp_c, plan.settings.n_threads, self.native is None))
        if plan.cpus:
            notes.append(
                f"worker pinned to CPUs {','.join(map(str, plan.cpus))}"
                + (f", prompts on {','.join(map(str, plan.prompt_cpus))}" if plan.prompt_cpus else "")
                + " (tuned profile)"
            )
        if self.on_ready is not None:
            self.on_ready(
                ServeStarted(
                    url=_url(config.host, self.port) + "/",
                    base_url=_url(config.host, self.port) + "/v1",
                    host=config.host,
                    port=self.port,
                    model=str(plan.model),
                    model_name=plan.model.name,
                    settings=replace(plan.settings, n_ctx=info.n_ctx),
                    predicted_peak_rss_bytes=plan.predicted_peak_bytes,
                    budget_bytes=plan.fit.budget_bytes,
                    api_key_required=config.requires_key,
                    pid=os.getpid(),
                    worker_pid=info.pid,
                    wake_lock=self.wake.held,
                    notes=notes,
                    warnings=list(plan.fit.warnings),
                )
            )

    def failed(self, message: str) -> None:
        self.log(message)
        self.stop_server()

    def publish(self, pressure: Pressure) -> None:
        self.state.pressure = pressure

    def gate_changed(self, gated: bool, reason: str | None) -> None:
        self.log(f"memory gate {'closed' if gated else 'open'}{': ' + reason if reason else ''}")

    def memory_watch(self) -> PressureWatch:
        floor = self.config.min_available_bytes
        if floor is None:
            from edgepilot.device.memory import read_memory

            floor = default_min_available(read_memory(self.config.watch_root).total_bytes)
        return PressureWatch(
            self.config.watch_root, self.config.psi_limit, floor, self.publish, self.gate_changed
        )

    def run(self, sock: socket.socket) -> ServeStopped:
        import uvicorn

        config, plan = self.config, self.plan
        self.port = sock.getsockname()[1]
        sock_dir = Path(tempfile.mkdtemp(prefix="edgepilot-serve-"))  # 0700: the worker's socket, ours alone
        cluster = self.native is not None and self.native.rpc  # the helpers hold part of the cache
        self.kept = KeptFolder(plan.model) if config.cache_reuse and not cluster else NOT_KEPT
        if self.kept.note:
            self.log(f"note: {self.kept.note}")
        socket_path = str(sock_dir / "worker.sock")
        common = dict(
            model=plan.model,
            model_name=plan.model.name,
            socket_path=socket_path,
            max_tokens=config.max_tokens,
            cpus=plan.cpus,
            verbose=config.verbose,
            prompt_cpus=plan.prompt_cpus,
            short_ctx=plan.short_ctx,
            keep_cache=self.kept.path,
        )
        launch: Launch | NativeLaunch
        if self.native is not None:
            native = self.native
            launch = NativeLaunch(
                **common,
                rpc=native.rpc,
                tensor_split=native.tensor_split,
                cache_reuse=native.cache_reuse,
                gpu_layers=native.gpu_layers,
                override_tensor=native.override_tensor,
                speculation=native.speculation,
            )
        else:
            launch = Launch(
                **common,
                cache_reuse=config.cache_reuse,
                max_prompt_tokens=config.max_prompt_tokens,
                max_temp_c=config.max_temp_c,
                watch_root=config.watch_root,
            )
        watchdog = Watchdog(
            launch,
            plan.settings,
            self.state,
            self.log,
            self.worker_ready,
            self.failed,
            root=config.watch_root,
        )
        watch = self.memory_watch()
        background = BackgroundWatch(self.log)  # said once a class in the log, shown on /health and /
        self.state.background = background.status
        thermal = None  # --max-temp: edgepilot's worker guards itself; llama-server's is only watched, here
        if config.max_temp_c is not None and self.native is not None:
            thermal = watch_only(ThermalLimit(config.max_temp_c, config.watch_root), plan.settings, self.log)
            self.state.thermal = thermal.status
        lanes = {"n_ctx": plan.settings.n_ctx, "short_ctx": plan.short_ctx, "native": self.native is not None}
        front = Front(config, self.state, socket_path, self.log, plan.predicted_peak_bytes, **lanes)
        if self.native is not None and self.kept.path is not None:
            slot = MAIN_SLOT_ID if front.pin_slots else 0
            cache = SlotCache(self.kept.path, socket_path, plan.model, plan.settings, slot)
            front.kept_slot = KeptSlot(cache, self.log)
        self.server = uvicorn.Server(front_config(front))
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            # uvicorn handles SIGINT/SIGTERM while it runs and re-raises them afterwards: make that re-raise
            # harmless, so the cleanup below (worker, wake lock, socket dir) runs. SIGHUP: Termux closed.
            signal.signal(signal.SIGINT, lambda *_: None)
            signal.signal(signal.SIGTERM, lambda *_: None)
            signal.signal(signal.SIGHUP, lambda *_: self.stop_server())
            self.wake.acquire()
            watch.start()
            watchdog.start()
            with background, thermal or contextlib.nullcontext():
                self.server.run(sockets=[sock])
        finally:
            self.state.set_stopping()
            if watchdog.ident is not None:
                watchdog.shutdown()
            watch.stop.set()
            self.wake.release()
            for sig, handler in previous.items():
                with contextlib.suppress(ValueError, TypeError):
                    signal.signal(sig, handler)
            shutil.rmtree(sock_dir, ignore_errors=True)
            self.kept.release()
        if self.state.failure:
            raise ServeFailed(self.state.failure)
        snap = self.state.snapshot()
        return ServeStopped(
            uptime_seconds=round(time.time() - self.state.started, 1),
            restarts=self.state.restarts,
            requests={k: v for k, v in snap["requests"].items() if isinstance(v, int)},
            deaths=self.state.deaths,
        )


def serve(
    model: str | None,
    requested: RequestedSettings,
    config: ServeConfig,
    budget_bytes: int | None = None,
    force: bool = False,
    on_ready: Callable[[ServeStarted], None] | None = None,
    log: Callable[[str], None] = lambda _m: None,
    native: NativeEngine | None = None,
    warm: bool = True,
) -> ServeStopped:
    """Plan, listen, run until Ctrl-C / SIGTERM (or a worker that cannot start: ServeFailed).
    warm: read the model into the page cache first (the worker's mapping finds it there), when it fits."""
    config.validate()
    engine = None
    if native is not None:
        if config.max_prompt_tokens is not None:
            raise UserError(
                "--max-prompt-tokens is for the in-process engine: llama-server's prompt is bounded by its "
                "context (--ctx)"
            )
        find_tool("llama-server")  # one clear line now, not a worker that cannot start
        engine = choose_engine("tools")
    else:
        requested = checked_inprocess(requested, log)
    rpc = bool(native and native.rpc)
    short_ctx = config.short_lane_ctx
    if native is not None and (rpc or not takes_short_slot(str(find_tool("llama-server")))):
        short_ctx = 0  # the helpers' memory is the cluster plan's; an older llama-server: one slot
    # the port first: a port in use is one line at once, not after planning and reading the model
    sock = bind_front(config.host, config.port)
    try:
        speculation = native.speculation if native is not None else None
        plan = prepare(
            model, requested, budget_bytes, force, rpc=rpc, engine=engine, short_ctx=short_ctx,
            speculation=speculation,
        )  # fmt: skip
        if warm:
            warm_page_cache(plan, log)
        return Supervisor(plan, config, on_ready, log, native).run(sock)
    finally:
        sock.close()
