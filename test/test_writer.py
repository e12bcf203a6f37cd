"""EpisodeWriter: one bad episode never stops the writer (issue 12, item 1)."""

from __future__ import annotations

import threading

import pytest
import torch

from surprise_memory.errors import StoreError
from surprise_memory.memory.writer import EpisodeWriter


def _write(item: int) -> int:
    if item == 2:
        torch.zeros(2, 3) @ torch.zeros(4, 5)  # a real torch RuntimeError (shape mismatch)
    if item == 4:
        raise StoreError("disk full")
    return item * 10


def test_errors_of_one_item_are_reported_and_the_thread_goes_on() -> None:
    done: list[tuple[int, int]] = []
    errors: list[tuple[int, str]] = []
    writer: EpisodeWriter[int, int] = EpisodeWriter(
        _write,
        on_done=lambda i, r: done.append((i, r)),
        on_error=lambda i, e: errors.append((i, type(e).__name__)),
    )
    for i in range(6):
        assert writer.put(i)
    assert writer.close(timeout=10.0) == 0
    assert done == [(0, 0), (1, 10), (3, 30), (5, 50)]
    assert errors == [(2, "RuntimeError"), (4, "StoreError")]
    assert writer.failed == 2 and not writer.alive


def test_a_failing_callback_is_reported_and_stops_nothing() -> None:
    seen: list[int] = []

    def on_done(item: int, result: int) -> None:
        if item == 1:
            raise RuntimeError("publisher gone")
        seen.append(item)

    errors: list[int] = []
    writer: EpisodeWriter[int, int] = EpisodeWriter(
        lambda i: i, on_done=on_done, on_error=lambda i, e: errors.append(i)
    )
    for i in range(3):
        writer.put(i)
    assert writer.close(timeout=10.0) == 0
    assert seen == [0, 2] and errors == [1]


def test_a_full_queue_refuses_without_blocking() -> None:
    gate = threading.Event()
    writer: EpisodeWriter[int, int] = EpisodeWriter(
        lambda i: gate.wait(10.0) and i,
        on_done=lambda i, r: None,
        on_error=lambda i, e: None,
        capacity=2,
    )
    assert writer.put(0)
    deadline = threading.Event()
    while writer.waiting and not deadline.wait(0.01):  # the thread takes item 0 and blocks
        pass
    assert writer.put(1) and writer.put(2)
    assert not writer.put(3)  # full: the caller counts the drop
    gate.set()
    assert writer.close(timeout=10.0) == 0


@pytest.mark.parametrize("capacity", [1, 8])
def test_close_writes_what_is_queued(capacity: int) -> None:
    out: list[int] = []
    writer: EpisodeWriter[int, int] = EpisodeWriter(
        lambda i: i,
        on_done=lambda i, r: out.append(r),
        on_error=lambda i, e: None,
        capacity=capacity,
    )
    for i in range(capacity):
        writer.put(i)
    assert writer.close(timeout=10.0) == 0
    assert out == list(range(capacity))


def test_close_gives_up_after_its_timeout_but_always_joins() -> None:
    gate = threading.Event()
    out: list[int] = []

    def slow(item: int) -> int:
        gate.wait(0.5)  # each item takes 0.5 s
        return item

    writer: EpisodeWriter[int, int] = EpisodeWriter(
        slow, on_done=lambda i, r: out.append(r), on_error=lambda i, e: None, capacity=8
    )
    for i in range(6):
        writer.put(i)
    left = writer.close(timeout=0.8)  # time for about two items
    assert not writer.alive  # joined: never left running inside the work
    assert 1 <= len(out) <= 3 and left == 6 - len(out)
