"""Live updates: episodes a running memory node adds (or its budget evicts) reach open pages.

Why server-sent events and one watcher: the server looks at the store once per period
(:func:`watch`: ``store.refresh()``, one pragma or two index lookups when nothing
changed), whatever the number of open pages, and pushes the difference to each of them
over one long HTTP response (``text/event-stream``, which browsers reconnect by
themselves). Polling from each page would multiply the store queries by the pages and
delay every episode by half a poll on average; WebSockets would need another server
dependency for a one-way feed.

:class:`ChangeFeed` keeps the episodes last seen and a bounded queue per page; a page
that cannot keep up (its queue full) is told to ``resync`` (fetch the timeline again)
instead of the server holding more for it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from surprise_memory.browser.views import timeline_columns
from surprise_memory.errors import SurpriseMemoryError
from surprise_memory.memory.store.interface import EpisodeStoreBackend
from surprise_memory.memory.store.summary import EpisodeSummary

__all__ = ["KEEPALIVE_SECONDS", "ChangeFeed", "watch"]

KEEPALIVE_SECONDS = 15.0
"""A comment line is sent this often on a quiet stream, so proxies and browsers keep it open."""

_LOG = logging.getLogger(__name__)


def _event(name: str, data: Any) -> str:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'), allow_nan=False)}\n\n"


class ChangeFeed:
    """The episodes the pages were last told of, and a bounded queue of events per page.

    Every method but :meth:`snapshot` runs on the server's event loop.

    Args:
        queue_size: Events held for one page before it is told to resync instead.

    """

    def __init__(self, queue_size: int = 32) -> None:
        self._queue_size = queue_size
        self._known: dict[str, EpisodeSummary] = {}
        self._origin_ns: int | None = None
        self._pages: set[asyncio.Queue[str | None]] = set()
        self._closed = False
        # (version, episodes, origin), replaced whole: read from the server's worker threads
        self._snapshot: tuple[int, Sequence[EpisodeSummary], int | None] = (0, (), None)

    @property
    def pages(self) -> int:
        """Pages listening now."""
        return len(self._pages)

    def snapshot(self) -> tuple[int, Sequence[EpisodeSummary], int | None]:
        """(version, the episodes in the order added, the origin) as last taken.

        The version changes whenever the episodes or the origin do, so what is made of
        them (the timeline's JSON) can be kept until it changes. Safe from any thread.
        """
        return self._snapshot

    def _take(self, summaries: Sequence[EpisodeSummary], origin_ns: int | None) -> None:
        self._known = {s.id: s for s in summaries}
        self._origin_ns = origin_ns
        self._snapshot = (self._snapshot[0] + 1, summaries, origin_ns)

    def reset(self, summaries: Sequence[EpisodeSummary], origin_ns: int | None) -> None:
        """Start from these episodes (no event)."""
        self._take(summaries, origin_ns)

    def update(self, summaries: Sequence[EpisodeSummary], origin_ns: int | None) -> None:
        """Take the store's episodes now; tell every page what was added and removed.

        A new time origin (the first episode of an empty store, an earlier first frame)
        moves every time the pages show, so they are told to resync instead.
        """
        before, origin_before = self._known, self._origin_ns
        self._take(summaries, origin_ns)
        if origin_ns != origin_before:
            self._publish(_event("resync", {"count": len(self._known)}))
            return
        added = [s for s in summaries if s.id not in before]
        removed = [i for i in before if i not in self._known]
        if added or removed:
            data = {
                "added": timeline_columns(added, origin_ns),
                "removed": removed,
                "count": len(self._known),
            }
            self._publish(_event("episodes", data))

    def _publish(self, message: str) -> None:
        for queue in self._pages:
            if queue.full():  # a page that does not read: drop what it missed, resync it
                while not queue.empty():
                    queue.get_nowait()
                queue.put_nowait(_event("resync", {"count": len(self._known)}))
            else:
                queue.put_nowait(message)

    def subscribe(self) -> asyncio.Queue[str | None]:
        """A new page's queue; its first event says how many episodes there are."""
        queue: asyncio.Queue[str | None] = asyncio.Queue(self._queue_size)
        queue.put_nowait(_event("hello", {"count": len(self._known)}))
        if self._closed:
            queue.put_nowait(None)
        self._pages.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[str | None]) -> None:
        """Forget a page (it closed its stream)."""
        self._pages.discard(queue)

    def close(self) -> None:
        """End every page's stream (the server is stopping)."""
        self._closed = True
        for queue in self._pages:
            while not queue.empty():
                queue.get_nowait()
            queue.put_nowait(None)

    async def stream(self, queue: asyncio.Queue[str | None]) -> AsyncIterator[str]:
        """The text of one page's event stream, until the feed closes or the page leaves."""
        try:
            yield "retry: 2000\n\n"  # the browser reconnects after 2 s if the stream drops
            while True:
                try:
                    message = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                except asyncio.TimeoutError:  # the builtin's alias from Python 3.11 on
                    yield ": keep-alive\n\n"
                    continue
                if message is None:
                    return
                yield message
        finally:
            self.unsubscribe(queue)


async def watch(
    store: EpisodeStoreBackend,
    feed: ChangeFeed,
    period_s: float,
    origin: Callable[[], int | None],
) -> None:
    """Look at the store every ``period_s`` and feed its changes to the pages (runs forever).

    The store is read in a worker thread, so the server answers pages meanwhile. A failed
    look (a database that went away) is logged once per distinct message and retried at
    the next period.

    Args:
        store: The open store.
        feed: Where the changes go.
        period_s: Seconds between two looks.
        origin: The store's time origin now (read after each change).

    """
    last_error = ""
    pending = False  # a change seen whose episodes could not be read yet
    while True:
        await asyncio.sleep(period_s)
        try:
            pending = await asyncio.to_thread(store.refresh) or pending
            if not pending:
                continue
            summaries = await asyncio.to_thread(store.summaries)
            zero = await asyncio.to_thread(origin)
        except SurpriseMemoryError as exc:
            if str(exc) != last_error:
                _LOG.warning("live updates: cannot read the store: %s", exc)
                last_error = str(exc)
            continue
        last_error = ""
        pending = False
        feed.update(summaries, zero)
