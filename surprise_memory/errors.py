"""Error classes of surprise_memory.

Every error the package raises on purpose derives from :class:`SurpriseMemoryError`, so a
node can catch one base class per message, count the rejection and keep running. Messages
say what came, what was expected, and where useful what to do next.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "InputError",
    "ModelLoadError",
    "ServiceTimeoutError",
    "StoreError",
    "StoreUnreachableError",
    "SurpriseMemoryError",
]


class SurpriseMemoryError(Exception):
    """Base class of every error raised on purpose by surprise_memory."""


class ConfigError(SurpriseMemoryError, ValueError):
    """A setting is out of its allowed range or of the wrong type."""


class InputError(SurpriseMemoryError, ValueError):
    """One input item (frame, embedding, score, stamp, request) cannot be used.

    Streaming components raise it *before* changing their state, so the caller may skip
    the item and go on.
    """


class StoreError(SurpriseMemoryError):
    """The episode store cannot be opened, read or written."""


class StoreUnreachableError(StoreError):
    """A remote store did not answer: refused, cut, or silent past its timeout.

    The link or the server is down, not the request: the same call may succeed later.
    """


class ModelLoadError(SurpriseMemoryError):
    """Model weights could not be loaded from the hub id or folder that was given."""


class ServiceTimeoutError(SurpriseMemoryError, TimeoutError):
    """A service did not answer within the timeout (is the node running? same ROS_DOMAIN_ID?)."""
