"""Settings of the memory browser (``surprise-memory serve``): where it listens, how it reads.

Not a node's settings: the browser is a command, so these are options of ``serve`` only
(built from this dataclass like every other option), not ROS parameters or YAML entries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from surprise_memory.config.schema import ComponentConfig, setting

__all__ = ["BrowserConfig"]


@dataclass(frozen=True)
class BrowserConfig(ComponentConfig):
    """The memory browser's web server: address, live updates, uploads, query model."""

    component: ClassVar[str] = "browser"

    host: str = setting(
        "127.0.0.1",
        "Address the page is served on. Loopback (the default) is this machine only; any "
        "other address (0.0.0.0, a robot's address) needs a token, or the command refuses "
        "to start, and then every request must carry it (a person signs in once on the "
        "page).",
    )
    port: int = setting(
        8765, "TCP port of the page (0 = any free port, printed at start).", low=0, high=65535
    )
    live_poll_seconds: float = setting(
        1.0,
        "Seconds between two looks at the store for episodes a running memory node added or "
        "evicted; the page is told of them at once (server-sent events).",
        low=0.1,
        high=60.0,
    )
    max_live_streams: int = setting(
        32,
        "Most pages that may hold the live stream open at once; one more is answered 503 "
        "(its page retries later). Each holds a connection and a small queue.",
        low=1,
        high=10_000,
    )
    max_upload_bytes: int = setting(
        16 * 1024 * 1024,
        "Largest image accepted as an image query (bytes); a larger upload is refused (413).",
        low=1024,
        high=256 * 1024 * 1024,
    )
    query_device: str = setting(
        "cpu",
        "Device of the query embedder (auto, cpu, cuda, cuda:N): one text or image at a "
        "time, so the CPU leaves the robot's GPU to its nodes.",
    )
