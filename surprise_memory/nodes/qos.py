"""The QoS profiles of the package's topics, in one place, and the camera subscription.

* :data:`RELIABLE`: embeddings, events, episodes (reliable, keep last 100).
* Camera images: sensor-data QoS (best effort, keep last 5), overridable per topic.
"""

from __future__ import annotations

from typing import Any

from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rclpy.qos_overriding_options import QoSOverridingOptions

from surprise_memory.config import CameraConfig

RELIABLE = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
"""Embeddings, events and episodes: every message matters, and a burst may queue."""

SENSOR_DATA = qos_profile_sensor_data
"""Camera input: best effort, keep last 5 (a late frame is worth less than the next one)."""

__all__ = ["RELIABLE", "SENSOR_DATA", "subscribe_camera"]


def subscribe_camera(node: Node, camera: CameraConfig, callback: Any) -> Any:
    """Subscribe ``callback`` to the node's ``image`` input (Image, or CompressedImage).

    Sensor-data QoS (best effort, keep last 5) unless the params file overrides it, e.g.
    ``qos_overrides./camera/image_raw.subscription.reliability: reliable``.
    """
    from sensor_msgs.msg import CompressedImage, Image

    msg_type = CompressedImage if camera.image_transport == "compressed" else Image
    return node.create_subscription(
        msg_type,
        "image",
        callback,
        SENSOR_DATA,
        qos_overriding_options=QoSOverridingOptions.with_default_policies(),
    )
