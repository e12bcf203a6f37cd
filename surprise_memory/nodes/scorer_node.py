"""scorer_node: FrameEmbedding in; SurpriseScore for every frame and gated SurpriseEvent out."""

from __future__ import annotations

from typing import Any

from surprise_memory.config import NODE_CONFIGS, NodeConfig
from surprise_memory.msg import FrameEmbedding
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.lifecycle import ManagedNode
from surprise_memory.nodes.qos import RELIABLE
from surprise_memory.nodes.runtime import run_node
from surprise_memory.nodes.scorer_part import ScorerPart

CONFIGS = NODE_CONFIGS["scorer_node"]


class ScorerNode(ManagedNode):
    """Scores each embedding (SurpriseScorer) and gates events (SurpriseGate).

    Subscribes ``embedding``; publishes ``surprise`` (every scored frame) and ``events``
    (reliable). The work is :class:`~surprise_memory.nodes.scorer_part.ScorerPart` (shared
    with ``pipeline_node``).
    """

    def __init__(self) -> None:
        super().__init__("scorer_node", CONFIGS)

    def setup(self, values: dict[str, Any]) -> None:
        """Configure: scorer, gate, filters, pose sources, publishers, diagnostics."""
        self._stats = NodeStats(self, NodeConfig.from_mapping(values))
        self._embedding_watch = self._stats.watch_input("embedding", "no encoder", streaming=True)
        self._part = ScorerPart(self, self._stats)
        self._part.setup(values)
        self.apply_parts(values, self._stats, self._part.appliers())

    def subscribe(self) -> None:
        """Activate: embeddings (and odometry) in."""
        self._stats.restart_inputs()
        self._part.subscribe()
        self.create_subscription(FrameEmbedding, "embedding", self._on_embedding, RELIABLE)

    def _on_embedding(self, msg: FrameEmbedding) -> None:
        self._stats.seen(self._embedding_watch)
        self._part.on_embedding(msg)

    def flush(self) -> None:
        """Publish the events still pending in the gate (end of a bag, shutdown)."""
        self._part.flush()


def main(args: list[str] | None = None) -> int:
    """Entry point of ``ros2 run surprise_memory scorer_node``."""
    return run_node(ScorerNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
