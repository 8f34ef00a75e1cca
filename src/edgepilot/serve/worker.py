"""The worker process: the model in llama.cpp (LlamaEngine) behind a Starlette app on a private Unix socket.

Started and restarted by the supervisor (`edgepilot serve`); only the front talks to it, so it does no
authentication: its socket lives in a directory only this user can enter. It exits when the supervisor dies
(PR_SET_PDEATHSIG), so a killed `edgepilot serve` never leaves a model resident in the background.

    python -m edgepilot.serve.worker --socket S --model M --settings JSON --model-name NAME
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from edgepilot.engine.sampling import SamplerSettings
from edgepilot.serve import protocol as p
from edgepilot.serve.generation import Generator, Job, PromptRefused
from edgepilot.serve.lanes import LANE_HEADER, SHORT, Lanes
from edgepilot.serve.launch import LOG_PREFIX
from edgepilot.serve.request_body import ChatRequest, CompletionRequest, InvalidRequest, Sampling, decode_json
from edgepilot.serve.wire import error_body, sse

DISCONNECT_POLL = 0.25
PR_SET_PDEATHSIG = 1


def _sampler(req: Sampling) -> SamplerSettings:
    d = SamplerSettings()
    return SamplerSettings(
        temperature=d.temperature if req.temperature is None else req.temperature,
        top_k=d.top_k if req.top_k is None else req.top_k,
        top_p=d.top_p if req.top_p is None else req.top_p,
        min_p=d.min_p if req.min_p is None else req.min_p,
        seed=d.seed if req.seed is None else req.seed & 0xFFFFFFFF,
    )


def _error(
    status: int, message: str, kind: str = "invalid_request_error", code: str | None = None
) -> JSONResponse:
    return JSONResponse(error_body(message, kind, code), status_code=status)


async def _watch_disconnect(request: Request, cancelled: threading.Event) -> None:
    while not cancelled.is_set():
        if await request.is_disconnected():
            cancelled.set()
            return
        await asyncio.sleep(DISCONNECT_POLL)


def create_app(
    lanes: Lanes,
    model_name: str,
    max_tokens: int,
    info: dict[str, Any],
    thermal: Callable[[], dict[str, Any]] | None = None,
) -> Starlette:
    async def http_error(_request: Request, exc: HTTPException) -> Response:
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return _error(exc.status_code, str(exc.detail), kind)

    async def crashed(_request: Request, exc: Exception) -> Response:
        return _error(500, f"the model server failed on this request: {type(exc).__name__}", "server_error")

    async def health(_request: Request) -> Response:
        body = {"status": "ok", "pid": os.getpid(), **info, "stats": lanes.stats()}
        if thermal is not None:  # --max-temp: the guard's reading and the threads in use now (read back)
            body["thermal"] = thermal()
        return JSONResponse(body)

    def clamp(wanted: int | None) -> int:
        return max_tokens if wanted is None else min(wanted, max_tokens)

    async def respond(job: Job, stream: bool, usage: bool, request: Request, chat: bool) -> Response:
        rid = p.new_id("chatcmpl" if chat else "cmpl")
        cancelled = threading.Event()
        short = request.headers.get(LANE_HEADER) == SHORT
        if not stream:
            watcher = asyncio.create_task(_watch_disconnect(request, cancelled))
            try:
                outcome = await lanes.complete(job, cancelled, short)
            except PromptRefused as exc:
                return _error(400, str(exc), code=exc.code)
            finally:
                watcher.cancel()
            body = (p.chat_response if chat else p.completion_response)(rid, model_name, outcome)
            headers = {"X-Edgepilot-Note": "; ".join(outcome.notes)} if outcome.notes else None
            return JSONResponse(p.with_notes(body, outcome), headers=headers)

        pieces = lanes.stream(job, cancelled, short)
        try:  # the first item: the prompt was accepted (or an error can still be a proper status code)
            first = await anext(pieces)
        except PromptRefused as exc:
            return _error(400, str(exc), code=exc.code)

        async def events():
            obj = "chat.completion.chunk" if chat else "text_completion"
            try:
                if chat:
                    yield sse(p.chat_chunk(rid, model_name, {"role": "assistant", "content": ""}))
                item = first
                while True:
                    if isinstance(item, p.Outcome):
                        if chat:
                            yield sse(p.chat_chunk(rid, model_name, {}, item.finish_reason))
                        else:
                            yield sse(p.completion_chunk(rid, model_name, "", item.finish_reason))
                        if usage or item.notes:
                            yield sse(p.with_notes(p.usage_chunk(rid, model_name, obj, item), item))
                        break
                    if chat:
                        yield sse(p.chat_chunk(rid, model_name, {"content": item}))
                    else:
                        yield sse(p.completion_chunk(rid, model_name, item))
                    item = await anext(pieces)
                yield b"data: [DONE]\n\n"
            except Exception as exc:  # the status line is gone: say it in the stream, never end silently
                yield sse(error_body(str(exc), "server_error"))
            finally:
                await pieces.aclose()

        async def stop_generating() -> None:  # also when the client left before the stream began
            cancelled.set()
            await pieces.aclose()

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache"},
            background=BackgroundTask(stop_generating),
        )

    async def chat(request: Request) -> Response:
        try:
            req = ChatRequest.parse(decode_json(await request.body()))
            messages = [(m.role, m.text()) for m in req.messages]
        except ValueError as exc:  # InvalidRequest, or content that is not text
            return _error(400, str(exc))
        job = Job(messages, "", clamp(req.wanted_tokens()), _sampler(req), req.stop)
        return await respond(job, req.stream, req.include_usage, request, chat=True)

    async def completions(request: Request) -> Response:
        try:
            req = CompletionRequest.parse(decode_json(await request.body()))
        except InvalidRequest as exc:
            return _error(400, str(exc))
        job = Job(None, req.prompt, clamp(req.wanted_tokens()), _sampler(req), req.stop)
        return await respond(job, req.stream, req.include_usage, request, chat=False)

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: http_error, Exception: crashed})


def die_with_parent(parent: int) -> None:
    """Ask the kernel for SIGKILL when the supervisor goes (Linux/Android), then check it has not already."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent and os.getppid() != parent:
        sys.exit(0)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="edgepilot-serve-worker")
    ap.add_argument("--socket", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--model-name", required=True)
    ap.add_argument("--settings", required=True, help="EngineSettings as JSON")
    ap.add_argument("--max-tokens", type=int, required=True)
    ap.add_argument("--cpus", default="", help="pin to these CPUs (comma-separated) before loading")
    ap.add_argument("--prompt-cpus", default="", help="re-pin to these CPUs for prompt processing")
    ap.add_argument("--parent", type=int, default=0)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--no-cache-reuse", action="store_true")
    ap.add_argument("--max-prompt-tokens", type=int, default=0, help="0: the context")
    ap.add_argument("--keep-cache", default="", help="the folder the main lane's cache is kept in")
    ap.add_argument("--short-ctx", type=int, default=0, help="the short lane's context (0: none)")
    ap.add_argument("--max-temp", type=float, default=None, help="the thermal guard's limit in °C")
    ap.add_argument("--watch-root", default="/", help="the device whose thermal zones the guard reads")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    die_with_parent(args.parent)
    from edgepilot.engine import llama_log
    from edgepilot.engine.inprocess import EngineError, LlamaEngine
    from edgepilot.engine.thermal_guard import ThermalGuard, ThermalLimit
    from edgepilot.engine.turns import Turns
    from edgepilot.plan.settings import EngineSettings
    from edgepilot.serve.short_lane import short_settings

    settings = EngineSettings(**json.loads(args.settings))
    on_phase = None
    if args.cpus:
        from edgepilot.tuned.pinning import PhasePinning, pin_process

        cpus = [int(c) for c in args.cpus.split(",")]
        pin_process(cpus)
        if args.prompt_cpus:
            on_phase = PhasePinning((int(c) for c in args.prompt_cpus.split(",")), cpus)
    try:
        engine = LlamaEngine(args.model, settings, verbose=args.verbose)
    except EngineError as exc:
        # The supervisor hands these lines to the doctor: the error and llama.cpp's last words.
        for line in llama_log.lines_since(0)[-60:]:
            sys.stderr.write(line if line.endswith("\n") else line + "\n")
        sys.stderr.write(f"edgepilot-worker: error: {exc}\n")
        return 2
    info = {
        "model": args.model_name,
        "n_ctx": engine.load.n_ctx,
        "n_batch": engine.load.n_batch,
        "n_ubatch": engine.load.n_ubatch,
        "n_threads": settings.n_threads,
        "type_k": settings.type_k,
        "type_v": settings.type_v,
        "flash_attn": settings.flash_attn,
        "load_seconds": round(engine.load.seconds, 3),
        "max_tokens": args.max_tokens,
        "cache_reuse": not args.no_cache_reuse,
        "max_prompt_tokens": args.max_prompt_tokens or engine.load.n_ctx,
    }
    cap = args.max_prompt_tokens or None
    lanes = Lanes(Generator(engine, on_phase, cache_reuse=not args.no_cache_reuse, max_prompt_tokens=cap))
    short_engine = None
    if args.short_ctx:
        try:
            short_engine = engine.sibling(short_settings(settings, args.short_ctx))
        except EngineError as exc:  # the main lane serves alone
            sys.stderr.write(f"edgepilot-worker: note: no short lane: {exc}\n")
        else:
            engine.turns = Turns()
            lanes.short = Generator(short_engine, None, cache_reuse=True, short_turns=engine.turns)
    info["short_ctx"] = short_engine.load.n_ctx if short_engine else 0
    if args.keep_cache:  # a restarted worker takes the conversation's cache back (serve/cache_keeper.py)
        from edgepilot.serve.cache_keeper import MainCache

        lanes.main.keeper = MainCache(Path(args.keep_cache), lanes.main.session)
        said = lanes.main.keeper.restore()
        if said:
            sys.stderr.write(f"{LOG_PREFIX}{said}\n")
    guard = None
    if args.max_temp is not None:  # both lanes' contexts switch; the main lane's is the one reported
        limit = ThermalLimit(args.max_temp, Path(args.watch_root))
        guard = ThermalGuard(limit, lambda note: sys.stderr.write(f"{LOG_PREFIX}{note}\n"))
        for lane in (engine, short_engine):
            if lane is not None:
                guard.attach(lane)
    app = create_app(lanes, args.model_name, args.max_tokens, info, guard.status if guard else None)

    import uvicorn

    config = uvicorn.Config(
        app,
        uds=args.socket,
        log_level="info" if args.verbose else "warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=3,
    )
    server = uvicorn.Server(config)
    # uvicorn re-raises SIGTERM/SIGINT after its graceful shutdown: end with status 0 instead.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    try:
        with guard or contextlib.nullcontext():
            server.run()
    finally:
        lanes.close()
        if short_engine is not None:
            short_engine.close()
        engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
