"""Offline sources: real bags (rosbag2 sqlite3/mcap, ROS 1) and real video files."""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image as PILImage
from rosbags.rosbag1 import Writer as Writer1
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Writer2
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from surprise_memory.errors import ConfigError, InputError
from surprise_memory.memory.pose import Pose
from surprise_memory.offline.synthetic import (
    SyntheticScene,
    synthetic_frames,
    synthetic_odometry,
    write_synthetic_bag,
    write_synthetic_video,
    write_video,
)
from surprise_memory.perception.frames import Frame
from surprise_memory.sources import (
    BagSource,
    ChainedPoseLookup,
    FrameSource,
    SampledPoseLookup,
    VideoSource,
    open_source,
)
from surprise_memory.sources.pose_lookup import yaw_of

NS = 1_000_000_000
SCENE = SyntheticScene(seed=3, duration_s=3.0, fps=10.0, width=32, height=24, odom_rate_hz=20.0)
STORAGES = ["sqlite3", "mcap", "ros1"]


@pytest.fixture(scope="module")
def bags(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bags")
    out = {}
    for storage in STORAGES:
        path = root / ("rec.bag" if storage == "ros1" else f"rec_{storage}")
        out[storage] = write_synthetic_bag(path, SCENE, storage=storage, tf=True).path
    return out


# --- a small bag writer for hand-made messages ------------------------------------------


class BagBuilder:
    """Writes hand-made messages into a real bag (rosbag2 or ROS 1)."""

    def __init__(self, path: Path, storage: str = "sqlite3") -> None:
        self.ros1 = storage == "ros1"
        self.ts = get_typestore(Stores.ROS1_NOETIC if self.ros1 else Stores.ROS2_KILTED)
        if self.ros1:
            tf = "geometry_msgs/TransformStamped[] transforms"
            self.ts.register(get_types_from_msg(tf, "tf2_msgs/msg/TFMessage"))
        self.t = self.ts.types
        if self.ros1:
            self.writer: Any = Writer1(path)
        else:
            plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
            self.writer = Writer2(path, version=8, storage_plugin=plugin)
        self.conns: dict[str, Any] = {}
        self.path = path

    def __enter__(self) -> BagBuilder:
        self.writer.open()
        return self

    def __exit__(self, *args: object) -> None:
        self.writer.close()

    def header(self, stamp_ns: int, frame: str = "cam") -> Any:
        stamp = self.t["builtin_interfaces/msg/Time"](sec=stamp_ns // NS, nanosec=stamp_ns % NS)
        if self.ros1:
            return self.t["std_msgs/msg/Header"](seq=0, stamp=stamp, frame_id=frame)
        return self.t["std_msgs/msg/Header"](stamp=stamp, frame_id=frame)

    def write(self, topic: str, log_ns: int, msg: Any) -> None:
        msgtype = msg.__msgtype__
        if topic not in self.conns:
            self.conns[topic] = self.writer.add_connection(topic, msgtype, typestore=self.ts)
        serialize = self.ts.serialize_ros1 if self.ros1 else self.ts.serialize_cdr
        self.writer.write(self.conns[topic], log_ns, serialize(msg, msgtype))

    def image(
        self,
        stamp_ns: int,
        rgb: np.ndarray,
        encoding: str = "rgb8",
        *,
        data: np.ndarray | None = None,
        step: int | None = None,
    ) -> Any:
        h, w = rgb.shape[:2]
        if data is None:
            data = rgb.reshape(-1)
        return self.t["sensor_msgs/msg/Image"](
            header=self.header(stamp_ns),
            height=h,
            width=w,
            encoding=encoding,
            is_bigendian=0,
            step=w * 3 if step is None else step,
            data=np.asarray(data, dtype=np.uint8).reshape(-1),
        )

    def compressed(self, stamp_ns: int, payload: bytes, fmt: str = "jpeg") -> Any:
        return self.t["sensor_msgs/msg/CompressedImage"](
            header=self.header(stamp_ns),
            format=fmt,
            data=np.frombuffer(payload, dtype=np.uint8),
        )

    def tf(self, stamp_ns: int, parent: str, child: str, xyz: tuple[float, ...]) -> Any:
        t = self.t
        transform = t["geometry_msgs/msg/TransformStamped"](
            header=self.header(stamp_ns, parent),
            child_frame_id=child,
            transform=t["geometry_msgs/msg/Transform"](
                translation=t["geometry_msgs/msg/Vector3"](*xyz),
                rotation=t["geometry_msgs/msg/Quaternion"](0.0, 0.0, 0.0, 1.0),
            ),
        )
        return t["tf2_msgs/msg/TFMessage"](transforms=[transform])


def pixels(value: int, h: int = 6, w: int = 8) -> np.ndarray:
    rgb = np.zeros((h, w, 3), np.uint8)
    rgb[..., 0] = value
    rgb[..., 1] = np.arange(w, dtype=np.uint8)[None, :]
    rgb[..., 2] = 200
    return rgb


T0 = 1_600_000_000 * NS


# --- frames from bags -------------------------------------------------------------------


@pytest.mark.parametrize("storage", STORAGES)
def test_bag_frames_are_the_recording_with_header_stamps(
    bags: dict[str, Path], storage: str
) -> None:
    source = BagSource(bags[storage])
    assert isinstance(source, FrameSource)
    assert source.image_topic == "/camera/image_raw"  # the only image topic: detected
    assert source.message_type == "sensor_msgs/msg/Image"
    assert source.message_count == SCENE.frame_count
    assert source.estimated_frames == SCENE.frame_count
    frames = list(source)
    expected = list(synthetic_frames(SCENE))
    # header stamps, not the log times (written 5 ms later)
    assert [f.stamp_ns for f in frames] == [f.stamp_ns for f in expected]
    assert all(f.frame_id == "camera" for f in frames)
    for got, want in zip(frames, expected, strict=True):
        assert got.rgb.dtype == np.uint8 and got.rgb.shape == (24, 32, 3)
        np.testing.assert_array_equal(got.rgb, want.rgb)
    assert source.stats.read == source.stats.yielded == SCENE.frame_count
    assert source.stats.bad == source.stats.zero_stamp == source.stats.out_of_order == 0
    # a second pass reads again from the start
    assert len(list(source)) == SCENE.frame_count
    assert "/camera/image_raw" in source.describe()


def test_bag_is_streamed_not_loaded(bags: dict[str, Path]) -> None:
    source = BagSource(bags["sqlite3"], reorder_depth=4)
    it = iter(source)
    first = next(it)
    assert first.stamp_ns == SCENE.start_ns
    assert source.stats.read == 5  # reorder buffer of 4 plus the one released
    del it


@pytest.mark.parametrize(("fps", "count"), [(5.0, 15), (2.0, 6), (3.0, 9), (10.0, 30), (0, 30)])
def test_bag_fps_subsampling(bags: dict[str, Path], fps: float, count: int) -> None:
    source = BagSource(bags["mcap"], fps=fps)
    stamps = [f.stamp_ns for f in source]
    assert len(stamps) == count
    assert source.stats.subsampled == SCENE.frame_count - count
    if fps:
        period = NS / fps
        # one frame per 1/fps slot from the first frame: the mean rate is exact
        slots = [(s - stamps[0]) // round(period) for s in stamps]
        assert slots == sorted(set(slots))
        assert source.estimated_frames is not None
        assert abs(source.estimated_frames - count) <= 1


def test_bad_fps_is_a_config_error(bags: dict[str, Path]) -> None:
    with pytest.raises(ConfigError, match="fps=-1"):
        BagSource(bags["sqlite3"], fps=-1)


def test_several_image_topics_need_a_choice(tmp_path: Path) -> None:
    path = tmp_path / "two"
    jpeg = io.BytesIO()
    PILImage.fromarray(pixels(50)).save(jpeg, format="JPEG", quality=95)
    with BagBuilder(path) as b:
        for i in range(3):
            b.write("/front/image_raw", T0 + i * NS, b.image(T0 + i * NS, pixels(i)))
            b.write("/rear/compressed", T0 + i * NS, b.compressed(T0 + i * NS, jpeg.getvalue()))
            b.write("/scan_tf", T0 + i * NS, b.tf(T0 + i * NS, "odom", "base_link", (0, 0, 0)))
    with pytest.raises(InputError) as err:
        BagSource(path)
    text = str(err.value)
    assert "2 image topics" in text and "/front/image_raw" in text and "/rear/compressed" in text
    assert "sensor_msgs/msg/CompressedImage" in text
    with pytest.raises(InputError, match=r"not in bag.*image topics in it: /front"):
        BagSource(path, image_topic="/nope")
    with pytest.raises(InputError, match="has type tf2_msgs/msg/TFMessage, expected"):
        BagSource(path, image_topic="/scan_tf")
    front = BagSource(path, image_topic="/front/image_raw")
    assert [f.rgb[0, 0, 0] for f in front] == [0, 1, 2]
    rear = open_source(path, image_topic="/rear/compressed")
    frames = list(rear)
    assert len(frames) == 3 and frames[0].rgb.shape == (6, 8, 3)
    assert np.abs(frames[0].rgb.astype(int) - pixels(50)).mean() < 6  # JPEG, nearly exact


def test_bag_without_image_topic(tmp_path: Path) -> None:
    path = tmp_path / "noimg"
    with BagBuilder(path) as b:
        b.write("/tf", T0, b.tf(T0, "odom", "base_link", (0, 0, 0)))
    with pytest.raises(InputError, match=r"no image topic.*/tf \(tf2_msgs/msg/TFMessage\)"):
        BagSource(path)


@pytest.mark.parametrize("storage", STORAGES)
def test_bad_frames_zero_stamps_and_order(
    tmp_path: Path, storage: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / ("bad.bag" if storage == "ros1" else "bad")
    png = io.BytesIO()
    PILImage.fromarray(pixels(77)).save(png, format="PNG")
    ms = 1_000_000
    with BagBuilder(path, storage) as b:
        cam = "/cam"
        good = b.image
        b.write(cam, T0 + 0 * ms, good(T0 + 0 * ms, pixels(0)))
        b.write(cam, T0 + 100 * ms, good(T0 + 100 * ms, pixels(1), "weird8"))  # unknown
        b.write(cam, T0 + 200 * ms, good(T0 + 200 * ms, np.zeros((0, 0, 3), np.uint8)))  # empty
        b.write(cam, T0 + 300 * ms, good(T0 + 300 * ms, pixels(3), data=np.zeros(5)))  # short
        b.write(cam, T0 + 400 * ms, good(T0 + 400 * ms, pixels(4), "bgr8"))
        # header stamps swapped with respect to receive order: repaired by the buffer
        b.write(cam, T0 + 500 * ms, good(T0 + 600 * ms, pixels(6)))
        b.write(cam, T0 + 600 * ms, good(T0 + 500 * ms, pixels(5)))
        b.write(cam, T0 + 700 * ms, good(0, pixels(7)))  # zero header stamp: log time
        # padded rows (step larger than width * 3)
        padded = np.zeros((6, 8 * 3 + 4), np.uint8)
        padded[:, : 8 * 3] = pixels(8).reshape(6, -1)
        b.write(cam, T0 + 800 * ms, good(T0 + 800 * ms, pixels(8), data=padded, step=28))
        mono = pixels(9)[..., 0]  # one byte a pixel: data is exactly step * height
        b.write(cam, T0 + 900 * ms, good(T0 + 900 * ms, pixels(9), "mono8", data=mono, step=8))
        # far too late for the reorder buffer: dropped
        b.write(cam, T0 + 2000 * ms, good(T0 + 50 * ms, pixels(99)))
        b.write(cam, T0 + 2100 * ms, good(T0 + 2100 * ms, pixels(21)))
        b.write("/cam/png", T0, b.compressed(T0, png.getvalue(), "png"))
        b.write("/cam/png", T0 + ms, b.compressed(T0 + ms, b"not an image", "jpeg"))
        b.write("/cam/png", T0 + 2 * ms, b.compressed(T0 + 2 * ms, b"", "jpeg"))
    with caplog.at_level(logging.WARNING, logger="surprise_memory.sources"):
        source = BagSource(path, image_topic="/cam", reorder_depth=2)
        frames = list(source)
    stamps = [f.stamp_ns for f in frames]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    values = [int(f.rgb[0, 0, 0]) for f in frames]
    assert values[:2] == [0, 200]  # the bgr8 frame comes out as RGB: red = 200
    assert values[2:] == [5, 6, 7, 8, 9, 21]
    assert stamps[4] == T0 + 700 * ms  # the zero stamp took the log time
    np.testing.assert_array_equal(frames[5].rgb, pixels(8))  # padding removed
    np.testing.assert_array_equal(frames[6].rgb, np.repeat(pixels(9)[..., :1], 3, axis=2))
    assert source.stats.bad == 3
    assert source.stats.zero_stamp == 1
    assert source.stats.out_of_order == 1
    assert source.stats.read == 12 and source.stats.yielded == 8
    assert "weird8" in caplog.text and "out-of-order" in caplog.text
    assert "8 frames yielded of 12 read" in caplog.text
    png_source = BagSource(path, image_topic="/cam/png")
    png_frames = list(png_source)
    assert len(png_frames) == 1
    np.testing.assert_array_equal(png_frames[0].rgb, pixels(77))
    assert png_source.stats.bad == 2


# --- poses ------------------------------------------------------------------------------


def odometry_poses() -> list[tuple[int, Pose]]:
    return [(s.stamp_ns, s.pose) for s in synthetic_odometry(SCENE)]


@pytest.mark.parametrize("storage", STORAGES)
def test_pose_from_odometry(bags: dict[str, Path], storage: str) -> None:
    source = BagSource(bags[storage])
    assert source.pose_topics() == ["/odom", "/tf"]
    truth = odometry_poses()
    with source.pose_lookup("/odom", max_gap_ns=100_000_000) as lookup:
        assert (lookup.frame_id, lookup.child_frame_id) == ("odom", "base_link")
        for stamp, want in truth[::7]:
            got = lookup.at(stamp)
            assert got is not None and got.frame_id == "odom"
            assert got.position == pytest.approx(want.position)
            assert (got.qz, got.qw) == pytest.approx((want.qz, want.qw))
        # halfway between two samples: interpolated
        (ta, a), (tb, b) = truth[10], truth[11]
        mid = lookup.at((ta + tb) // 2)
        assert mid is not None
        assert mid.x == pytest.approx((a.x + b.x) / 2)
        # beyond the last sample by more than the gap: unknown
        assert lookup.at(truth[-1][0] + 200_000_000) is None
        assert lookup.at(truth[-1][0] + 50_000_000) is not None


@pytest.mark.parametrize("storage", STORAGES)
def test_pose_from_tf_chain(bags: dict[str, Path], storage: str) -> None:
    source = BagSource(bags[storage])
    truth = odometry_poses()
    with source.pose_lookup("/tf") as lookup:
        assert isinstance(lookup, ChainedPoseLookup)
        assert (lookup.frame_id, lookup.child_frame_id) == ("map", "base_link")
        assert "(static)" in lookup.describe()
        for stamp, want in truth[::5]:
            got = lookup.at(stamp)
            assert got is not None and got.frame_id == "map"
            # map -> odom is a static offset of (1, 2, 0) without rotation
            assert got.position == pytest.approx((want.x + 1.0, want.y + 2.0, 0.0))
            assert yaw_of(got) == pytest.approx(yaw_of(want))
    with pytest.raises(InputError, match=r"no tf chain world.*edges found: map->odom"):
        source.pose_lookup("/tf", map_frame="world")
    with pytest.raises(InputError, match="pose topic '/camera/image_raw' has type"):
        source.pose_lookup("/camera/image_raw")
    with pytest.raises(InputError, match=r"not in bag.*/odom, /tf"):
        source.pose_lookup("/gps")


def test_pose_from_direct_tf_edge_with_slashes(tmp_path: Path) -> None:
    path = tmp_path / "direct.bag"
    with BagBuilder(path, "ros1") as b:
        b.write("/cam", T0, b.image(T0, pixels(1)))
        for i in range(5):
            stamp = T0 + i * NS
            b.write("/tf", stamp, b.tf(stamp, "/map", "/base_link", (float(i), 0.0, 0.0)))
    with BagSource(path).pose_lookup("/tf", max_gap_ns=NS) as lookup:
        assert isinstance(lookup, SampledPoseLookup)
        pose = lookup.at(T0 + 2 * NS + NS // 4)
        assert pose is not None and pose.x == pytest.approx(2.25)
        assert pose.frame_id == "map"
        assert (lookup.frame_id, lookup.child_frame_id) == ("map", "base_link")


def test_two_dynamic_tf_edges_compose(tmp_path: Path) -> None:
    path = tmp_path / "dyn"
    with BagBuilder(path, "mcap") as b:
        b.write("/cam", T0, b.image(T0, pixels(1)))
        for i in range(11):
            stamp = T0 + i * NS // 10
            b.write("/tf", stamp, b.tf(stamp, "odom", "base_link", (i / 10, 0.0, 0.0)))
            if i % 5 == 0:  # a slow localiser: map -> odom at 2 Hz
                b.write("/tf", stamp, b.tf(stamp, "map", "odom", (0.0, i / 5, 0.0)))
    source = BagSource(path)
    with pytest.raises(InputError):
        source.pose_lookup("/tf", map_frame="map", base_frame="camera")
    lookup = source.pose_lookup("/tf", max_gap_ns=NS // 10, parent_max_gap_ns=NS // 2)
    pose = lookup.at(T0 + 3 * NS // 10)
    assert pose is not None
    assert pose.position == pytest.approx((0.3, 0.6, 0.0))  # map->odom interpolated to 0.6
    lookup.close()
    strict = source.pose_lookup("/tf", max_gap_ns=NS // 10)  # the slow edge is too far now
    assert strict.at(T0 + 2 * NS // 10) is None
    strict.close()


def pose(stamp: int, x: float, yaw: float = 0.0) -> tuple[int, Pose]:
    return stamp, Pose(x, 0.0, 0.0, 0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2), "o")


def test_sampled_lookup_rules() -> None:
    samples = [pose(0, 0.0), pose(10, 1.0, math.pi / 2), pose(10, 9.0), pose(40, 4.0)]
    lookup = SampledPoseLookup(samples, max_gap_ns=10, frame_id="o", child_frame_id="b")
    mid = lookup.at(5)
    assert mid is not None and mid.x == pytest.approx(0.5)
    assert yaw_of(mid) == pytest.approx(math.pi / 4)  # slerp
    assert lookup.dropped == 0  # pulled lazily: the repeated stamp is not read yet
    # 25: 15 from each neighbour, beyond the gap: unknown
    assert lookup.at(25) is None
    assert lookup.dropped == 1
    assert lookup.at(45) is not None and lookup.at(51) is None
    nearest = SampledPoseLookup(samples, max_gap_ns=10, interpolate=False)
    p = nearest.at(4)
    assert p is not None and p.x == 0.0
    p = nearest.at(6)
    assert p is not None and p.x == 1.0
    assert SampledPoseLookup([], max_gap_ns=10).at(0) is None
    with pytest.raises(ConfigError):
        SampledPoseLookup([], max_gap_ns=-1)


def test_sampled_lookup_history_is_bounded() -> None:
    def forever() -> Iterator[tuple[int, Pose]]:
        i = 0
        while True:
            yield pose(i * 10, float(i))
            i += 1

    lookup = SampledPoseLookup(forever(), max_gap_ns=10, history_ns=100)
    for t in range(0, 100_000, 1000):
        got = lookup.at(t + 5)
        assert got is not None and got.x == pytest.approx(t / 10 + 0.5)
        assert len(lookup) <= 13
    with pytest.raises(InputError, match="forgotten"):
        lookup.at(5)
    lookup.close()


def test_static_and_chain_compose() -> None:
    q = (0.0, 0.0, math.sin(math.pi / 4), math.cos(math.pi / 4))  # a left turn
    static = SampledPoseLookup.constant(Pose(1.0, frame_id="map"), "o")
    turn = SampledPoseLookup.constant(Pose(1.0, 0.0, 0.0, *q, frame_id="o"), "b")
    step = SampledPoseLookup.constant(Pose(1.0, frame_id="b"), "c")
    chain = ChainedPoseLookup([static, turn, step])
    got = chain.at(123)
    assert got is not None
    assert got.position == pytest.approx((2.0, 1.0, 0.0))  # forward after a left turn is +y
    assert got.frame_id == "map" and chain.child_frame_id == "c"
    assert chain.describe() == "map <- o (static) ; o <- b (static) ; b <- c (static)"
    with pytest.raises(ConfigError, match="do not chain"):
        ChainedPoseLookup([static, step])


# --- video ------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".mp4", ".mkv", ".avi", ".webm"])
def test_video_stamps_from_pts(tmp_path: Path, suffix: str) -> None:
    scene = SyntheticScene(seed=1, duration_s=2.0, fps=10.0, width=32, height=24)
    recording = write_synthetic_video(tmp_path / f"rec{suffix}", scene)
    source = open_source(recording.path)
    assert isinstance(source, VideoSource) and isinstance(source, FrameSource)
    assert source.size == (32, 24)
    frames = list(source)
    assert [f.stamp_ns for f in frames] == [i * 100_000_000 for i in range(20)]
    assert source.duration_ns is not None and 1.8 * NS <= source.duration_ns <= 2.2 * NS
    assert source.estimated_frames is not None and abs(source.estimated_frames - 20) <= 1
    want = list(synthetic_frames(scene))
    errors = [np.abs(a.rgb.astype(int) - b.rgb).mean() for a, b in zip(frames, want, strict=True)]
    assert max(errors) < 12  # lossy codec, same pictures
    assert "video" in source.describe()


def test_variable_frame_rate_video(tmp_path: Path) -> None:
    ms = 1_000_000
    offsets = [0, 40, 50, 300, 310, 1000, 1033, 2500]
    frames = [Frame(pixels(10 * i, 24, 32), T0 + o * ms) for i, o in enumerate(offsets)]
    path = tmp_path / "vfr.mp4"
    assert write_video(path, frames) == len(offsets)
    source = VideoSource(path, start_ns=T0)
    assert [f.stamp_ns for f in source] == [T0 + o * ms for o in offsets]
    # subsampling by presentation time: at most one frame per 0.5 s slot
    subsampled = VideoSource(path, fps=2.0)
    assert [f.stamp_ns // ms for f in subsampled] == [0, 1000, 2500]
    assert subsampled.stats.subsampled == 5
    with pytest.raises(ConfigError, match="stamps must increase"):
        write_video(tmp_path / "bad.mp4", [frames[0], frames[0]], time_base=Fraction(1, 10))


def test_video_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"\x00" * 100)
    with pytest.raises(InputError, match="cannot open video"):
        VideoSource(broken)
    scene = SyntheticScene(duration_s=0.5, width=32, height=24)
    path = write_synthetic_video(tmp_path / "ok.mkv", scene).path
    with pytest.raises(InputError, match="1 video stream"):
        VideoSource(path, stream_index=1)
    with pytest.raises(InputError, match="topics exist only in bags"):
        open_source(path, image_topic="/cam")


# --- picking the reader -----------------------------------------------------------------


def test_open_source_by_path(bags: dict[str, Path], tmp_path: Path) -> None:
    folder = bags["sqlite3"]
    assert isinstance(open_source(folder), BagSource)
    db3 = next(folder.glob("*.db3"))
    assert open_source(db3).message_count == SCENE.frame_count
    mcap = next(bags["mcap"].glob("*.mcap"))
    assert open_source(mcap, fps=5).estimated_frames in {15, 16}
    assert isinstance(open_source(bags["ros1"]), BagSource)
    with pytest.raises(InputError, match="does not exist"):
        open_source(tmp_path / "missing.bag")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"no metadata\.yaml"):
        open_source(tmp_path / "empty")
    lone = tmp_path / "lone.mcap"
    lone.write_bytes(mcap.read_bytes())
    with pytest.raises(InputError, match=r"without a metadata\.yaml beside it"):
        open_source(lone)
    notes = tmp_path / "notes.txt"
    notes.write_text("x")
    with pytest.raises(InputError, match="no known kind"):
        open_source(notes)
