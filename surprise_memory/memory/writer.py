"""The episode writer: a bounded queue and one thread that embeds and stores episodes.

The memory node hands each assembled episode to :class:`EpisodeWriter` and returns at once;
the writer's thread runs the slow part (PE-Core over the frames, JPEG files, the commit).
Whatever one episode raises — a store error, a CUDA out-of-memory, a bad image in torch —
is counted and reported for that episode, and the thread goes on with the next: a writer
that died silently would turn every later episode into a "cannot keep up" drop.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["EpisodeWriter"]

T = TypeVar("T")
R = TypeVar("R")


class EpisodeWriter(Generic[T, R]):
    """Runs ``write(item)`` for each queued item in one thread, never dying on an error.

    Args:
        write: The slow work for one item (embed and store an episode); its result goes to
            ``on_done``.
        on_done: Called in the writer thread with each item and its result.
        on_error: Called in the writer thread with each item and the exception it raised.
        capacity: Most items waiting; :meth:`put` refuses more (the caller counts the drop).
        name: Thread name.

    """

    def __init__(
        self,
        write: Callable[[T], R],
        *,
        on_done: Callable[[T, R], None],
        on_error: Callable[[T, BaseException], None],
        capacity: int = 32,
        name: str = "episodes",
    ) -> None:
        self._write = write
        self._on_done = on_done
        self._on_error = on_error
        self._queue: queue.Queue[tuple[T] | None] = queue.Queue(maxsize=capacity)
        self._failed = 0
        self._started: float | None = None  # when the item being written was taken
        self._give_up = threading.Event()  # close() ran out of time: stop after this item
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        """Whether the thread runs (False only after :meth:`close`)."""
        return self._thread.is_alive()

    @property
    def waiting(self) -> int:
        """Items queued and not yet taken."""
        return self._queue.qsize()

    @property
    def busy_seconds(self) -> float:
        """How long the item being written has taken so far (0 when idle)."""
        started = self._started
        return 0.0 if started is None else time.monotonic() - started

    @property
    def failed(self) -> int:
        """Items whose ``write`` raised."""
        return self._failed

    def put(self, item: T) -> bool:
        """Queue an item without blocking; False when the queue is full (nothing queued)."""
        try:
            self._queue.put_nowait((item,))
        except queue.Full:
            return False
        return True

    def close(self, timeout: float) -> int:
        """Write what is queued within ``timeout`` seconds, then stop; always joins the thread.

        Past the deadline the thread stops after the item it is writing (a thread still
        inside a model when the interpreter exits aborts the process, so it is never left
        running); the items left are not written.

        Returns:
            How many queued items were not written (0 when all were).

        """
        deadline = time.monotonic() + timeout
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            self._give_up.set()
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            self._give_up.set()
            self._thread.join()
        return sum(1 for entry in list(self._queue.queue) if entry is not None)

    def _loop(self) -> None:
        while not self._give_up.is_set() and (entry := self._queue.get()) is not None:
            (item,) = entry
            self._started = time.monotonic()
            try:
                self._on_done(item, self._write(item))
            except Exception as exc:  # any error of one item: report it, keep writing
                self._failed += 1
                with contextlib.suppress(Exception):  # a failing report must not stop us
                    self._on_error(item, exc)
            finally:
                self._started = None
