"""Catch-up batching of live windows: the bounded queue, the frame plan, the batcher, and the
encoder over catch-up batches against the offline path (tiny V-JEPA-2, random weights)."""

from __future__ import annotations

import numpy as np
import pytest

from surprise_memory.config import EncoderConfig
from surprise_memory.errors import ConfigError, InputError
from surprise_memory.perception.catchup import (
    CatchUpBatcher,
    PendingWindow,
    WindowQueue,
    gather_plan,
)
from surprise_memory.perception.encoders import (
    TINY_VIDEO_WEIGHTS,
    LiveWindowEncoder,
    VideoEncoder,
)
from surprise_memory.perception.frames import Frame
from surprise_memory.perception.window import FrameRingBuffer, WindowSampler


def frame(i: int, size: tuple[int, int] = (2, 3)) -> Frame:
    """Frame i: every pixel is i % 256, so a copied frame says which one it is."""
    return Frame(rgb=np.full((*size, 3), i % 256, np.uint8), stamp_ns=1000 * (i + 1))


def pending(end: int, m: int, start: int = 0) -> PendingWindow:
    return PendingWindow(1000 * (end + 1), end, max(end - m + 1, start), max(m - end - 1, 0))


# --------------------------------------------------------------------------- queue


def test_queue_is_fifo_and_drops_the_oldest_when_full() -> None:
    q = WindowQueue(3)
    assert [q.put(pending(i, 4)) for i in range(5)] == [0, 0, 0, 1, 1]
    assert q.dropped == 2 and len(q) == 3
    assert [w.end_index for w in q.take(2, timeout=0.0)] == [2, 3]
    assert [w.end_index for w in q.take(8, timeout=0.0)] == [4]
    assert q.take(8, timeout=0.01) == []
    with pytest.raises(ConfigError, match="capacity=0"):
        WindowQueue(0)


def test_close_wakes_a_waiting_take() -> None:
    q = WindowQueue(2)
    q.close()
    assert q.take(1, timeout=30.0) == []  # returns at once, not after 30 s


# --------------------------------------------------------------------------- frame plan


def test_plan_of_stride_one_windows_copies_m_plus_b_minus_1_frames() -> None:
    m = 4
    windows = [pending(e, m) for e in (10, 11, 12)]
    segments, index = gather_plan(windows, m)
    assert segments == [(7, 12)]  # 4 + 3 - 1 frames, each once
    assert index.tolist() == [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5]]


def test_plan_pads_warm_up_windows_and_keeps_separate_ranges_apart() -> None:
    m = 4
    windows = [pending(0, m), pending(1, m), pending(20, m), pending(30, m)]
    segments, index = gather_plan(windows, m)
    assert segments == [(0, 1), (17, 20), (27, 30)]
    # padding repeats the sequence's first frame (position 0)
    assert index.tolist() == [[0, 0, 0, 0], [0, 0, 0, 1], [2, 3, 4, 5], [6, 7, 8, 9]]


# --------------------------------------------------------------------------- ring copies


@pytest.mark.parametrize(("first", "last"), [(0, 3), (8, 12), (9, 13), (11, 13), (13, 13)])
def test_copy_frames_by_index_across_the_wrap(first: int, last: int) -> None:
    buf = FrameRingBuffer(6, 2, 3, window=3)
    for i in range(14):  # frame i in slot i % 6: frames 9..13 wrap around the end
        buf.push(frame(i))
    out = np.zeros((8, 2, 3, 3), np.uint8)
    ok = buf.copy_frames(first, last, out)
    # frame 8's slot is the next push's (frame 14), which may be under way in the camera
    # thread: only the newest capacity - 1 frames are certain
    assert ok == (first > 14 - 6)
    if ok:
        assert list(out[: last - first + 1, 0, 0, 0]) == list(range(first, last + 1))
    with pytest.raises(InputError, match="were pushed"):
        buf.copy_frames(10, 14, out)


def test_clear_keeps_the_indices_and_the_frames_of_the_old_sequence() -> None:
    buf = FrameRingBuffer(8, 2, 3, window=4)
    for i in range(5):
        buf.push(frame(i))
    buf.clear()
    assert len(buf) == 0 and buf.last_stamp_ns is None and buf.sequence_start == 5
    buf.push(frame(0))  # time went back: a new sequence, index 5
    out = np.zeros((6, 2, 3, 3), np.uint8)
    assert buf.copy_frames(0, 5, out)
    assert list(out[:, 0, 0, 0]) == [0, 1, 2, 3, 4, 0]
    assert list(buf.latest(1)[:, 0, 0, 0]) == [0]


# --------------------------------------------------------------------------- batcher


def config(**kw: object) -> EncoderConfig:
    # warm-up 'pad': a window from the first frame on, so short streams fill the queue
    base: dict[str, object] = {
        "clip_frames": 4,
        "encoder_batch": 3,
        "encoder_queue": 5,
        "clip_warmup": "pad",
    }
    return EncoderConfig(**{**base, **kw})  # type: ignore[arg-type]


def reference_windows(cfg: EncoderConfig, frames: list[Frame]) -> dict[int, list[int]]:
    """What the one-window path encodes: the sampler's windows, by stamp."""
    sampler = WindowSampler.from_config(cfg, (2, 3))
    out = {}
    for f in frames:
        w = sampler.push(f)
        if w is not None:
            out[w.stamp_ns] = list(w.frames[:, 0, 0, 0])
    return out


def drain(batcher: CatchUpBatcher) -> list[tuple[int, list[int], int]]:
    """Every pending window as (stamp, frame ids, batch size), via catch-up batches."""
    got = []
    while (batch := batcher.next_batch(timeout=0.0)) is not None:
        assert batch.valid.all() and batch.stale == 0
        for w, row in zip(batch.windows, batch.index, strict=True):
            got.append((w.stamp_ns, list(batch.frames[row, 0, 0, 0]), len(batch.windows)))
    return got


@pytest.mark.parametrize(
    "settings",
    [{}, {"clip_stride": 2}, {"clip_warmup": "wait"}, {"clip_stride": 5, "encoder_batch": 2}],
)
def test_batches_hold_the_windows_of_the_one_window_path_in_stamp_order(
    settings: dict[str, object],
) -> None:
    cfg = config(**settings)
    frames = [frame(i) for i in range(30)]
    want = reference_windows(cfg, frames)
    batcher = CatchUpBatcher(cfg, (2, 3))
    got: list[tuple[int, list[int], int]] = []
    for i, f in enumerate(frames):
        assert batcher.push(f) == 0
        if i % 4 == 3:  # the worker comes by every 4 frames: backlogs form
            got += drain(batcher)
    got += drain(batcher)
    assert [s for s, _, _ in got] == sorted(want)
    assert {s: ids for s, ids, _ in got} == want
    assert max(b for _, _, b in got) == min(cfg.encoder_batch, 4 // cfg.clip_stride or 1)
    assert batcher.dropped == 0


def test_a_full_queue_drops_the_oldest_windows_counted() -> None:
    cfg = config()
    frames = [frame(i) for i in range(12)]
    want = reference_windows(cfg, frames)
    batcher = CatchUpBatcher(cfg, (2, 3))
    dropped = sum(batcher.push(f) for f in frames)  # the worker never came
    assert dropped == batcher.dropped == 12 - cfg.encoder_queue
    got = drain(batcher)
    assert [s for s, _, _ in got] == sorted(want)[-cfg.encoder_queue :]  # the newest kept
    assert all(want[s] == ids for s, ids, _ in got)


def test_reset_starts_a_new_sequence_and_keeps_the_queued_windows() -> None:
    cfg = config()
    batcher = CatchUpBatcher(cfg, (2, 3))
    for i in range(3):
        batcher.push(frame(i + 10))
    batcher.reset()  # time went back
    batcher.push(frame(0))
    got = drain(batcher)
    assert [ids for _, ids, _ in got] == [[10] * 4, [10, 10, 10, 11], [10, 10, 11, 12], [0] * 4]


def test_each_queued_window_says_how_much_time_its_frames_span() -> None:
    batcher = CatchUpBatcher(config(), (2, 3))  # M = 4, warm-up 'pad'
    ids = [0, 1, 2, 5, 6, 7, 8]  # frames 3 and 4 never came
    spans = []
    for i in ids:
        batcher.push(frame(i))
        assert batcher.last_window is not None
        spans.append(batcher.last_window.span_ns)
    step = frame(1).stamp_ns - frame(0).stamp_ns
    # padded windows span their distinct frames only; a window over the gap spans more
    assert spans == [s * step for s in (0, 1, 2, 5, 5, 5, 3)]
    stride = CatchUpBatcher(config(clip_stride=2), (2, 3))
    stride.push(frame(0))
    stride.push(frame(1))
    assert stride.last_window is None  # that frame made no window


def test_windows_overwritten_while_queued_are_dropped_not_encoded() -> None:
    cfg = config()
    batcher = CatchUpBatcher(cfg, (2, 3))
    for i in range(5):
        assert batcher.push(frame(i)) == 0
    # a stalled worker: frames keep arriving into the ring (not queued), overwriting
    for i in range(5, 5 + batcher.sampler.buffer.capacity):
        batcher.sampler.push(frame(i))
    batch = batcher.next_batch(timeout=0.0)
    assert batch is not None and batch.windows == [] and batch.stale == 3
    assert batcher.dropped == 3


# --------------------------------------------------------------------------- encoding


@pytest.fixture(scope="module")
def encoder() -> VideoEncoder:
    return VideoEncoder(TINY_VIDEO_WEIGHTS, device="cpu", batch_size=4)


def test_catch_up_batches_encode_like_the_offline_path(encoder: VideoEncoder) -> None:
    """Batched, gathered on the device, against ``encode_stream`` (the offline path)."""
    cfg = EncoderConfig(clip_frames=8, encoder_batch=4, encoder_queue=8)
    rng = np.random.default_rng(0)
    frames = [
        Frame(rng.integers(0, 256, (40, 50, 3), dtype=np.uint8), 10**9 + i * 10**8)
        for i in range(23)
    ]
    offline, stamps = encoder.encode_stream(iter(frames), cfg)
    live = LiveWindowEncoder(encoder)
    live.warm_up(cfg.clip_frames)
    batcher = CatchUpBatcher(cfg, (32, 32), encoder.prepare_frame, live.host_buffer)
    got: dict[int, np.ndarray] = {}
    sizes = []
    for i, f in enumerate(frames):
        batcher.push(f)
        if i % 3 == 2 or i == len(frames) - 1:
            while (batch := batcher.next_batch(timeout=0.0)) is not None:
                distinct = batch.windows[-1].end_index - batch.windows[0].first_index + 1
                assert batch.frames.shape[0] == distinct <= 8 + len(batch.windows) - 1
                z = live.encode(batch.frames, batch.index)
                got.update({w.stamp_ns: v for w, v in zip(batch.windows, z, strict=True)})
                sizes.append(len(batch.windows))
    assert list(got) == list(stamps) and max(sizes) == 3
    # float32 on the CPU: batching changes only the order of reductions
    np.testing.assert_allclose(np.stack(list(got.values())), offline, rtol=1e-5, atol=1e-5)


def test_encode_rejects_bad_input(encoder: VideoEncoder) -> None:
    live = LiveWindowEncoder(encoder)
    frames = np.zeros((5, 32, 32, 3), np.uint8)
    with pytest.raises(InputError, match="index outside"):
        live.encode(frames, np.array([[0, 1, 2, 5]]))
    with pytest.raises(InputError, match="multiple of 2"):
        live.encode(frames, np.array([[0, 1, 2]]))
    with pytest.raises(InputError, match=r"\(N, 32, 32, 3\) uint8"):
        live.encode(np.zeros((5, 30, 32, 3), np.uint8), np.array([[0, 1]]))
