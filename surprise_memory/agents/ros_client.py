"""EpisodicMemoryClient: query the memory node's retrieve_episodes service from any rclpy node."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import rclpy
from rclpy.node import Node

from surprise_memory.errors import InputError, ServiceTimeoutError
from surprise_memory.memory.pose import Pose
from surprise_memory.msg import Episode
from surprise_memory.nodes.messages import image_msg_from_rgb, ns_to_time, pose_from_msg, time_to_ns
from surprise_memory.perception.frames import rgb_from_image_msg
from surprise_memory.srv import RetrieveEpisodes

__all__ = ["EpisodicMemoryClient", "RetrievedEpisode"]


@dataclass(frozen=True)
class RetrievedEpisode:
    """One episode as returned by the service, in plain Python types (times in int ns).

    ``score`` is the cosine similarity for text/image queries, the distance in metres for
    place-only queries, and 0 otherwise. ``images`` holds RGB uint8 frames when asked for.
    """

    id: str
    stamp_ns: int
    start_ns: int
    end_ns: int
    pose: Pose
    pose_valid: bool
    surprise: float
    threshold: float
    frame_stamps_ns: tuple[int, ...]
    frame_uris: tuple[str, ...]
    score: float
    images: list[npt.NDArray[np.uint8]] = field(default_factory=list, repr=False)

    @classmethod
    def from_msg(cls, msg: Episode, score: float) -> RetrievedEpisode:
        """Convert a surprise_memory/Episode message."""
        return cls(
            id=msg.id,
            stamp_ns=time_to_ns(msg.header.stamp),
            start_ns=time_to_ns(msg.start),
            end_ns=time_to_ns(msg.end),
            pose=pose_from_msg(msg.pose, msg.header.frame_id),
            pose_valid=bool(msg.pose_valid),
            surprise=float(msg.surprise),
            threshold=float(msg.threshold),
            frame_stamps_ns=tuple(time_to_ns(t) for t in msg.frame_stamps),
            frame_uris=tuple(msg.frame_uris),
            score=float(score),
            images=[rgb_from_image_msg(img) for img in msg.frames],
        )


class EpisodicMemoryClient:
    """Client of ``retrieve_episodes``, hosted by a node of the caller's.

    Works whether or not the host node is being spun elsewhere: if it is (it is in an
    executor), the call waits on the response; if not, the call spins the node until the
    response arrives. Every call ends by its timeout.

    Args:
        node: The host node.
        service: Name of the service (default: the launch file's namespace).
        timeout: Default seconds to wait for the service and for an answer.
    """

    def __init__(
        self,
        node: Node,
        service: str = "/surprise_memory/retrieve_episodes",
        timeout: float = 5.0,
    ) -> None:
        self._node = node
        self._timeout = timeout
        self._client: Any = node.create_client(RetrieveEpisodes, service)

    def retrieve(
        self,
        text: str | None = None,
        *,
        image: npt.NDArray[np.uint8] | None = None,
        start: int | None = None,
        end: int | None = None,
        near: Sequence[float] | None = None,
        radius: float | None = None,
        k: int = 10,
        include_images: bool = False,
        timeout: float | None = None,
    ) -> list[RetrievedEpisode]:
        """Ask the memory node for episodes; best first.

        Args:
            text: Free-text query.
            image: Query image, (H, W, 3) uint8 RGB.
            start: Earliest trigger stamp, int ns (None = open).
            end: Latest trigger stamp, int ns (None = open).
            near: (x, y, z) in metres in the map frame; with ``radius``, a place filter.
            radius: Metres around ``near`` (None: sort by distance only).
            k: Most episodes to return.
            include_images: Also return the stored frames as RGB arrays.
            timeout: Seconds to wait (default: the client's).

        Raises:
            ServiceTimeoutError: The service is not there or did not answer in time.
            InputError: The node refused the request (its message says why).
        """
        request = RetrieveEpisodes.Request()
        request.text = text or ""
        if image is not None:
            request.image = image_msg_from_rgb(image)
        if start is not None:
            request.start = ns_to_time(start)
        if end is not None:
            request.end = ns_to_time(end)
        if near is not None:
            request.use_location = True
            request.location.x, request.location.y, request.location.z = (
                float(v) for v in [*near, 0.0, 0.0, 0.0][:3]
            )
            request.radius = float(radius) if radius is not None else 0.0
        if k < 1:
            raise InputError(f"k={k}: must be >= 1")
        request.max_results = int(k)
        request.include_images = include_images
        response = self._call(request, self._timeout if timeout is None else timeout)
        if not response.success:
            raise InputError(f"retrieve_episodes refused the request: {response.message}")
        return [
            RetrievedEpisode.from_msg(ep, score)
            for ep, score in zip(response.episodes, response.scores, strict=True)
        ]

    def _call(self, request: RetrieveEpisodes.Request, timeout: float) -> RetrieveEpisodes.Response:
        name = self._client.srv_name
        if not self._client.wait_for_service(timeout_sec=timeout):
            raise ServiceTimeoutError(f"service {name} is not available after {timeout} s")
        future = self._client.call_async(request)
        executor = self._node.executor
        if executor is None or self._node not in executor.get_nodes():
            rclpy.spin_until_future_complete(self._node, future, timeout_sec=timeout)
        else:  # someone else spins the node: just wait for the answer
            done = threading.Event()
            future.add_done_callback(lambda _: done.set())
            done.wait(timeout)
        if not future.done():
            self._client.remove_pending_request(future)
            raise ServiceTimeoutError(f"service {name} did not answer within {timeout} s")
        result = future.result()
        if result is None:
            raise ServiceTimeoutError(f"service {name} failed: {future.exception()}")
        return result

    def destroy(self) -> None:
        """Remove the service client from the host node."""
        self._node.destroy_client(self._client)
