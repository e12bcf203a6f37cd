"""Poses: interpolation, composition, the lookup rule, and the bounded PoseBuffer."""

from __future__ import annotations

import math

import pytest

from surprise_memory.errors import ConfigError
from surprise_memory.memory.pose import (
    Pose,
    PoseBuffer,
    Sample,
    compose,
    interpolate_pose,
    pose_from_neighbours,
    pose_from_samples,
    yaw_of,
)
from surprise_memory.sources import SampledPoseLookup


def turned(x: float, yaw: float, *, flip: bool = False, frame_id: str = "odom") -> Pose:
    """A pose at (x, 0, 0) heading ``yaw``; ``flip`` gives the same rotation as -q."""
    s = -1.0 if flip else 1.0
    return Pose(x, 0.0, 0.0, 0.0, 0.0, s * math.sin(yaw / 2), s * math.cos(yaw / 2), frame_id)


def quat(pose: Pose) -> tuple[float, float, float, float]:
    return (pose.qx, pose.qy, pose.qz, pose.qw)


# --- primitives -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("f", "x", "yaw"),
    [(0.0, 0.0, 0.0), (0.25, 0.5, math.pi / 8), (0.5, 1.0, math.pi / 4), (1.0, 2.0, math.pi / 2)],
)
def test_interpolate_pose(f: float, x: float, yaw: float) -> None:
    a, b = turned(0.0, 0.0), turned(2.0, math.pi / 2, frame_id="other")
    got = interpolate_pose(a, b, f)
    assert got.position == pytest.approx((x, 0.0, 0.0))
    assert yaw_of(got) == pytest.approx(yaw)  # slerp: the angle moves at a constant rate
    assert math.hypot(*quat(got)) == pytest.approx(1.0)
    assert got.frame_id == "odom"  # the first pose's frame


@pytest.mark.parametrize("flip", [False, True])
@pytest.mark.parametrize("f", [0.25, 0.5, 0.75])
def test_interpolation_takes_the_short_arc(flip: bool, f: float) -> None:
    # 170 deg -> -170 deg is a 20 deg turn through 180, not 340 deg back through 0
    a, b = turned(0.0, math.radians(170)), turned(1.0, math.radians(-170), flip=flip)
    got = interpolate_pose(a, b, f)
    want = math.radians(170 + 20 * f)
    assert math.cos(yaw_of(got) - want) == pytest.approx(1.0)
    # q and -q are one rotation: interpolating between them never turns
    same = interpolate_pose(a, turned(0.0, math.radians(170), flip=True), f)
    assert yaw_of(same) == pytest.approx(math.radians(170))


def test_compose() -> None:
    parent = Pose(1.0, 0.0, 0.0, *quat(turned(0.0, math.pi / 2)), frame_id="map")
    child = Pose(1.0, 0.0, 0.5, *quat(turned(0.0, math.pi / 4)), frame_id="odom")
    got = compose(parent, child)
    assert got.position == pytest.approx((1.0, 1.0, 0.5))  # forward after a left turn is +y
    assert yaw_of(got) == pytest.approx(3 * math.pi / 4)
    assert got.frame_id == "map"


A: Sample = (100, turned(0.0, 0.0))
B: Sample = (200, turned(1.0, math.pi / 2))


@pytest.mark.parametrize(
    ("stamp", "before", "after", "gap", "interpolate", "x"),
    [
        (100, A, B, 0, True, 0.0),  # exact stamp, even with no gap allowed
        (150, A, B, 50, True, 0.5),  # both within the gap: interpolated
        (125, A, B, 80, True, 0.25),
        (140, A, B, 50, True, 0.0),  # the after sample is 60 away: nearest
        (170, A, B, 50, True, 1.0),
        (150, A, B, 49, True, None),  # both beyond the gap: unknown
        (150, A, B, 50, False, 0.0),  # nearest only: a tie goes to the earlier sample
        (160, A, B, 100, False, 1.0),
        (250, B, None, 50, True, 1.0),  # past the end, within the gap: no extrapolation
        (251, B, None, 50, True, None),
        (50, None, A, 50, True, 0.0),
        (50, None, None, 10**9, True, None),
    ],
)
def test_lookup_rule(
    stamp: int,
    before: Sample | None,
    after: Sample | None,
    gap: int,
    interpolate: bool,
    x: float | None,
) -> None:
    got = pose_from_neighbours(stamp, before, after, gap, interpolate=interpolate)
    assert (got is None) == (x is None)
    if got is not None:
        assert got.x == pytest.approx(x)


def test_pose_from_samples_finds_the_neighbours() -> None:
    samples = [(i * 10, turned(float(i), 0.0)) for i in range(5)]
    for t, want in [(0, 0.0), (5, 0.5), (20, 2.0), (34, 3.0), (38, 4.0), (40, 4.0), (45, 4.0)]:
        got = pose_from_samples(samples, t, 5)
        assert got is not None and got.x == pytest.approx(want)
    assert pose_from_samples(samples, 46, 5) is None
    assert pose_from_samples(samples, -6, 5) is None
    assert pose_from_samples([], 0, 5) is None


# --- PoseBuffer -------------------------------------------------------------------------


def test_buffer_interpolates_within_the_gap() -> None:
    buffer = PoseBuffer(max_gap_ns=50)
    assert buffer.lookup(0) is None
    buffer.add(100, A[1])
    buffer.add(200, B[1])
    mid = buffer.lookup(150)
    assert mid is not None and mid.x == pytest.approx(0.5)
    assert yaw_of(mid) == pytest.approx(math.pi / 4)
    near = buffer.lookup(140)  # 60 from the next pose: the nearest one
    assert near is not None and near.x == 0.0
    assert buffer.lookup(150 - 1) is not None and buffer.lookup(260) is None


def test_buffer_out_of_order_and_replaced_poses() -> None:
    buffer = PoseBuffer(max_gap_ns=100)
    for stamp, x in [(0, 0.0), (300, 3.0), (100, 1.0), (200, 2.0), (200, 20.0)]:
        buffer.add(stamp, turned(x, 0.0))
    assert len(buffer) == 4  # the repeated stamp replaced its pose
    for t, want in [(50, 0.5), (150, 10.5), (200, 20.0), (250, 11.5)]:
        got = buffer.lookup(t)
        assert got is not None and got.x == pytest.approx(want)
    buffer.clear()
    assert len(buffer) == 0 and buffer.lookup(200) is None


def test_buffer_capacity_drops_the_oldest() -> None:
    buffer = PoseBuffer(capacity=3, max_gap_ns=4)
    for i in range(5):
        buffer.add(i * 10, turned(float(i), 0.0))
    assert len(buffer) == 3
    assert buffer.lookup(10) is None  # dropped
    assert buffer.lookup(20) is not None
    buffer.add(5, turned(-1.0, 0.0))  # older than everything in a full buffer: ignored
    assert len(buffer) == 3 and buffer.lookup(5) is None
    buffer.add(25, turned(2.5, 0.0))  # in place: the oldest goes
    assert len(buffer) == 3 and buffer.lookup(20) is None
    got = buffer.lookup(25)
    assert got is not None and got.x == 2.5


@pytest.mark.parametrize(("capacity", "gap"), [(0, 10), (5, -1)])
def test_buffer_validates(capacity: int, gap: int) -> None:
    with pytest.raises(ConfigError, match="must be >="):
        PoseBuffer(capacity=capacity, max_gap_ns=gap)
    with pytest.raises(ValueError):  # ConfigError is a ValueError, as it was before
        PoseBuffer(capacity=capacity, max_gap_ns=gap)


@pytest.mark.parametrize("interpolate", [True, False])
def test_buffer_and_bag_lookup_share_the_rule(interpolate: bool) -> None:
    samples = [(0, turned(0.0, 0.0)), (10, turned(1.0, 1.0)), (40, turned(4.0, -2.0))]
    lookup = SampledPoseLookup(samples, max_gap_ns=12, interpolate=interpolate)
    for t in range(-15, 60):
        want = pose_from_samples(samples, t, 12, interpolate=interpolate)
        assert lookup.at(t) == want
        if interpolate:
            buffer = PoseBuffer(max_gap_ns=12)
            for stamp, pose in samples:
                buffer.add(stamp, pose)
            assert buffer.lookup(t) == want
