"""The tools engine: llama.cpp's own llama-server as a child process, on a private Unix socket.

For users without llama-cpp-python (Termux's Python, where nothing compiles): the llama.cpp their package
manager installed does the work, and edgepilot plans, drives and measures it. The server keeps one slot
(`-np 1`) whose KV cache persists between requests: with `cache_prompt` it processes only what is new in
each prompt, as the in-process engine's KVSession does. Timings come from the server's own `timings`.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edgepilot.device.process import rss_bytes
from edgepilot.engine.base import EngineError, GenerationStats, LoadInfo
from edgepilot.engine.child_env import DRIVER_CRASH_STATUSES, llama_env
from edgepilot.engine.native_tools import find_tool, tool_version
from edgepilot.engine.parent_death import die_with_parent
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.engine.server_slots import slot_flags
from edgepilot.engine.speculation import SpecStats, Speculation, speculation_args
from edgepilot.engine.tool_flags import adapt_args, known_flags
from edgepilot.engine.unix_http import UnixClient, WorkerUnavailable
from edgepilot.errors import UserError
from edgepilot.plan.commands import llama_cpp_command
from edgepilot.plan.settings import EngineSettings
from edgepilot.shown import shown

LOG_LINES = 2000  # llama-server's stderr kept (the load log, for the doctor and the plan's calibration)
READY_POLL = 0.05
STOP_TYPES = {"eos": "eog", "limit": "limit", "word": "caller", "none": "limit"}


class ServerEngine:
    """llama-server with fixed settings. Use as a context manager: the child stops at the end."""

    kind = "tools"

    def __init__(
        self,
        model_path: Path,
        settings: EngineSettings,
        verbose: bool = False,
        cpus: list[int] | None = None,
        prompt_cpus: list[int] | None = None,
        tool: Path | None = None,
        load_timeout: float | None = None,
        speculation: Speculation | None = None,
    ) -> None:
        settings.validate()
        self.settings = settings
        self.speculation = speculation.validate() if speculation is not None else None
        self.model_path = Path(model_path)
        self.tool = tool or find_tool("llama-server")
        self.version = tool_version(self.tool)
        self._dir = tempfile.mkdtemp(prefix="edgepilot-engine-")
        self.socket_path = os.path.join(self._dir, "llama.sock")
        self.log: deque[str] = deque(maxlen=LOG_LINES)
        self._verbose = verbose
        self._proc: subprocess.Popen[bytes] | None = None
        self._peak_after_exit: int | None = None
        self._template: str | None | bool = False  # False: not read yet
        self.speculation_argv = (  # the flags for llama-server, as its --help spells them
            []
            if self.speculation is None
            else speculation_args(self.speculation, known_flags(self.tool), settings)
        )
        self.argv = self._argv(cpus, prompt_cpus)
        self._keep_drivers_out = self.settings.on_cpu  # a CPU run keeps them out from its first start
        self.notes: list[str] = []
        t0 = time.perf_counter()
        try:
            self._start_or_retry_without_drivers(load_timeout)
            self.client = UnixClient(self.socket_path)
            self.load = self._load_info(time.perf_counter() - t0)
            self.load_peak_bytes = _hwm(self._proc.pid)  # loaded, before any request: the calibration's base
        except BaseException:
            self.close()
            raise

    # -- the child ------------------------------------------------------------------------------------------
    def _argv(self, cpus: list[int] | None, prompt_cpus: list[int] | None) -> list[str]:
        extra = ["--host", self.socket_path, "-np", "1", "--no-webui", "--cache-ram", "0", "--fit", "off"]
        extra += slot_flags(self._dir)  # chat keeps its cache in its session (engine/server_slots.py)
        # newer llama-servers log the load (buffer sizes, for the plan) at -lv 4 only
        extra += ["-lv", "4"]
        extra += self.speculation_argv
        argv = llama_cpp_command(self.model_path, self.settings, str(self.tool), cpus, prompt_cpus, extra)
        if argv[0] == "taskset":  # this process is pinned already (tuned.decide): the child inherits it
            argv = argv[3:]
        return adapt_args(self.tool, argv)

    def _start_or_retry_without_drivers(self, load_timeout: float | None) -> None:
        """A CPU run that dies by a signal while loading may have died in a GPU driver it never asked for
        (ggml loads every installed backend, and a broken Vulkan driver crashes as it enumerates): once,
        it starts again with every GPU driver kept out and says so."""
        try:
            self._start(load_timeout)
        except EngineError as exc:
            if (
                not self.settings.on_cpu
                or self._keep_drivers_out
                or exc.exit_code not in DRIVER_CRASH_STATUSES
            ):
                raise
            self.notes.append(
                f"llama-server crashed while loading (status {exc.exit_code}): started again with the GPU "
                "drivers kept out (VK_DRIVER_FILES); `edgepilot probe` checks the driver"
            )
            self._keep_drivers_out = True
            self.log.clear()
            self._start(load_timeout)

    def _start(self, load_timeout: float | None) -> None:
        self._proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=llama_env(self.settings.on_cpu, self.tool, keep_drivers_out=self._keep_drivers_out),
            start_new_session=True,  # Ctrl-C in the terminal reaches edgepilot, which stops the child itself
            preexec_fn=die_with_parent(),  # a SIGKILLed edgepilot leaves no llama-server behind
        )
        threading.Thread(target=self._pump, args=(self._proc.stderr,), daemon=True).start()
        deadline = None if load_timeout is None else time.monotonic() + load_timeout
        probe = UnixClient(self.socket_path, timeout=5)
        while True:
            if self._proc.poll() is not None:
                raise self._error("llama-server stopped while loading")
            if deadline is not None and time.monotonic() > deadline:
                raise EngineError(f"llama-server did not load {self.model_path.name} in {load_timeout:.0f} s")
            if os.path.exists(self.socket_path):
                try:
                    status, _ = probe.get("/health")
                    if status == 200:
                        return
                except WorkerUnavailable:
                    pass
            time.sleep(READY_POLL)

    def _pump(self, pipe: Any) -> None:
        for raw in pipe:
            self.log.append(line := raw.decode("utf-8", errors="replace").rstrip("\n"))
            if self._verbose:  # its log quotes the model's metadata: escaped for the terminal
                os.write(2, f"{shown(line)}\n".encode())

    def _error(self, what: str) -> EngineError:
        """The failure with llama-server's last error lines, its log and how it ended (SIGKILL: the
        system's memory killer, most likely), for the doctor."""
        exit_code = None
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(1.0)  # a process killed mid-answer is reaped in a moment
            code = self._proc.returncode
            if code is not None:
                exit_code = 128 - code if code < 0 else code  # as a shell reports it: 137 for SIGKILL
                what += f"; it exited with status {exit_code}" + (
                    f" ({signal.Signals(-code).name})" if code < 0 and -code in signal.valid_signals() else ""
                )
        time.sleep(0.1)  # the pump thread reads the last lines
        errors = [
            ln.strip() for ln in self.log if any(w in ln.lower() for w in ("error", "failed", "unable"))
        ]
        detail = "; ".join(errors[-2:])
        message = f"{what}: {detail}" if detail else f"{what} (see --verbose for its log)"
        return EngineError(message, list(self.log), exit_code)

    def _load_info(self, seconds: float) -> LoadInfo:
        props = self._json("GET", "/props")
        models = self._json("GET", "/v1/models")
        meta = (models.get("data") or [{}])[0].get("meta") or {}
        gen = props.get("default_generation_settings") or {}
        n_ctx = int(gen.get("n_ctx") or self.settings.n_ctx)
        return LoadInfo(
            seconds=seconds,
            n_ctx=n_ctx,
            n_batch=min(self.settings.n_batch, n_ctx),
            n_ubatch=min(self.settings.n_ubatch, self.settings.n_batch, n_ctx),
            n_ctx_train=int(meta.get("n_ctx_train") or 0),
            n_vocab=int(meta.get("n_vocab") or 0),
            n_params=int(meta.get("n_params") or 0),
            model_bytes=int(meta.get("size") or 0),
            description=str(props.get("model_path") or self.model_path.name),
            log=list(self.log),
        )

    def _json(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            status, data = self.client.request(method, path, body)
        except WorkerUnavailable as exc:
            raise self._error(f"llama-server stopped answering ({exc})") from None
        if status != 200:
            raise EngineError(f"llama-server answered {path} with HTTP {status}: {data[:200]!r}")
        try:
            out = json.loads(data)
        except ValueError:
            raise EngineError(f"llama-server's {path} answer is not JSON") from None
        return out if isinstance(out, dict) else {"value": out}

    def peak_rss_bytes(self) -> int:
        """The peak resident memory of the process that holds the model: llama-server."""
        if self._proc is not None and self._proc.poll() is None:
            return _hwm(self._proc.pid)
        return self._peak_after_exit or 0

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            peak = _hwm(proc.pid)
            usage = _stop(proc)
            self._peak_after_exit = max(peak, usage.ru_maxrss * 1024 if usage else 0)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> ServerEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- text <-> tokens -------------------------------------------------------------------------------------
    def _has_template(self) -> bool:
        if self._template is False:
            from edgepilot.gguf.verdict import header_of

            try:
                self._template = header_of(self.model_path).metadata.get("tokenizer.chat_template") or None
            except (OSError, ValueError, UserError):
                self._template = None
        return bool(self._template)

    def chat_prompt(self, user_text: str) -> str | None:
        return self.chat_messages_prompt([("user", user_text)])

    def chat_messages_prompt(self, messages: list[tuple[str, str]]) -> str | None:
        """The conversation in the model's chat template (llama-server renders it); None without one."""
        if not messages or not self._has_template():
            return None
        body = {"messages": [{"role": r, "content": c} for r, c in messages]}
        prompt = self._json("POST", "/apply-template", body).get("prompt")
        return prompt if isinstance(prompt, str) else None

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        body = {"content": text, "add_special": add_special, "parse_special": parse_special}
        tokens = self._json("POST", "/tokenize", body).get("tokens")
        if not isinstance(tokens, list):
            raise EngineError("llama-server's /tokenize answer has no tokens")
        return [int(t) for t in tokens]

    # -- evaluation ------------------------------------------------------------------------------------------
    def generate(
        self,
        prompt_tokens: list[int],
        n_predict: int,
        sampler: SamplerSettings | None = None,
        on_text: Callable[[str], bool | None] | None = None,
        stop_at_eog: bool = True,
        on_phase: Callable[[str], None] | None = None,
        n_past: int = 0,
        cache_prompt: bool = True,
        cache_reuse: int = 0,
    ) -> GenerationStats:
        """Process the prompt and generate up to n_predict tokens, streaming text to on_text (True from it
        stops the answer). The server keeps the longest common prefix with its last sequence (cache_prompt):
        the result's n_past says how many prompt tokens it did not process again. `n_past` and `on_phase`
        are the in-process engine's: the server decides reuse itself and pins with -C/-Cb. cache_reuse > 0:
        runs of at least that many cached tokens after the common prefix are shifted into place."""
        del n_past, on_phase
        if not prompt_tokens:
            raise UserError("the prompt is empty")
        n_ctx = self.load.n_ctx
        if len(prompt_tokens) >= n_ctx:
            raise UserError(
                f"the prompt has {len(prompt_tokens)} tokens but the context holds {n_ctx}; "
                f"use a larger --ctx or a shorter prompt"
            )
        chosen = (sampler or SamplerSettings()).validate()
        budget = min(n_predict, n_ctx - len(prompt_tokens))
        if budget == 0:  # llama-server samples one token even at n_predict 0: none of it was asked for
            on_text = None
        body: dict[str, Any] = {
            "prompt": prompt_tokens,
            "n_predict": budget,
            "stream": True,
            "cache_prompt": cache_prompt,
            "n_cache_reuse": cache_reuse,  # slide cached runs this long after dropped turns (kv_slide.py)
            "ignore_eos": not stop_at_eog,
            "temperature": chosen.temperature,
            "top_k": chosen.top_k,
            "top_p": chosen.top_p,
            "min_p": chosen.min_p,
            "seed": chosen.seed,
            "samplers": ["top_k", "top_p", "min_p", "temperature"],
            "return_tokens": True,
        }
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        generated: list[int] = []
        stopped_by, first, final = "limit", None, None
        t0 = time.perf_counter()
        try:
            with self.client.stream("POST", "/completion", body) as events:
                for event in events:
                    tokens = event.get("tokens") or []
                    generated.extend(int(t) for t in tokens if isinstance(t, int))
                    content = event.get("content") or ""
                    if first is None and (tokens or content):
                        first = time.perf_counter() - t0
                    if event.get("stop"):
                        final = event
                        break
                    if on_text is not None and content:
                        text = decoder.decode(content.encode("utf-8"))
                        if text and on_text(text):
                            stopped_by = "caller"
                            break  # closing the connection stops the server's generation
        except WorkerUnavailable as exc:
            raise self._error(f"llama-server stopped answering ({exc})") from None
        if final is None and stopped_by != "caller":  # the stream ended without its last event
            raise self._error("llama-server's answer broke off")
        elapsed = time.perf_counter() - t0
        timings = (final or {}).get("timings") or {}
        if final is not None:
            content = final.get("content") or ""
            if on_text is not None and content:
                on_text(content)
            stop_type = str(final.get("stop_type") or "limit")
            stopped_by = STOP_TYPES.get(stop_type, "limit")
            if stopped_by == "limit" and budget < n_predict:
                stopped_by = "context"
        n_gen = int(timings.get("predicted_n") or len(generated))
        gen_seconds = float(timings.get("predicted_ms") or 0) / 1e3
        prompt_seconds = float(timings.get("prompt_ms") or 0) / 1e3
        n_cached = int(timings.get("cache_n") or 0)
        if final is None:  # stopped by the caller: the server's timings never came
            prompt_seconds = first or elapsed
            gen_seconds = max(0.0, elapsed - prompt_seconds)
            n_gen = len(generated)
        if budget == 0:
            n_gen, gen_seconds, generated, first = 0, 0.0, [], None
        return GenerationStats(
            n_prompt=len(prompt_tokens),
            n_gen=n_gen,
            prompt_seconds=prompt_seconds,
            gen_seconds=gen_seconds,
            stopped_by=stopped_by,
            first_token_seconds=first,
            n_past=min(n_cached, len(prompt_tokens) - 1) if n_cached else 0,
            tokens=generated,
            speculation=None
            if self.speculation is None
            else SpecStats.from_timings(self.speculation.kind, timings, n_gen),
        )


def _hwm(pid: int) -> int:
    """A live process's peak resident memory (VmHWM), 0 when it cannot be read."""
    return rss_bytes(pid)[1] or 0


def _stop(proc: subprocess.Popen[bytes], grace: float = 10.0) -> Any:
    """SIGTERM, SIGKILL after `grace` seconds; reaps the child, returns its rusage (None: already reaped)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
            if time.monotonic() > deadline:
                proc.kill()
                break
            time.sleep(0.02)
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except ChildProcessError:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage
