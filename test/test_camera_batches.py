"""One encoder for several cameras (issue 42): each camera's windows, one batch for all.

The batcher keeps a ring buffer, a window schedule and a bounded queue per camera, takes
the cameras' pending windows in turn into one catch-up batch and copies each camera's
frames once; the tiny V-JEPA-2 (random weights) encodes such a batch as it encodes each
camera's windows alone.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_catchup import config, encoder, frame, reference_windows  # noqa: F401

from surprise_memory.config import EncoderConfig
from surprise_memory.errors import ConfigError, InputError
from surprise_memory.perception.camera_batches import CameraBatcher
from surprise_memory.perception.catchup import CatchUpBatcher
from surprise_memory.perception.encoders import LiveWindowEncoder, VideoEncoder
from surprise_memory.perception.frames import Frame

CAMERAS = ("front", "left", "rear")
BASE = {"front": 0, "left": 100, "rear": 200}  # pixel value = base + frame number


def drain(batcher: CameraBatcher) -> list[tuple[str, int, list[int], int]]:
    """Every pending window as (camera, stamp, pixel ids, batch size)."""
    got = []
    while (batch := batcher.next_batch(timeout=0.0)) is not None:
        assert batch.valid.all() and batch.stale == 0
        for w, row in zip(batch.windows, batch.index, strict=True):
            ids = [int(v) for v in batch.frames[row, 0, 0, 0]]
            got.append((w.camera, w.stamp_ns, ids, len(batch.windows)))
    return got


def test_each_camera_keeps_its_own_windows_and_one_batch_holds_several_cameras() -> None:
    cfg = config(encoder_batch=6, encoder_queue=8)
    batcher = CameraBatcher(cfg, CAMERAS, (2, 3))
    want = {}
    for name in CAMERAS:
        frames = [Frame(frame(BASE[name] + i).rgb, 1000 * (i + 1)) for i in range(7)]
        want[name] = reference_windows(cfg, frames)
    got = []
    for i in range(7):
        for name in CAMERAS:
            f = frame(BASE[name] + i)  # the cameras share their stamps (i + 1 us)
            assert batcher.push(name, Frame(f.rgb, 1000 * (i + 1)), f"{name}_optical") == 0
            assert batcher.last_window is not None and batcher.last_window.camera == name
        if i % 3 == 2:
            got += drain(batcher)
    got += drain(batcher)
    for name in CAMERAS:
        mine = [(s, ids) for c, s, ids, _ in got if c == name]
        assert [s for s, _ in mine] == sorted(want[name])  # its stamp order kept
        assert dict(mine) == want[name]  # its own frames, never another camera's
    assert max(size for *_, size in got) == 6  # two windows of each camera in one forward
    assert batcher.dropped == 0


def test_cameras_take_turns_so_a_busy_camera_cannot_starve_a_quiet_one() -> None:
    batcher = CameraBatcher(config(encoder_batch=3, encoder_queue=16), ("busy", "quiet"), (2, 3))
    for i in range(12):
        batcher.push("busy", frame(i))
    batcher.push("quiet", frame(50))
    batch = batcher.next_batch(timeout=0.0)
    assert batch is not None
    assert sorted(w.camera for w in batch.windows) == ["busy", "busy", "quiet"]


def test_a_silent_camera_never_stalls_the_others_and_each_drops_its_own() -> None:
    cfg = config(encoder_queue=3)
    batcher = CameraBatcher(cfg, CAMERAS, (2, 3))
    for i in range(2):
        batcher.push("front", frame(i))  # then front stops publishing
    dropped = sum(batcher.push("left", frame(100 + i)) for i in range(6))
    assert dropped == 3 == batcher.camera("left").dropped == batcher.dropped
    got = drain(batcher)
    assert [c for c, *_ in got].count("front") == 2 and [c for c, *_ in got].count("left") == 3
    for i in range(2, 4):  # time goes on for the others, with nothing from rear ever
        batcher.push("left", frame(100 + 6 + i))
    assert {c for c, *_ in drain(batcher)} == {"left"}
    assert batcher.next_batch(timeout=0.01) is None  # nothing waiting: no batch


def test_one_camera_batches_as_the_one_camera_batcher() -> None:
    cfg = config()
    one, alone = CameraBatcher(cfg, ("",), (2, 3)), CatchUpBatcher(cfg, (2, 3))
    for i in range(10):
        assert one.push("", frame(i)) == alone.push(frame(i))
        if i % 4 == 3:
            a, b = one.next_batch(timeout=0.0), alone.next_batch(timeout=0.0)
            assert a is not None and b is not None
            assert a.windows == b.windows and (a.index == b.index).all()
            assert (a.frames == b.frames).all()


def test_unknown_or_repeated_cameras_are_refused() -> None:
    with pytest.raises(ConfigError, match="each named once"):
        CameraBatcher(config(), ("a", "a"), (2, 3))
    with pytest.raises(ConfigError, match="one or more"):
        CameraBatcher(config(), (), (2, 3))
    batcher = CameraBatcher(config(), ("a", "b"), (2, 3))
    with pytest.raises(InputError, match="camera 'c' is not one of the encoder's cameras: a, b"):
        batcher.push("c", frame(0))


def test_a_batch_of_three_cameras_encodes_like_each_camera_alone(encoder: VideoEncoder) -> None:  # noqa: F811
    cfg = EncoderConfig(clip_frames=8, encoder_batch=6, encoder_queue=8)
    rng = np.random.default_rng(0)
    streams = {
        name: [
            Frame(rng.integers(0, 256, (40, 50, 3), dtype=np.uint8), 10**9 + i * 10**8)
            for i in range(12)
        ]
        for name in CAMERAS
    }
    want = {name: encoder.encode_stream(iter(frames), cfg) for name, frames in streams.items()}
    live = LiveWindowEncoder(encoder)
    batcher = CameraBatcher(cfg, CAMERAS, (32, 32), encoder.prepare_frame, live.host_buffer)
    got: dict[str, dict[int, np.ndarray]] = {name: {} for name in CAMERAS}
    mixed = 0
    for i in range(12):
        for name in CAMERAS:
            batcher.push(name, streams[name][i])
        while i % 2 and (batch := batcher.next_batch(timeout=0.0)) is not None:
            z = live.encode(batch.frames, batch.index)
            mixed = max(mixed, len({w.camera for w in batch.windows}))
            for w, v in zip(batch.windows, z, strict=True):
                got[w.camera][w.stamp_ns] = v
    assert mixed == 3  # one forward for windows of the three cameras
    for name, (offline, stamps) in want.items():
        assert list(got[name]) == list(stamps)
        np.testing.assert_allclose(
            np.stack(list(got[name].values())), offline, rtol=1e-5, atol=1e-5
        )
