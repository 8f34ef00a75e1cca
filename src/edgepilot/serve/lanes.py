"""The worker's lanes: the main context, and the short lane beside it (serve/short_lane.py).

The front says which lane a request should take (the X-Edgepilot-Lane header: it knows what is running). A
request sent to the short lane that turns out not to fit it whole goes on in the main lane, as if sent there.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import aclosing

from edgepilot.serve.generation import Generator, Job, NotShort
from edgepilot.serve.protocol import Outcome
from edgepilot.serve.short_lane import LANE_HEADER, SHORT

__all__ = ["LANE_HEADER", "SHORT", "Lanes"]


class Lanes:
    def __init__(self, main: Generator, short: Generator | None = None) -> None:
        self.main, self.short = main, short

    def close(self) -> None:
        if self.short is not None:
            self.short.close()
        self.main.close()

    def stats(self) -> dict[str, object]:
        out = self.main.stats.as_dict()
        if self.short is not None and self.short.short_turns is not None:
            turns = self.short.short_turns
            out["short_lane"] = {
                **self.short.stats.as_dict(),
                "n_ctx": self.short.n_ctx,
                "main_pauses": turns.main_pauses,
            }
        return out

    async def complete(self, job: Job, cancelled: threading.Event, short: bool) -> Outcome:
        if short and self.short is not None:
            try:
                return await self.short.complete(job, cancelled)
            except NotShort:
                pass
        return await self.main.complete(job, cancelled)

    async def stream(self, job: Job, cancelled: threading.Event, short: bool) -> AsyncIterator[str | Outcome]:
        if short and self.short is not None:
            async with aclosing(self.short.stream(job, cancelled)) as pieces:
                try:
                    first = await anext(pieces)
                except NotShort:
                    pass
                else:
                    yield first
                    async for item in pieces:
                        yield item
                    return
        async with aclosing(self.main.stream(job, cancelled)) as pieces:
            async for item in pieces:
                yield item
