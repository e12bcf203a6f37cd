"""A node's cameras: one subscription, delivery count, silence watch and stamp order each.

Every node that takes camera frames (``encoder_node``, ``memory_node``, ``pipeline_node``)
reads the ``cameras`` setting into one :class:`CameraInputs`. Each camera has its own

* subscription (:func:`~surprise_memory.nodes.qos.subscribe_camera` on its topic:
  ``image`` for the one unnamed camera, else ``<name>/image`` or the topic it names);
* :class:`~surprise_memory.nodes.delivery.CameraDelivery` (its rate and losses on
  ``/diagnostics``, keys prefixed ``<name>.``);
* input watch: a camera that stops publishing is reported by name (WARN "no camera
  <name>"), while the others go on;
* :class:`~surprise_memory.nodes.runtime.StampOrder`: a camera's stamps must increase, its
  own time going back resets its own sequence only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from surprise_memory.config import CameraConfig, CamerasConfig, CameraSpec
from surprise_memory.health import InputWatch
from surprise_memory.nodes.delivery import CameraDelivery
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.qos import subscribe_camera
from surprise_memory.nodes.runtime import StampOrder

__all__ = ["CameraInput", "CameraInputs", "not_one_of"]


def not_one_of(camera: str, known: Iterable[str]) -> str:
    """Why a message of ``camera`` is refused by a node whose cameras are ``known``."""
    names = ", ".join(repr(n) for n in known)
    return (
        f"camera {camera!r} is not one of this node's cameras ({names}): give every node the "
        "same cameras setting"
    )


@dataclass(frozen=True)
class CameraInput:
    """One camera of a node: its settings, delivery count, silence watch and stamp order."""

    spec: CameraSpec
    delivery: CameraDelivery
    watch: InputWatch
    order: StampOrder


class CameraInputs:
    """The cameras a node subscribes, from its ``cameras`` and camera settings.

    Args:
        node: The host node.
        stats: Its counters.
        values: Its parameters (``cameras``, ``image_transport``, ``camera_loss_warn``).
        on_reset: Called with a camera's name when its time goes backwards.

    """

    def __init__(
        self,
        node: Any,
        stats: NodeStats,
        values: Mapping[str, Any],
        on_reset: Callable[[str], None],
    ) -> None:
        self._node = node
        self._stats = stats
        self.config = CameraConfig.from_mapping(values)
        self.specs = CamerasConfig.from_mapping(values).specs
        self._inputs: dict[str, CameraInput] = {}
        for spec in self.specs:
            self._inputs[spec.name] = CameraInput(
                spec,
                CameraDelivery(stats, self.config.camera_loss_warn, spec.name),
                stats.watch_input(
                    spec.topic,
                    f"no camera {spec.name}" if spec.name else "no camera",
                    streaming=True,
                ),
                StampOrder(node, stats, lambda name=spec.name: on_reset(name)),
            )

    @property
    def names(self) -> tuple[str, ...]:
        """The cameras' names, in order ("" alone: the one unnamed camera)."""
        return tuple(self._inputs)

    @property
    def compressed(self) -> bool:
        """Whether the cameras publish ``CompressedImage`` (``image_transport``)."""
        return self.config.image_transport == "compressed"

    def __getitem__(self, name: str) -> CameraInput:
        return self._inputs[name]

    def deliveries(self) -> dict[str, CameraDelivery]:
        """Each camera's delivery count, by name."""
        return {name: camera.delivery for name, camera in self._inputs.items()}

    def subscribe(self, callback: Callable[[str, Any], None]) -> None:
        """Subscribe every camera; ``callback(name, msg)`` gets each message (seen first)."""
        for name, camera in self._inputs.items():

            def on_image(msg: Any, name: str = name, watch: InputWatch = camera.watch) -> None:
                self._stats.seen(watch)
                callback(name, msg)

            subscribe_camera(
                self._node, self.config, on_image, camera.delivery, topic=camera.spec.topic
            )
