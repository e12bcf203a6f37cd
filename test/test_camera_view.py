"""A camera's view of an episode (issue 42): the optical frame, its mounting, its direction."""

from __future__ import annotations

import math

import pytest

from surprise_memory.memory.camera_view import (
    OPTICAL_IN_BODY,
    CameraView,
    mounting_pose,
    viewing_yaw,
    yaw_pose,
)
from surprise_memory.memory.pose import Pose, compose


def _axis(pose: Pose, axis: tuple[float, float, float]) -> tuple[float, float, float]:
    return compose(Pose(qx=pose.qx, qy=pose.qy, qz=pose.qz, qw=pose.qw), Pose(*axis)).position


def test_the_optical_frame_looks_along_the_body_x_axis_right_is_minus_y_down_is_minus_z() -> None:
    assert _axis(OPTICAL_IN_BODY, (0, 0, 1)) == pytest.approx((1, 0, 0), abs=1e-12)
    assert _axis(OPTICAL_IN_BODY, (1, 0, 0)) == pytest.approx((0, -1, 0), abs=1e-12)
    assert _axis(OPTICAL_IN_BODY, (0, 1, 0)) == pytest.approx((0, 0, -1), abs=1e-12)


@pytest.mark.parametrize("deg", [0.0, 45.0, 90.0, 180.0, -90.0, 300.0])
def test_a_mounting_yaw_turns_the_view_on_the_robot(deg: float) -> None:
    robot = yaw_pose(1.0, 2.0, 0.0, math.radians(30.0), "odom")
    camera = compose(robot, mounting_pose(deg))
    assert camera.position == pytest.approx((1.0, 2.0, 0.0)) and camera.frame_id == "odom"
    yaw = CameraView("c", "c_optical", camera).yaw
    assert yaw is not None
    assert math.remainder(yaw - math.radians(30.0 + deg), 2 * math.pi) == pytest.approx(0, abs=1e-9)


def test_a_pitched_camera_keeps_its_heading_a_vertical_one_has_none() -> None:
    pitched = compose(yaw_pose(0, 0, 0, 1.0), Pose(qy=math.sin(0.3), qw=math.cos(0.3)))
    assert viewing_yaw(compose(pitched, OPTICAL_IN_BODY)) == pytest.approx(1.0)
    down = compose(Pose(qy=math.sin(math.pi / 4), qw=math.cos(math.pi / 4)), OPTICAL_IN_BODY)
    assert viewing_yaw(down) is None  # looks straight down: no direction on the ground
    assert CameraView().yaw is None and CameraView("x").pose is None
