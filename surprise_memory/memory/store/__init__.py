"""The episode store: episodes on disk and retrieval over them.

One interface, :class:`EpisodeStore` (the SQLite folder, the embedded default). See
:mod:`.sqlite` for the on-disk layout and the durability guarantees.
"""

from surprise_memory.memory.store.sqlite import (
    DB_NAME,
    SCHEMA_VERSION,
    EpisodeRecord,
    EpisodeStore,
    RetrievalHit,
    decode_jpeg,
)

__all__ = [
    "DB_NAME",
    "SCHEMA_VERSION",
    "EpisodeRecord",
    "EpisodeStore",
    "RetrievalHit",
    "decode_jpeg",
]
