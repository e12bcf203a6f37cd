"""The PostgreSQL store's write transaction: one episode in, its robot's budget applied.

:func:`commit_episode` is the body of the one transaction of an add (and of an import by
``surprise-memory migrate``): claim the store's embedder, insert the rows, lower the
recording origin, count the robot's episodes (locking its row) and, for an add, evict
by :func:`~surprise_memory.memory.store.catalog.eviction_victims` until the robot is
within its budget; a place keyframe's add deletes instead its place's views beyond the
``place_history`` newest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from surprise_memory.config import StoreConfig
from surprise_memory.memory.places import PLACE
from surprise_memory.memory.store.catalog import StoreMeta, eviction_victims, over_budget
from surprise_memory.memory.store.postgres import rows
from surprise_memory.memory.store.records import EpisodeRecord

__all__ = ["HALF_BYTES", "commit_copies", "commit_episode"]

HALF_BYTES = 2
"""Bytes per stored embedding value (``halfvec``), counted by the budget."""


def commit_episode(
    conn: psycopg.Connection[Any],
    record: EpisodeRecord,
    embeddings: npt.NDArray[np.float32],
    jpegs: Sequence[bytes],
    *,
    budget: StoreConfig | None,
    origin_ns: int | None = None,
) -> StoreMeta:
    """Insert one episode inside the caller's transaction; returns ``meta`` as committed.

    Args:
        conn: The connection, inside a write transaction.
        record: The episode.
        embeddings: Its unit-norm embeddings, (frames, D), stored as ``halfvec``.
        jpegs: Its frames' JPEG bytes.
        budget: ``max_episodes`` / ``max_store_bytes`` to apply to the record's robot
            (``place_history`` to a place keyframe); None = none (an import copies a
            store as it is).
        origin_ns: An earlier recording start to keep (an imported store's origin).

    Raises:
        EmbedderMismatchError: The store holds another embedder (the caller's transaction
            is rolled back by the exception).
        psycopg.Error: A statement failed, e.g. the id exists (``UniqueViolation``).

    """
    dim = embeddings.shape[1]
    claim = StoreMeta().updates_for(record, dim)
    claim.pop("origin_ns")
    meta = StoreMeta(rows.claim_meta(conn, claim))
    meta.check_embedder(record.embedder_model, record.embedder_pretrained, dim)
    nbytes = sum(len(j) for j in jpegs) + embeddings.size * HALF_BYTES
    seq = rows.insert_episode(conn, record, embeddings, jpegs, nbytes=nbytes)
    place = record.kind == PLACE
    start = min(record.frame_stamps_ns, default=record.stamp_ns)
    start = min(start, record.stamp_ns)
    if origin_ns is not None:
        start = min(start, origin_ns)
    rows.lower_origin(conn, start)
    count, held = rows.add_robot_counts(
        conn, record.robot_id, episodes=1, frames=len(jpegs), nbytes=nbytes, place=place
    )
    if budget is not None and place:  # a place's views beyond place_history, not the budget
        rows.delete_episodes(conn, rows.surplus_views(conn, record, budget.place_history))
    elif budget is not None:
        limits = {"max_episodes": budget.max_episodes, "max_store_bytes": budget.max_store_bytes}
        if over_budget(count, held, **limits):
            sizes: dict[int, int] = {}
            order = rows.eviction_order(conn, record.robot_id, seq, sizes)
            victims = eviction_victims(order, sizes, count=count, total_bytes=held, **limits)
            rows.delete_episodes(conn, victims)
    return StoreMeta(rows.read_meta(conn))


def commit_copies(
    conn: psycopg.Connection[Any],
    records: Sequence[EpisodeRecord],
    units: Sequence[npt.NDArray[np.float32]],
    jpegs: Sequence[Sequence[bytes]],
    *,
    origin_ns: int | None = None,
) -> StoreMeta:
    """Insert many copied episodes inside the caller's transaction, no budget applied.

    What :func:`commit_episode` does for each, once for all: the embedder claimed and
    checked, the rows written with ``COPY`` (:func:`.rows.copy_episodes`), the origin
    lowered, each robot's counters added to.

    Raises:
        EmbedderMismatchError: A record's embedder differs from the store's (or another's).
        psycopg.Error: A statement failed, e.g. an id exists (``UniqueViolation``).

    """
    dim = units[0].shape[1]
    claim = StoreMeta().updates_for(records[0], dim)
    claim.pop("origin_ns")
    meta = StoreMeta(rows.claim_meta(conn, claim))
    for rec, unit in zip(records, units, strict=True):
        meta.check_embedder(rec.embedder_model, rec.embedder_pretrained, unit.shape[1])
    nbytes = [
        sum(len(j) for j in f) + u.size * HALF_BYTES for f, u in zip(jpegs, units, strict=True)
    ]
    rows.copy_episodes(conn, records, units, jpegs, nbytes)
    starts = [min(min(r.frame_stamps_ns, default=r.stamp_ns), r.stamp_ns) for r in records]
    rows.lower_origin(conn, min([*starts, *([origin_ns] if origin_ns is not None else [])]))
    counts: Counter[tuple[str, bool]] = Counter()
    frames: Counter[tuple[str, bool]] = Counter()
    sizes: Counter[tuple[str, bool]] = Counter()
    for rec, files, size in zip(records, jpegs, nbytes, strict=True):
        group = (rec.robot_id, rec.kind == PLACE)
        counts[group] += 1
        frames[group] += len(files)
        sizes[group] += size
    for (robot, place), n in sorted(counts.items()):
        group = (robot, place)
        rows.add_robot_counts(
            conn, robot, episodes=n, frames=frames[group], nbytes=sizes[group], place=place
        )
    return StoreMeta(rows.read_meta(conn))
