"""The front: the only thing on the network. A small ASGI app (on uvicorn) in the supervisor process.

It checks the API key (constant-time), the Host header (DNS rebinding), the content type and body size,
then the body itself and its cost caps (serve/admission.py, the same for both workers); turns requests away
with 503 + Retry-After under memory pressure, while the worker is (re)starting, or when the queue is full;
runs one generation at a time (FIFO) and relays it from the worker's private socket.
If the worker dies mid-request the client gets a 503 (or, once a stream has begun, an error event): never a
hang, never silence. Plain ASGI rather than a framework, so a finally always releases the queue slot.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from edgepilot.device.process import rss_bytes
from edgepilot.serve import proxy, status_page
from edgepilot.serve.admission import CHAT_PATH, Admitted, Caps, admit_request, derived_max_chars
from edgepilot.serve.config import ServeConfig, is_loopback
from edgepilot.serve.incoming import ClientGone, Receive, TooLarge, loopback_host_header, read_body
from edgepilot.serve.native_fit import ConversationTooLong, TokenCountFailed, fit_chat
from edgepilot.serve.request_body import InvalidRequest
from edgepilot.serve.request_log import Exchange, StreamTokens, logged, request_line
from edgepilot.serve.short_lane import LANE_HEADER, SHORT, pinned_to_slot, short_enough
from edgepilot.serve.slot_keeper import KeptSlot
from edgepilot.serve.state import FAILED, STARTING, STOPPING, ServerState
from edgepilot.serve.wire import NOTE_HEADER, error_body, note_header, sse, with_notes, worker_error

Send = Callable[[dict[str, Any]], Awaitable[None]]

GENERATE = ("/v1/chat/completions", "/v1/completions")
COMMON_HEADERS = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]
ASSETS = {
    "/": ("text/html; charset=utf-8", status_page.HTML),
    "/status.css": ("text/css; charset=utf-8", status_page.CSS),
    "/status.js": ("text/javascript; charset=utf-8", status_page.JS),
}
STATS_TTL = 1.0


class Front:
    def __init__(
        self,
        config: ServeConfig,
        state: ServerState,
        socket_path: str,
        log: Callable[[str], None],
        predicted_peak_bytes: int | None = None,
        n_ctx: int = 4096,  # the planned context, from which the character cap is derived
        short_ctx: int = 0,  # the worker's short lane (serve/short_lane.py); 0: none
        native: bool = False,  # the worker is llama-server (serve/native.py)
    ) -> None:
        self.config, self.state, self.socket_path, self.log = config, state, socket_path, log
        self.caps = Caps(
            max_messages=config.max_messages,
            max_chars=config.max_prompt_chars or derived_max_chars(n_ctx),
            max_tokens=config.max_tokens,
        )
        self.key = config.api_key.encode("utf-8") if config.api_key else None
        self.predicted_peak_bytes = predicted_peak_bytes
        # On loopback the Host header must name this machine (DNS rebinding); on a network address the key
        # guards, and clients reach the phone by whatever name or address the network gives it.
        self.check_host = is_loopback(config.host)
        self.slot = asyncio.Lock()  # the engine: one generation at a time, first come first served
        # A short request that finds the main lane busy takes the short lane (one at a time), not the queue.
        self.short_ctx = short_ctx
        self.native, self.n_ctx = native, n_ctx
        self.pin_slots = native and short_ctx > 0  # each lane pinned to a slot of its own
        self.kept_slot: KeptSlot | None = None
        self.short_slot = asyncio.Lock()
        self._stats: tuple[float, dict[str, Any] | None] = (0.0, None)

    # -- ASGI ------------------------------------------------------------------------------------------
    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        t0 = time.perf_counter()
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        seen = Exchange()
        method, path = scope["method"], scope["path"]
        status = await self.route(method, path, headers, receive, send, seen)
        self.state.note_drafts(seen.drafts, seen.tokens if not seen.approximate else None)
        if logged(path, self.config.verbose, self.config.quiet):
            self.log(request_line(method, path, status, time.perf_counter() - t0, seen))

    async def route(
        self,
        method: str,
        path: str,
        headers: dict[bytes, bytes],
        receive: Receive,
        send: Send,
        seen: Exchange | None = None,
    ) -> int:
        host = headers.get(b"host", b"").decode("latin-1")
        if self.check_host and host and not loopback_host_header(host, self.config.host):
            return await self.error(send, 403, f"Host '{host}' is not this server (DNS rebinding protection)")
        if path in ASSETS and method in ("GET", "HEAD"):
            ctype, text = ASSETS[path]
            extra = [(b"content-security-policy", status_page.CSP.encode())]
            return await self.reply(send, 200, text.encode(), ctype.encode(), extra)
        if path == "/favicon.ico":
            return await self.reply(send, 204, b"", b"image/x-icon")
        if path == "/health":
            return await self.health(send)
        if (path == "/status.json" or path.startswith("/v1/")) and not self.authorized(headers):
            self.state.counts["unauthorized"] += 1
            return await self.error(
                send,
                401,
                "missing or wrong API key: send 'Authorization: Bearer <key>'",
                code="invalid_api_key",
                extra=[(b"www-authenticate", b"Bearer")],
            )
        if path == "/status.json":
            return await self.reply_json(send, 200, await self.status())
        if path == "/v1/models" and method == "GET":
            return await self.reply_json(send, 200, self.models())
        if path in GENERATE:
            if method != "POST":
                return await self.error(send, 405, f"use POST for {path}", extra=[(b"allow", b"POST")])
            status = await self.generate(path, headers, receive, send, seen or Exchange())
            self.count(status)
            return status
        return await self.error(send, 404, f"no such endpoint: {method} {path}", code="not_found")

    def count(self, status: int) -> None:
        if status != 503:  # turned-away requests are counted by reason where they are refused
            kind = "ok" if status < 400 else "client_errors" if status < 500 else "server_errors"
            self.state.counts[kind] += 1

    # -- checks ----------------------------------------------------------------------------------------
    def authorized(self, headers: dict[bytes, bytes]) -> bool:
        if self.key is None:
            return True
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        # compare_digest: the time taken does not depend on how much of the key was right
        good = hmac.compare_digest(token.strip(), self.key)
        return good and scheme.lower() == b"bearer"

    def unavailable(self) -> str | None:
        """Why a new request cannot be taken now (None: it can)."""
        s = self.state
        if s.phase == FAILED:
            return f"the model server failed: {s.failure}"
        if s.phase == STOPPING:
            return "the server is shutting down"
        if s.phase == STARTING:
            return "the model is loading"
        if not s.ready:
            last = s.deaths[-1] if s.deaths else None
            return "the model server is restarting" + (f" after {last.seen or last.cause}" if last else "")
        if s.pressure.gated:
            return f"not taking new requests under {s.pressure.reason or 'memory pressure'}"
        return None

    # -- generation ------------------------------------------------------------------------------------
    async def generate(
        self, path: str, headers: dict[bytes, bytes], receive: Receive, send: Send, seen: Exchange
    ) -> int:
        ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if ctype != b"application/json":
            return await self.error(send, 415, "send the request as JSON (Content-Type: application/json)")
        try:
            body = await read_body(headers, receive, self.config.max_body_bytes)
        except TooLarge:
            limit = self.config.max_body_bytes
            return await self.error(send, 413, f"request body over the limit of {limit} bytes (--max-body)")
        except ClientGone:
            return 499
        try:  # before it may queue: a malformed or over-cap body never waits for the engine
            admitted = admit_request(path, body, self.caps)
        except InvalidRequest as exc:
            return await self.error(send, 400, str(exc), code=exc.code)
        s = self.state
        why = self.unavailable()
        if why is not None:
            s.counts["pressure" if s.ready else "restarting"] += 1
            return await self.busy(send, why, code="server_restarting" if not s.ready else "memory_pressure")
        lanes = 2 if self.short_ctx else 1
        if s.in_flight + s.waiting >= lanes + self.config.max_queue:
            s.counts["busy"] += 1
            ahead = s.in_flight + s.waiting
            message = f"the server is busy: {ahead} requests ahead (--max-queue {self.config.max_queue})"
            return await self.busy(send, message, code="queue_full")
        slot = self.short_slot if self.takes_short_lane(admitted) else self.slot
        s.waiting += 1
        try:
            await slot.acquire()
        finally:
            s.waiting -= 1
        s.in_flight += 1
        try:
            if not s.ready:  # the worker died while this request waited its turn
                s.counts["restarting"] += 1
                return await self.busy(send, self.unavailable() or "the model server is restarting")
            short = slot is self.short_slot
            lane = [(LANE_HEADER, SHORT)] if short else []
            try:
                body, notes = await self.fitted(path, admitted, short)
            except ConversationTooLong as exc:
                return await self.error(send, 400, str(exc), code="context_length_exceeded")
            body = pinned_to_slot(body, short) if self.pin_slots else body
            kept = None if short else self.kept_slot  # llama-server's main slot on disk (slot_keeper.py)
            if kept is not None:
                await kept.before(s.worker)
            status = await self.relay(path, body, receive, send, notes, lane, seen)
            if kept is not None and status == 200:
                kept.after(s.worker)
            return status
        finally:
            s.in_flight -= 1
            slot.release()

    async def fitted(self, path: str, admitted: Admitted, short: bool) -> tuple[bytes, list[str]]:
        """A chat for llama-server within its context (serve/native_fit.py); edgepilot's worker fits its
        own."""
        if not self.native or short or path != CHAT_PATH:
            return admitted.body, admitted.notes
        a, worker = admitted, self.state.worker
        n_ctx = worker.n_ctx if worker is not None else self.n_ctx  # smaller after a restart on a memory kill
        try:
            got = await asyncio.to_thread(fit_chat, self.socket_path, a.body, a.chars, a.n_messages, n_ctx)
        except TokenCountFailed:  # llama-server says what it says about the request as it came
            return admitted.body, admitted.notes
        return got.body, [*got.notes, *admitted.notes]

    def takes_short_lane(self, admitted: Admitted) -> bool:
        """The main lane is taken (or waited for) and the request surely fits the short lane whole."""
        if not self.short_ctx or not (self.slot.locked() or self.state.waiting):
            return False
        a = admitted
        return short_enough(a.chars, a.n_messages, a.max_tokens, self.short_ctx)

    async def relay(
        self,
        path: str,
        body: bytes,
        receive: Receive,
        send: Send,
        notes: list[str],
        lane: list[tuple[str, str]] | None = None,
        seen: Exchange | None = None,
    ) -> int:
        timeout = self.config.request_timeout
        seen = seen or Exchange()
        gone = asyncio.Event()
        upstream: proxy.Upstream | None = None

        async def watch_client() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()
            if upstream is not None:
                upstream.abort()  # the worker sees the connection drop and stops generating

        watcher = asyncio.create_task(watch_client())
        try:
            try:
                upstream = await proxy.connect(self.socket_path)
                if gone.is_set():
                    return 499
                head = [("content-type", "application/json"), *(lane or [])]
                await upstream.start("POST", path, head, body, timeout)
                streaming = (upstream.header(b"content-type") or b"").startswith(b"text/event-stream")
                payload = b"" if streaming else await upstream.read_all(timeout)
            except (proxy.WorkerGone, asyncio.TimeoutError) as exc:
                if gone.is_set():
                    return 499
                if isinstance(exc, asyncio.TimeoutError):
                    return await self.error(send, 504, f"no answer from the model within {timeout:.0f} s")
                self.state.counts["restarting"] += 1
                message = "the model server stopped before answering (it is restarting); retry"
                return await self.busy(send, message)
            ctype = upstream.header(b"content-type") or b"application/json"
            said = note_header(upstream.header(NOTE_HEADER), notes)  # the worker's (a trimmed chat) and ours
            if not streaming:
                if upstream.status >= 400:
                    payload, ctype = worker_error(upstream.status, payload), b"application/json"
                else:
                    payload = with_notes(payload, notes)
                    seen.reply(payload)
                return await self.reply(send, upstream.status, payload, ctype, said)
            head = [(b"content-type", ctype), (b"cache-control", b"no-cache"), *COMMON_HEADERS, *said]
            await send({"type": "http.response.start", "status": upstream.status, "headers": head})
            tokens = StreamTokens(seen)
            try:
                async for chunk in upstream.body(timeout):
                    tokens.feed(chunk)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except (proxy.WorkerGone, asyncio.TimeoutError) as exc:
                if not gone.is_set():  # headers are out: the error goes in the stream, then it ends
                    if isinstance(exc, asyncio.TimeoutError):
                        message, code = f"no output from the model for {timeout:.0f} s", "timeout"
                    else:
                        message, code = (
                            "the model server stopped mid-reply (it is restarting); retry",
                            "server_restarting",
                        )
                        self.state.counts["restarting"] += 1
                    event = error_body(message, "server_error", code)
                    await send({"type": "http.response.body", "body": sse(event), "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return upstream.status
        finally:
            watcher.cancel()
            if upstream is not None:
                await upstream.close()

    # -- read-only endpoints ---------------------------------------------------------------------------
    def models(self) -> dict[str, Any]:
        entry = {"id": self.state.model_name, "object": "model", "created": int(self.state.started)}
        return {"object": "list", "data": [{**entry, "owned_by": "edgepilot"}]}

    async def health(self, send: Send) -> int:
        s = self.state
        why = self.unavailable()
        body = {"status": "ok" if why is None else s.phase, "model": s.model_name}
        background = s.background_status()  # a class Android kills first, and what to do, when it is one
        if background is not None:
            body["background"] = {k: background[k] for k in ("class", "oom_score_adj", "warning")}
        if why is None:
            return await self.reply_json(send, 200, body)
        body["reason"] = why
        return await self.reply_json(send, 503, body, [(b"retry-after", str(s.retry_after).encode())])

    async def worker_stats(self) -> dict[str, Any] | None:
        at, cached = self._stats
        if time.monotonic() - at < STATS_TTL:
            return cached
        info = await proxy.get_json(self.socket_path, "/health", timeout=1.0) if self.state.ready else None
        if info is not None or not self.state.ready:
            self._stats = (time.monotonic(), info or cached)
        return info or cached

    async def status(self) -> dict[str, Any]:
        snap = self.state.snapshot()
        info = await self.worker_stats()
        pid = self.state.worker_pid()
        rss, hwm = rss_bytes(pid) if pid is not None else (None, None)
        snap.update(
            engine=(info or {}).get("stats"),
            # --max-temp: the worker's guard (threads read back from llama.cpp), or llama-server's watch
            thermal=(info or {}).get("thermal") or (self.state.thermal() if self.state.thermal else None),
            max_queue=self.config.max_queue,
            max_tokens=self.config.max_tokens,
            max_messages=self.caps.max_messages,
            max_prompt_chars=self.caps.max_chars,
            worker_rss_bytes=rss,
            worker_peak_rss_bytes=hwm,
            predicted_peak_bytes=self.predicted_peak_bytes,
            short_lane_ctx=self.short_ctx,
            api_key_required=self.key is not None,
        )
        return snap

    # -- replies ---------------------------------------------------------------------------------------
    async def reply(
        self,
        send: Send,
        status: int,
        body: bytes,
        ctype: bytes,
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> int:
        headers = [(b"content-type", ctype), (b"content-length", str(len(body)).encode())]
        headers += [(b"cache-control", b"no-store"), *COMMON_HEADERS, *(extra or [])]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return status

    async def reply_json(
        self, send: Send, status: int, obj: Any, extra: list[tuple[bytes, bytes]] | None = None
    ) -> int:
        return await self.reply(send, status, json.dumps(obj).encode(), b"application/json", extra)

    async def error(
        self,
        send: Send,
        status: int,
        message: str,
        code: str | None = None,
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> int:
        kind = "invalid_request_error" if status < 500 else "server_error"
        return await self.reply_json(send, status, error_body(message, kind, code), extra)

    async def busy(self, send: Send, message: str, code: str = "server_busy") -> int:
        retry = str(self.state.retry_after).encode()
        return await self.error(send, 503, message, code=code, extra=[(b"retry-after", retry)])
