"""Episode assembly: frame history, frame selection, readiness and timeouts."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from surprise_memory.config import ConfigError, EpisodeConfig
from surprise_memory.errors import InputError
from surprise_memory.memory.episodes import (
    CameraClock,
    EpisodeAssembler,
    FrameHistory,
    select_episode_frames,
    trigger_frame_index,
)
from surprise_memory.perception.frames import CompressedFrame, Frame
from surprise_memory.surprise.gate import SurpriseTrigger

S = 1_000_000_000
PIXELS = np.zeros((2, 2, 3), np.uint8)


def _frame(t_s: float) -> Frame:
    return Frame(rgb=PIXELS, stamp_ns=round(t_s * S))


def _trigger(t_s: float) -> SurpriseTrigger:
    return SurpriseTrigger(stamp_ns=round(t_s * S), score=5.0, threshold=1.0, decided_ns=0)


def test_history_keeps_the_last_seconds_and_at_most_max_frames() -> None:
    h = FrameHistory(seconds=1.0, max_frames=100)
    for i in range(30):
        h.add(_frame(i * 0.1))
    assert [f.stamp_ns for f in h.between(0, 10 * S)] == [round(i * 0.1 * S) for i in range(19, 30)]
    h = FrameHistory(seconds=100.0, max_frames=5)
    for i in range(30):
        h.add(_frame(i * 0.1))
    assert len(h) == 5
    with pytest.raises(InputError, match="not after"):
        h.add(_frame(0.0))


@pytest.mark.parametrize(
    ("n_candidates", "count", "trigger_index"),
    [(41, 8, 20), (41, 8, 0), (41, 8, 40), (5, 8, 2), (100, 1, 37), (9, 8, 4)],
)
def test_selection_spreads_frames_and_keeps_the_trigger(
    n_candidates: int, count: int, trigger_index: int
) -> None:
    frames = [_frame(i * 0.1) for i in range(n_candidates)]
    chosen = select_episode_frames(frames, frames[trigger_index].stamp_ns, count)
    assert len(chosen) == min(count, n_candidates)
    stamps = [f.stamp_ns for f in chosen]
    assert stamps == sorted(set(stamps))  # distinct, in time order
    assert frames[trigger_index].stamp_ns in stamps
    # the episode's picture, in every view, is that frame
    assert stamps[trigger_frame_index(stamps, frames[trigger_index].stamp_ns)] == (
        frames[trigger_index].stamp_ns
    )
    if count > 1 and n_candidates > count:
        assert stamps[0] <= frames[trigger_index].stamp_ns <= stamps[-1]
        gaps = np.diff(stamps)
        assert gaps.max() <= 3 * (frames[-1].stamp_ns - frames[0].stamp_ns) / (count - 1)


def test_episode_is_built_once_the_frames_after_the_trigger_arrived() -> None:
    asm = EpisodeAssembler(EpisodeConfig(episode_before_seconds=1.0, episode_after_seconds=1.0))
    for i in range(60):  # 6 s at 10 Hz
        assert asm.add_frame(_frame(i * 0.1)) == []
    assert asm.add_trigger(_trigger(5.5)) == []  # frames up to 6.5 s are still to come
    assert asm.pending == 1
    done = []
    for i in range(60, 70):
        done += asm.add_frame(_frame(i * 0.1))
        if not done:
            assert i * 0.1 < 6.5 - 1e-9
    (episode,) = done
    stamps = [f.stamp_ns for f in episode.frames]
    assert len(stamps) == 8 and round(5.5 * S) in stamps
    assert stamps[0] >= round(4.5 * S) and stamps[-1] <= round(6.5 * S)
    assert asm.pending == 0


def test_a_trigger_whose_window_has_passed_is_built_at_once() -> None:
    asm = EpisodeAssembler(EpisodeConfig(episode_before_seconds=1.0, episode_after_seconds=1.0))
    for i in range(50):
        asm.add_frame(_frame(i * 0.1))
    (episode,) = asm.add_trigger(_trigger(2.0))
    assert len(episode.frames) == 8


def test_stopped_camera_times_out_and_flush_builds_the_rest() -> None:
    cfg = EpisodeConfig(episode_after_seconds=2.0, episode_timeout_seconds=3.0)
    asm = EpisodeAssembler(cfg)
    for i in range(11):
        asm.add_frame(_frame(i * 0.1))
    asm.add_trigger(_trigger(0.9))
    assert asm.take_ready(now_ns=round(5.8 * S)) == []
    (episode,) = asm.take_ready(now_ns=round(5.9 * S))
    assert 0 < len(episode.frames) <= 8
    asm.add_trigger(_trigger(1.0))
    assert len(asm.flush()) == 1 and asm.pending == 0


def test_trigger_older_than_the_history_gives_no_episode() -> None:
    asm = EpisodeAssembler(EpisodeConfig(frame_history_seconds=4.0))
    for i in range(100):
        asm.add_frame(_frame(i * 0.1))
    assert asm.add_trigger(_trigger(1.0)) == []  # its frames have left the history
    assert asm.pending == 0


def test_history_must_cover_the_episode_window() -> None:
    with pytest.raises(ConfigError, match="frame_history_seconds"):
        EpisodeConfig(
            episode_before_seconds=5.0, episode_after_seconds=6.0, frame_history_seconds=10
        )


def _jpeg(t_s: float, size: tuple[int, int] = (48, 64)) -> CompressedFrame:
    ok, buf = cv2.imencode(".jpg", np.full((*size, 3), 128, np.uint8))
    assert ok
    return CompressedFrame(buf.tobytes(), round(t_s * S), "cam", "jpeg")


def test_history_downscales_raw_frames_and_keeps_a_byte_budget() -> None:
    # 1080p at 30 Hz for 10 s would be 1.9 GB of RGB held (issue 12, item 6)
    big = np.zeros((1080, 1920, 3), np.uint8)
    cfg = EpisodeConfig()
    h = FrameHistory(
        cfg.frame_history_seconds,
        cfg.frame_history_max,
        max_bytes=cfg.frame_history_bytes,
        max_side=cfg.frame_history_max_side,
    )
    for i in range(300):
        h.add(Frame(rgb=big, stamp_ns=round(i / 30 * S)))
    assert len(h) == 300  # all ten seconds are still held...
    (held,) = h.between(0, 1)
    assert isinstance(held, Frame) and held.rgb.shape == (360, 640, 3)
    assert h.nbytes == 300 * 360 * 640 * 3 <= cfg.frame_history_bytes  # ...in 207 MB
    small = FrameHistory(100.0, 10_000, max_bytes=10 * 360 * 640 * 3, max_side=640)
    for i in range(50):
        small.add(Frame(rgb=big, stamp_ns=i))
    assert len(small) == 10 and small.nbytes <= 10 * 360 * 640 * 3


def test_compressed_frames_are_held_as_bytes_and_decoded_only_when_chosen() -> None:
    asm = EpisodeAssembler(EpisodeConfig(episode_before_seconds=1.0, episode_after_seconds=1.0))
    good = _jpeg(0.0)
    for i in range(40):
        asm.add_frame(_jpeg(i * 0.1))
    assert asm.history.nbytes == 40 * len(good.data)  # bytes, not decoded pixels
    (episode,) = asm.add_trigger(_trigger(2.0))
    assert len(episode.frames) == 8
    assert all(isinstance(f, Frame) and f.rgb.shape == (48, 64, 3) for f in episode.frames)
    assert round(2.0 * S) in [f.stamp_ns for f in episode.frames]
    with pytest.raises(InputError, match="neither JPEG nor PNG"):
        CompressedFrame(b"not an image", 0)


def test_a_trigger_whose_frames_are_gone_is_reported_lost() -> None:
    # issue 12, item 3: such a trigger used to vanish uncounted
    asm = EpisodeAssembler(EpisodeConfig(frame_history_seconds=4.0))
    for i in range(100):
        asm.add_frame(_frame(i * 0.1))
    assert asm.add_trigger(_trigger(1.0)) == []
    assert [t.stamp_ns for t in asm.take_lost()] == [round(1.0 * S)]
    assert asm.take_lost() == []
    asm.add_trigger(_trigger(9.95))  # pending, then dropped by a reset
    asm.reset()
    assert [t.stamp_ns for t in asm.take_lost()] == [round(9.95 * S)]


def test_camera_clock_runs_on_the_camera_time_base() -> None:
    # issue 12, item 4: a camera stamping from its boot (stamps near zero) while the node's
    # clock reads 2026; the timeout must be judged in the camera's time, not the node's
    clock = CameraClock()
    assert clock.now(123) is None
    clock.observe(stamp_ns=5 * S, received_ns=1_000 * S)
    assert clock.now(1_000 * S) == 5 * S
    assert clock.now(1_002 * S + 5) == 7 * S + 5
    assert clock.now(999 * S) == 5 * S  # never before the newest frame
    asm = EpisodeAssembler(EpisodeConfig(episode_after_seconds=2.0, episode_timeout_seconds=3.0))
    for i in range(11):
        asm.add_frame(_frame(i * 0.1))
    asm.add_trigger(_trigger(0.9))
    clock.observe(stamp_ns=round(1.0 * S), received_ns=0)
    assert asm.take_ready(now_ns=clock.now(round(4.8 * S))) == []  # camera time 5.8 s
    (episode,) = asm.take_ready(now_ns=clock.now(round(4.9 * S)))  # camera time 5.9 s
    assert episode.frames
