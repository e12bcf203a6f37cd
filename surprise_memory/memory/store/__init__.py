"""The episode store: episodes on disk and retrieval over them.

One interface, :class:`EpisodeStoreBackend` (and its parts :class:`EpisodeRetriever`,
:class:`HasTimeOrigin`); two backends: :class:`EpisodeStore` (the SQLite folder, the
embedded default: one robot, offline, the demo) and
:class:`~.postgres.PostgresEpisodeStore` (PostgreSQL + pgvector: a fleet, or months of
one robot). :func:`open_store` picks one from ``store_path``; code outside this package
calls it and sees only the interface. The files, one job each:

* :mod:`.interface`: the store interface as :class:`typing.Protocol` classes.
* :mod:`.factory`: :func:`open_store`, the backend chosen by the location's form.
* :mod:`.sqlite`: :class:`EpisodeStore`, the SQLite-folder backend: layout, durability, threads.
* :mod:`.folder`: the open folder under the store's lock: writer lock, database, meta, catalog.
* :mod:`.schema`: the SQL: tables, schema version and migrations, transactions, row statements.
* :mod:`.frame_files`: the durable JPEG folder ``frames/`` (fsynced writes, orphan cleaning).
* :mod:`.records`: :class:`EpisodeRecord`, :class:`RetrievalHit`, JPEG decoding, add checks.
* :mod:`.summary`: :class:`~surprise_memory.memory.store.summary.EpisodeSummary`, an episode
  in brief.
* :mod:`.catalog`: the live episodes in memory (index, ids, sizes) and the eviction choice.
* :mod:`.search`: the in-memory exact search, :class:`~.search.EmbeddingIndex` (matrix + filters).
* :mod:`.episode_index`: the folder store's search, :class:`~.episode_index.EpisodeIndex`
  (filters in RAM, candidates from :mod:`.ann`, exact re-ranking over frames read back).
* :mod:`.ann`: the folder store's on-disk episode index (usearch, memory-mapped segments).
* :mod:`.postgres`: the PostgreSQL backend (its own schema, row SQL and SQL search).
* :mod:`.migrate`: :func:`~.migrate.migrate_store`, copying a store between backends.
* :mod:`.fleet`: :class:`~.fleet.FleetStore`, a live robot's store when ``store_path`` names
  a server: committed on the robot first, delivered to the server by a sender.
* :mod:`.hits`: :class:`~.hits.RetrievalHits` (an answer that may be partial) and
  :func:`~.hits.merge_hits` (several stores' answers as one).

What a query is lives in :mod:`surprise_memory.memory.retrieval`.
"""

from surprise_memory.memory.store.factory import (
    describe_location,
    is_postgres_url,
    open_robot_store,
    open_store,
)
from surprise_memory.memory.store.hits import RetrievalHits, partial_of
from surprise_memory.memory.store.interface import (
    EpisodeRetriever,
    EpisodeStoreBackend,
    HasTimeOrigin,
    RetrievesByText,
)
from surprise_memory.memory.store.records import EpisodeRecord, RetrievalHit, decode_jpeg
from surprise_memory.memory.store.schema import DB_NAME, SCHEMA_VERSION
from surprise_memory.memory.store.sqlite import EpisodeStore

__all__ = [
    "DB_NAME",
    "SCHEMA_VERSION",
    "EpisodeRecord",
    "EpisodeRetriever",
    "EpisodeStore",
    "EpisodeStoreBackend",
    "HasTimeOrigin",
    "RetrievalHit",
    "RetrievalHits",
    "RetrievesByText",
    "decode_jpeg",
    "describe_location",
    "is_postgres_url",
    "open_robot_store",
    "open_store",
    "partial_of",
]
