"""The QoS profiles of the package's topics, in one place, and the camera subscription.

* :data:`RELIABLE`: embeddings and scores between the nodes (reliable, volatile, keep last 100).
* :data:`LATCHED`: events and episodes (reliable, transient local, keep last
  :data:`LATCHED_DEPTH`): a memory node started late or restarted, or an agent that joins,
  receives the recent events and episodes it missed.
* :data:`MARKERS`: ``episode_markers`` (reliable, transient local, keep last 1): each
  message is the whole set of markers, so the last one is all a late display needs.
* :data:`PREVIEW`: ``episode_preview/compressed`` (reliable, transient local, keep last
  :data:`PREVIEW_DEPTH`): a late display gets the newest episode's frames.
* :data:`ODOMETRY`: the odometry subscription (best effort, keep last 50). A best-effort
  subscription matches reliable and best-effort publishers alike (robot drivers use both);
  a reliable one would never hear a best-effort publisher.
* Camera images: sensor-data QoS (best effort, keep last 5).
* :data:`GOAL`: navigation goals on ``goal_pose`` (reliable, volatile, keep last 1), as
  RViz's goal tool publishes them and Nav2's bt_navigator subscribes.

Every subscription made here takes ``qos_overrides.<topic>.subscription.*`` parameters from
the params file (:func:`overridable`), and so do the publishers of events, episodes,
markers and preview frames.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rclpy.node import Node
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)
from rclpy.qos_overriding_options import QoSOverridingOptions
from rclpy.subscription import Subscription

from surprise_memory.config import CameraConfig

if TYPE_CHECKING:
    from surprise_memory.nodes.delivery import CameraDelivery

try:  # Iron and later
    from rclpy.event_handler import SubscriptionEventCallbacks, UnsupportedEventTypeError
except ImportError:  # Humble
    from rclpy.qos_event import (  # type: ignore[no-redef,unused-ignore]
        SubscriptionEventCallbacks,
        UnsupportedEventTypeError,
    )

# rclpy passes a callback of two parameters the message's MessageInfo (Iron and later)
_MESSAGE_INFO = hasattr(getattr(Subscription, "CallbackType", None), "WithMessageInfo")

RELIABLE = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
"""Embeddings and scores: every message matters, and a burst may queue."""

LATCHED_DEPTH = 100
"""Events and episodes a late subscriber receives: at most the last 100 (bounded memory in
the publisher; an event is a few hundred bytes, an episode message holds no images)."""

LATCHED = QoSProfile(
    depth=LATCHED_DEPTH,
    history=HistoryPolicy.KEEP_LAST,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
"""Events and episodes: reliable and transient local, so a late or restarted subscriber
catches up on the recent ones. Volatile subscribers (``ros2 topic echo``) still match."""

MARKERS = QoSProfile(
    depth=1,
    history=HistoryPolicy.KEEP_LAST,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
"""Episode markers: every message replaces the display's whole set (it starts with a
DELETEALL), so keeping the last one is enough for a display that joins late."""

PREVIEW_DEPTH = 9
"""Preview frames a late subscriber receives: one episode at the default 8 frames and its
trigger's frame again, the last (a few hundred KB of JPEGs held by the publisher)."""

PREVIEW = QoSProfile(
    depth=PREVIEW_DEPTH,
    history=HistoryPolicy.KEEP_LAST,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
"""Frames of the newest episode (stored JPEGs): reliable and transient local, so a display
opened after the episode was stored still shows it."""

ODOMETRY = QoSProfile(
    depth=50, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.BEST_EFFORT
)
"""Odometry: best effort matches reliable and best-effort publishers; 50 deep covers a
burst at 100 Hz while the scorer is busy."""

ROBOT_POSE = QoSProfile(
    depth=1,
    history=HistoryPolicy.KEEP_LAST,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
"""The robot's localised pose (AMCL's ``/amcl_pose``, reliable and transient local): only
the latest counts, and it arrives even when AMCL last published before we subscribed."""

GOAL = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
"""Navigation goals: reliable, volatile (an old goal must never reach a navigator that
joins later), one deep (the newest goal is the one that counts)."""

SENSOR_DATA = qos_profile_sensor_data
"""Camera input: best effort, keep last 5 (a late frame is worth less than the next one)."""

__all__ = [
    "GOAL",
    "LATCHED",
    "LATCHED_DEPTH",
    "MARKERS",
    "ODOMETRY",
    "PREVIEW",
    "PREVIEW_DEPTH",
    "RELIABLE",
    "SENSOR_DATA",
    "overridable",
    "subscribe_camera",
]


def overridable() -> QoSOverridingOptions:
    """Options letting the params file override reliability, durability, history and depth.

    For example ``qos_overrides./odom.subscription.reliability: reliable``.
    """
    return QoSOverridingOptions.with_default_policies()


def subscribe_camera(
    node: Node,
    camera: CameraConfig,
    callback: Any,
    delivery: CameraDelivery | None = None,
    topic: str = "image",
) -> Any:
    """Subscribe ``callback`` to a camera input of the node (Image, or CompressedImage).

    Sensor-data QoS (best effort, keep last 5) unless the params file overrides it, e.g.
    ``qos_overrides./camera/image_raw.subscription.reliability: reliable``.

    Args:
        node: The node.
        camera: Its camera settings (``image_transport``).
        callback: Called with each message.
        delivery: Told of every message with its publisher's sequence number (where rclpy
            passes the ``MessageInfo``: Iron and later), and of the messages the
            middleware saw lost in transport (DDS's sample-lost status, where the RMW
            reports it: Fast DDS does); see :mod:`surprise_memory.nodes.delivery`.
        topic: The input: ``image`` (the one unnamed camera), else a camera's topic
            (``CameraSpec.topic``, e.g. ``front/image``).

    Returns:
        The subscription.

    """
    from sensor_msgs.msg import CompressedImage, Image

    msg_type = CompressedImage if camera.image_transport == "compressed" else Image
    options = overridable()
    if delivery is None:
        return node.create_subscription(
            msg_type, topic, callback, SENSOR_DATA, qos_overriding_options=options
        )
    count = delivery.delivered
    handler: Callable[..., None]
    if _MESSAGE_INFO:

        def handler(msg: Any, info: Any) -> None:  # two parameters: rclpy passes the info
            count(info.get("publication_sequence_number"))
            callback(msg)
    else:

        def handler(msg: Any) -> None:
            count(None)
            callback(msg)

    events = SubscriptionEventCallbacks(
        message_lost=lambda info: delivery.lost_in_transport(info.total_count_change)
    )
    try:
        subscription = node.create_subscription(
            msg_type,
            topic,
            handler,
            SENSOR_DATA,
            event_callbacks=events,
            qos_overriding_options=options,
        )
    except UnsupportedEventTypeError:  # an RMW without the message-lost event
        subscription = node.create_subscription(
            msg_type, topic, handler, SENSOR_DATA, qos_overriding_options=options
        )
    delivery.watch(subscription)
    return subscription
