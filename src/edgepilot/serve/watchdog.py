"""The watchdog: start the worker, wait until it answers, and when it dies ask the doctor why and restart it.

A memory death (the doctor saw memory run short: an lmkd / OOM-killer record, memory pressure, a failed
allocation) restarts with a smaller context: the largest the planner fits under the memory the worker really
had. A SIGKILL with no sign of memory pressure is not one. Other deaths restart with the same settings after a
growing pause, or with the context grown back toward the planned one when the budget fits it again; a shrunk
worker that has run quietly for a while is restarted with that larger context too. A worker that cannot even
start (bad model, illegal instruction, ...) is not restarted in a loop: the server stops with the diagnosis.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import IO, TYPE_CHECKING

from edgepilot.device import fs
from edgepilot.plan.requested import as_requested
from edgepilot.plan.settings import EngineSettings
from edgepilot.serve.context_policy import GROW_CHECK_SECONDS, GrowthPolicy, after_memory_returns
from edgepilot.serve.launch import LOG_PREFIX, Launch
from edgepilot.serve.planning import MEMORY_CAUSES, MIN_CTX, after_memory_kill
from edgepilot.serve.proxy import probe_health
from edgepilot.serve.state import Death, Pressure, ServerState, WorkerInfo, what_was_seen
from edgepilot.shown import shown

if TYPE_CHECKING:
    from edgepilot.doctor.types import DeviceState
    from edgepilot.serve.native import NativeLaunch

LOAD_TIMEOUT = 600.0  # a big model from slow storage on a phone
POLL = 0.1
STOP_GRACE = 5.0
MAX_FAILED_STARTS = 4  # starts in a row that never answered
STABLE_SECONDS = 60.0  # a worker up this long resets the back-off
HEAD_LINES, TAIL_LINES = 200, 400


class OutputRing:
    """The worker's output: first and last lines kept for the doctor, echoed with --verbose."""

    def __init__(self, pipe: IO[bytes], echo: bool, log: Callable[[str], None] | None = None) -> None:
        self.log = log  # the server's log, for the worker's lines meant for it (LOG_PREFIX)
        self.head: list[str] = []
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.dropped = 0
        self.echo = echo
        self.thread = threading.Thread(target=self._pump, args=(pipe,), daemon=True, name="worker-output")
        self.thread.start()

    def _pump(self, pipe: IO[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):
            for raw in pipe:
                line = raw.decode("utf-8", errors="replace").rstrip("\n")
                if self.log is not None and line.startswith(LOG_PREFIX):
                    self.log(line.removeprefix(LOG_PREFIX))
                elif self.echo:  # llama.cpp's log quotes the model's metadata: escaped for the terminal
                    sys.stderr.write(f"worker: {shown(line)}\n")
                if len(self.head) < HEAD_LINES:
                    self.head.append(line)
                else:
                    if len(self.tail) == self.tail.maxlen:
                        self.dropped += 1
                    self.tail.append(line)
        with contextlib.suppress(OSError):
            pipe.close()

    def lines(self) -> list[str]:
        self.thread.join(timeout=2)
        gap = [f"[... {self.dropped} lines not kept ...]"] if self.dropped else []
        return [*self.head, *gap, *self.tail]


class Worker:
    def __init__(
        self,
        argv: list[str],
        echo: bool,
        env: dict[str, str] | None = None,
        preexec: Callable[[], None] | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.argv = argv
        self.started = time.time()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=preexec,
        )
        self.pid = self.proc.pid
        self.output = OutputRing(self.proc.stdout, echo, log)  # type: ignore[arg-type]
        self._lock = threading.Lock()
        self.reaped = False
        self.status = 0
        self.maxrss_bytes: int | None = None

    def signal(self, sig: int) -> None:
        with self._lock:
            if not self.reaped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, sig)

    def poll(self, block: bool) -> bool:
        """Reap the worker if it has exited; True once it has."""
        if self.reaped:
            return True
        while True:
            try:
                pid, status, usage = os.wait4(self.pid, 0 if block else os.WNOHANG)
            except InterruptedError:
                continue
            except ChildProcessError:
                pid, status, usage = self.pid, 0, None
            break
        if pid != self.pid:
            return False
        with self._lock:
            self.reaped = True
            self.status = status
            # ru_maxrss covers the exec'd worker's own peak (it is far above the forked parent's pages)
            self.maxrss_bytes = usage.ru_maxrss * 1024 if usage is not None and usage.ru_maxrss else None
            self.proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen does not wait again
        return True

    @property
    def returncode(self) -> int:
        return os.waitstatus_to_exitcode(self.status)


class Watchdog(threading.Thread):
    def __init__(
        self,
        launch: Launch | NativeLaunch,
        settings: EngineSettings,
        state: ServerState,
        log: Callable[[str], None],
        on_ready: Callable[[WorkerInfo], None],
        on_failed: Callable[[str], None],
        root: Path = fs.LIVE_ROOT,
        growth: GrowthPolicy | None = None,
    ) -> None:
        super().__init__(name="watchdog", daemon=True)
        self.launch, self.settings, self.state = launch, settings, state
        self.log, self.on_ready, self.on_failed = log, on_ready, on_failed
        self.root = root  # the device whose memory decides (the memory watch's)
        self.growth = growth or GrowthPolicy(settings.n_ctx)
        self.stopping = threading.Event()
        self.current: Worker | None = None
        self.ever_ready = False
        self.last_load_seconds = 2.0

    # -- control from other threads ---------------------------------------------------------------------
    def shutdown(self) -> None:
        self.stopping.set()
        w = self.current
        if w is not None:
            w.signal(signal.SIGTERM)
        self.join(STOP_GRACE)
        if self.is_alive() and w is not None:
            w.signal(signal.SIGKILL)
            self.join(STOP_GRACE)

    # -- the loop ----------------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # a bug here must not leave clients waiting on a server that never comes
            message = f"the watchdog failed: {type(exc).__name__}: {exc}"
            self.state.set_failed(message)
            self.on_failed(message)

    def _spawn(self, settings: EngineSettings, restarting: bool) -> Worker:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.launch.socket_path)  # a dead worker's socket would refuse, not time out: tidy
        launch = self.launch  # Launch (edgepilot's worker) or serve.native.NativeLaunch (llama-server)
        worker = Worker(
            launch.argv(settings),
            launch.verbose,
            launch.environment(settings) if hasattr(launch, "environment") else None,
            getattr(launch, "preexec", None),
            self.log,
        )
        self.current = worker
        info = WorkerInfo(
            pid=worker.pid, n_ctx=settings.n_ctx, settings=asdict(settings), started=time.time()
        )
        self.state.set_starting(info, restarting)
        return worker

    def _until_ready(self, w: Worker) -> bool:
        deadline = time.monotonic() + LOAD_TIMEOUT
        while not w.poll(block=False):
            if self.stopping.is_set():
                w.signal(signal.SIGTERM)
            elif time.monotonic() > deadline:
                self.log(f"worker {w.pid} did not answer within {LOAD_TIMEOUT:.0f} s: killing it")
                w.signal(signal.SIGKILL)
            else:
                info = probe_health(self.launch.socket_path)
                if info is not None:
                    self.last_load_seconds = float(info.get("load_seconds") or self.last_load_seconds)
                    # llama-server's /health has no n_ctx: it runs with the context it was given
                    self.state.set_ready(int(info.get("n_ctx") or self._ctx_of(w)))
                    return True
            time.sleep(POLL)
        return False

    def _ctx_of(self, w: Worker) -> int:
        info = self.state.worker
        return info.n_ctx if info is not None and info.pid == w.pid else 0

    def _loop(self) -> None:
        settings, restarting, failed_starts, short_lives = self.settings, False, 0, 0
        while not self.stopping.is_set():
            w = self._spawn(settings, restarting)
            ready = self._until_ready(w)
            if ready:
                failed_starts = 0
                if not self.ever_ready:
                    self.ever_ready = True
                    if self.state.worker is not None:
                        self.on_ready(self.state.worker)
                grown = self._serve(w, settings)
                if grown is not None and not self.stopping.is_set():
                    settings, why = grown
                    self.log(f"worker {w.pid} restarted with {why}")
                    self.state.retry_after = max(1, math.ceil(self.last_load_seconds + 1))
                    self.state.note_restart()
                    restarting = True
                    continue
            if self.stopping.is_set():
                return
            uptime = time.time() - w.started
            short_lives = 0 if uptime >= STABLE_SECONDS else short_lives + 1
            death = self._diagnose(w, settings, uptime)
            memory = death.cause in MEMORY_CAUSES
            if not ready:
                failed_starts += 1
                hopeless = not memory and death.signal_name is None  # it refused to start: it will again
                stuck = failed_starts >= MAX_FAILED_STARTS or (memory and settings.n_ctx <= MIN_CTX)
                if (hopeless and not self.ever_ready) or stuck:
                    death.action = "not restarted"
                    self.state.set_died(death)
                    message = f"the model server could not start: {death.title} — fix: {death.fix}"
                    self.state.set_failed(message)
                    self.on_failed(message)
                    return
            delay = min(30.0, 0.5 * 2 ** max(0, short_lives - 1))
            why = ""
            if not ready and self._keep_drivers_out(death, settings):
                why = "the GPU drivers kept out (it crashed while loading them, as a broken driver does)"
            elif memory:
                self.growth.memory_death()
                settings, why = after_memory_kill(
                    self.launch.model,
                    settings,
                    death.peak_rss_bytes,
                    root=self.root,
                    short_ctx=self.launch.short_ctx,
                )
            elif self.growth.shrunk(settings):
                grown = after_memory_returns(
                    self.launch.model, settings, self.growth.planned_ctx, self.root, self.launch.short_ctx
                )
                if grown is not None:
                    settings, why = grown
            death.action = f"restarting in {delay:.1f} s" + (f" with {why}" if why else "")
            self.state.retry_after = max(1, math.ceil(delay + self.last_load_seconds + 1))
            self.state.set_died(death)
            how = death.signal_name or f"exit status {death.exit_code}"
            self.log(f"worker {w.pid} died ({how}) after {uptime:.1f} s: {death.cause} — {death.action}")
            if self.stopping.wait(delay):
                return
            self.state.note_restart()
            restarting = True

    def _keep_drivers_out(self, death: Death, settings: EngineSettings) -> bool:
        """A llama-server on the CPU that crashed while loading: ggml loads every installed GPU backend,
        and a broken Vulkan driver crashes as it enumerates. Once, the next start keeps the drivers out."""
        from edgepilot.engine.child_env import DRIVER_CRASH_STATUSES

        if (
            death.exit_code not in DRIVER_CRASH_STATUSES
            or not settings.on_cpu
            or getattr(self.launch, "keep_drivers_out", True)
        ):
            return False
        self.launch.keep_drivers_out = True  # type: ignore[union-attr]
        return True

    def _serve(self, w: Worker, settings: EngineSettings) -> tuple[EngineSettings, str] | None:
        """Wait for the ready worker to exit. If its context was shrunk and it has run quietly long enough for
        the budget to fit a larger one, stop it and return the grown settings."""
        next_check = time.monotonic() + GROW_CHECK_SECONDS
        while not w.poll(block=False):
            if self.stopping.wait(POLL):
                w.poll(block=True)  # shutdown() has signalled it
                return None
            if not self.growth.shrunk(settings) or time.monotonic() < next_check:
                continue
            next_check = time.monotonic() + GROW_CHECK_SECONDS
            busy = self.state.in_flight > 0 or self.state.waiting > 0
            if not self.growth.quiet(time.time() - w.started, busy, self.state.pressure.gated):
                continue
            grown = after_memory_returns(
                self.launch.model, settings, self.growth.planned_ctx, self.root, self.launch.short_ctx
            )
            if grown is None:
                continue
            w.signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE
            while not w.poll(block=False) and time.monotonic() < deadline:
                time.sleep(POLL)
            if not w.poll(block=False):
                w.signal(signal.SIGKILL)
                w.poll(block=True)
            return grown
        return None

    def _diagnose(self, w: Worker, settings: EngineSettings, uptime: float) -> Death:
        from edgepilot.doctor.diagnose import diagnose
        from edgepilot.doctor.evidence import signal_name
        from edgepilot.doctor.supervise import device_state
        from edgepilot.doctor.types import RunRecord

        rc = w.returncode
        sig = -rc if rc < 0 else None
        lines = w.output.lines()
        try:
            after = device_state(self.root)
            # The memory watch's last reading is the memory the worker died in; a server's start is minutes
            # or days ago, so there is no "before the run" to sample.
            before = _as_device_state(self.state.pressure) or after
            record = RunRecord(
                command=w.argv,
                returncode=rc,
                exit_code=128 + sig if sig else rc,
                signal=sig,
                signal_name=signal_name(sig),
                wall_seconds=round(uptime, 3),
                peak_rss_bytes=w.maxrss_bytes,
                before=before,
                after=after,
                output_lines=len(lines),
            )
            d = diagnose(
                lines,
                model=str(self.launch.model),
                root=self.root,
                run=record,
                requested=as_requested(settings),
            )
            top = d.top
            cause, title, fix, evidence = top.id, top.title, top.fix, top.evidence[:4]
        except Exception as exc:  # the doctor must not stop the restart
            cause, title = "unknown", "the doctor could not diagnose this death"
            fix, evidence = "see the worker's output with --verbose", [f"{type(exc).__name__}: {exc}"]
        return Death(
            at=time.time(),
            pid=w.pid,
            uptime_seconds=round(uptime, 1),
            exit_code=128 + sig if sig else rc,
            signal_name=signal_name(sig),
            peak_rss_bytes=w.maxrss_bytes,
            cause=cause,
            title=title,
            fix=fix,
            evidence=evidence,
            seen=what_was_seen(signal_name(sig), 128 + sig if sig else rc, cause),
        )


def _as_device_state(p: Pressure) -> DeviceState | None:
    from edgepilot.doctor.types import DeviceState

    if p.available_bytes is None and p.psi_some_avg10 is None:
        return None
    return DeviceState(
        available_bytes=p.available_bytes,
        psi_some_avg10=p.psi_some_avg10,
        psi_full_avg10=None,
        hottest_celsius=p.celsius,
        hottest_zone=p.zone,
    )
