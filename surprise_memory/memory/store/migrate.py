"""Copy a store to another location and backend: ``surprise-memory migrate SRC DST``.

:func:`migrate_store` copies every record of SRC (a folder or a PostgreSQL database), the
surprise episodes and the place keyframes alike, into DST (either, created if missing) with
:meth:`~surprise_memory.memory.store.interface.EpisodeStoreBackend.import_episodes`: the
record as it is (id, robot, stamps, pose, models, creation time), the JPEG bytes unchanged
and the stored embeddings unchanged, :data:`IMPORT_BATCH` episodes per transaction, no
budget applied, and the recording origin kept. :func:`migrate_stores` copies many SRC into
one DST opened once, and builds DST's approximate index after the last when it was missing
(a new fleet server: its HNSW index built once instead of taking each vector as it comes).

* **Resumable.** An episode whose id DST already holds is not copied again, so a
  migration that was interrupted (a killed process, a lost connection) is finished by
  running the same command again; each batch is in DST whole or not at all. The same
  migration run twice at once (a retry while the first still runs) also ends with both
  successful: an episode the other copied first is counted as skipped.
* **Verified.** At the end every episode of SRC is read again on both sides: each is in
  DST with the same checksum (:func:`episode_digest`: its fields, robot included, its JPEG
  bytes and its embeddings as DST keeps them, rounded to float16: the finest precision
  every backend keeps), else :class:`~surprise_memory.errors.StoreError` names the first
  difference. DST may hold more: a fleet store that several robots migrate into, one
  after another or at once, holds every robot's episodes, and each migration verifies its
  own.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from surprise_memory.config import StoreConfig
from surprise_memory.errors import StoreError
from surprise_memory.memory.pose_trust import trust_values
from surprise_memory.memory.store.base import EpisodeCopy
from surprise_memory.memory.store.camera_columns import camera_values
from surprise_memory.memory.store.embedding_codec import BLOB_DTYPES, decode_blobs, encode_blobs
from surprise_memory.memory.store.factory import describe_location, is_postgres_url, open_store
from surprise_memory.memory.store.interface import EpisodeStoreBackend

__all__ = [
    "IMPORT_BATCH",
    "MigrationReport",
    "episode_digest",
    "migrate_store",
    "migrate_stores",
    "store_digest",
]

_INT8 = BLOB_DTYPES["int8"]

IMPORT_BATCH = 64
"""Episodes copied per :meth:`~.base.StoreFront.import_episodes` (one transaction in
PostgreSQL): a robot's 8 frames of 640x480 JPEGs are about 0.5 MiB, so 32 MiB at a time."""


@dataclass(frozen=True)
class MigrationReport:
    """What a migration did and found.

    Attributes:
        source: SRC, as shown (no password).
        destination: DST, as shown.
        episodes: Episodes in SRC (and, verified, in DST, equal).
        copied: Episodes copied by this run.
        skipped: Episodes DST already held (a previous run).
        robots: Episodes per robot.
        checksum: SHA-256 over every episode's digest, in id order (equal on both sides).

    """

    source: str
    destination: str
    episodes: int
    copied: int
    skipped: int
    robots: dict[str, int]
    checksum: str


def episode_digest(store: EpisodeStoreBackend, episode_id: str, *, int8: bool = False) -> str:
    """SHA-256 of a record as stored: fields (camera, kind, place), JPEGs, float16 embeddings.

    Args:
        store: The store.
        episode_id: The episode.
        int8: Take the embeddings as an ``int8`` store keeps them first (a copy into one:
            its vectors read back give the same int8 again, so both sides agree).

    Raises:
        StoreError: No such episode, or reading failed.

    """
    rec = store.get(episode_id)
    p = rec.pose
    fields = [
        rec.id,
        rec.robot_id,
        rec.stamp_ns,
        rec.start_ns,
        rec.end_ns,
        [p.x, p.y, p.z, p.qx, p.qy, p.qz, p.qw, p.frame_id],
        rec.pose_valid,
        rec.surprise,
        None if math.isnan(rec.threshold) else rec.threshold,
        list(rec.frame_stamps_ns),
        rec.encoder_model,
        rec.encoder_pretrained,
        rec.embedder_model,
        rec.embedder_pretrained,
        rec.created_wall_ns,
        list(camera_values(rec.camera)),
        rec.kind,
        rec.place_key,
        list(trust_values(rec.pose_trust)),
    ]
    h = hashlib.sha256(json.dumps(fields).encode())
    for jpeg in rec.load_jpegs():
        h.update(hashlib.sha256(jpeg).digest())
    emb = store.embeddings(episode_id)
    if int8:
        emb = decode_blobs(encode_blobs(emb, _INT8), emb.shape[1], _INT8)
    h.update(np.ascontiguousarray(emb, dtype="<f2").tobytes())
    return h.hexdigest()


def store_digest(
    store: EpisodeStoreBackend, *, int8: bool = False
) -> tuple[dict[str, str], dict[str, int]]:
    """Every episode's digest by id (see :func:`episode_digest`), and the episodes per robot."""
    digests = {i: episode_digest(store, i, int8=int8) for i in store.episode_ids()}
    robots = Counter(store.get(i).robot_id for i in digests)
    return digests, dict(robots)


def _combined(digests: dict[str, str]) -> str:
    h = hashlib.sha256()
    for ep_id in sorted(digests):
        h.update(f"{ep_id}:{digests[ep_id]}\n".encode())
    return h.hexdigest()


def _copy(
    src: EpisodeStoreBackend, dst: EpisodeStoreBackend, ids: Sequence[str], origin: int | None
) -> int:
    """Copy the episodes ``ids`` at once, the index deferred; returns how many it copied.

    When the batch fails because another run copied one of them meanwhile (its id
    exists), each is copied alone, those already there skipped.

    Raises:
        StoreError: A copy failed for another reason.

    """
    copies = []
    for ep_id in ids:
        rec = src.get(ep_id)
        copies.append(EpisodeCopy(rec, rec.load_jpegs(), src.embeddings(ep_id)))
    try:
        dst.import_episodes(copies, origin_ns=origin, defer_index=True)
        return len(copies)
    except StoreError:
        if all(ep_id not in dst for ep_id in ids):
            raise
    done = 0
    for copy in copies:
        if copy.record.id in dst:
            continue
        try:
            dst.import_episode(copy.record, copy.jpegs, copy.embeddings, origin_ns=origin)
            done += 1
        except StoreError:
            if copy.record.id not in dst:
                raise
    return done


def migrate_store(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    config: StoreConfig | None = None,
    progress: Callable[[int, int], None] | None = None,
    batch: int = IMPORT_BATCH,
    build_index: bool = True,
) -> MigrationReport:
    """Copy SRC into DST, resumably, then verify counts and checksums.

    Args:
        source: A store folder or a PostgreSQL connection URI (opened read-only).
        destination: A folder or URI (created if missing); empty, or left by an earlier
            run of the same migration.
        config: DST's settings (JPEG quality is unused: JPEGs are copied as they are;
            ``embedding_dtype`` picks a SQLite DST's); the budget is not applied.
        progress: Called with (episodes done, episodes in all) after each batch.
        batch: Episodes copied at once (one transaction in PostgreSQL).
        build_index: Build DST's approximate index at the end if the copies deferred it
            (:meth:`~.base.StoreFront.build_deferred_index`); False = left missing until
            DST is next opened for writing.

    Returns:
        The report; every episode of SRC is in DST, equal, when it returns.

    Raises:
        StoreError: SRC and DST are the same, either cannot be opened, a copy fails, or
            the verification finds a difference (named in the message).
        EmbedderMismatchError: DST holds episodes of another embedder.

    """
    dst_name = describe_location(destination)
    _check_apart(source, dst_name)
    with open_store(destination, config) as dst:
        int8 = _int8(destination, config)
        report = _migrate_into(source, dst, dst_name, int8=int8, progress=progress, batch=batch)
        if build_index:
            dst.build_deferred_index()
    return report


def migrate_stores(
    sources: Sequence[str | os.PathLike[str]],
    destination: str | os.PathLike[str],
    *,
    config: StoreConfig | None = None,
    progress: Callable[[int, int, int], None] | None = None,
) -> list[MigrationReport | StoreError]:
    """Copy each SRC into DST in turn (:func:`migrate_store`), DST opened once.

    A fleet store loaded from many robots' folders: DST's approximate index, when it does
    not exist yet, is built once after the last copy, not grown one vector at a time.

    Args:
        sources: The stores to copy.
        destination: As for :func:`migrate_store`.
        config: As for :func:`migrate_store`.
        progress: Called with (index of the source, episodes done, episodes in all).

    Returns:
        Per source, its report, or the error that stopped it (the others went on).

    Raises:
        StoreError: DST cannot be opened, or building its index failed.
        EmbedderMismatchError: DST holds episodes of another embedder.

    """
    dst_name = describe_location(destination)
    int8 = _int8(destination, config)
    out: list[MigrationReport | StoreError] = []
    with open_store(destination, config) as dst:
        for n, source in enumerate(sources):

            def step(done: int, total: int, n: int = n) -> None:
                if progress is not None:
                    progress(n, done, total)

            try:
                _check_apart(source, dst_name)
                report = _migrate_into(
                    source, dst, dst_name, int8=int8, progress=step, batch=IMPORT_BATCH
                )
                out.append(report)
            except StoreError as exc:
                out.append(exc)
        dst.build_deferred_index()
    return out


def _check_apart(source: str | os.PathLike[str], dst_name: str) -> None:
    if describe_location(source) == dst_name:
        raise StoreError(f"source and destination are the same store: {dst_name}")


def _int8(destination: str | os.PathLike[str], config: StoreConfig | None) -> bool:
    """Whether DST keeps int8 rows (its digests then round SRC's vectors as it does)."""
    dtype = (config or StoreConfig()).embedding_dtype
    return not is_postgres_url(str(destination)) and dtype == "int8"


def _migrate_into(
    source: str | os.PathLike[str],
    dst: EpisodeStoreBackend,
    dst_name: str,
    *,
    int8: bool,
    progress: Callable[[int, int], None] | None,
    batch: int,
) -> MigrationReport:
    """Copy SRC into the open DST, then verify (:func:`migrate_store`'s body)."""
    src_name = describe_location(source)
    with open_store(source, read_only=True) as src:
        ids = src.episode_ids()
        origin = src.origin_ns
        held = set(dst.episode_ids())
        copied = skipped = 0
        for at in range(0, len(ids), batch):
            chunk = ids[at : at + batch]
            new = [i for i in chunk if i not in held]
            skipped += len(chunk) - len(new)
            done = _copy(src, dst, new, origin)
            copied += done
            skipped += len(new) - done  # the same migration, run at once, copied them first
            if progress is not None:
                progress(at + len(chunk), len(ids))
        if origin is not None:  # a store whose writer saw frames but kept no episode has one
            dst.note_origin(origin)
        want, robots = store_digest(src, int8=int8)
        # what the migration promises: every episode of SRC is in DST, equal; DST may hold
        # more (a fleet store that other robots' migrations fill, one after another or at once)
        have = {i: episode_digest(dst, i, int8=int8) for i in want if i in dst}
        dst_origin = dst.origin_ns
    for ep_id in sorted(want):
        if ep_id not in have:
            raise StoreError(f"episode {ep_id} is in {src_name} but not in {dst_name}")
        if want[ep_id] != have[ep_id]:
            raise StoreError(f"episode {ep_id} differs between {src_name} and {dst_name}")
    if origin is not None and (dst_origin is None or dst_origin > origin):
        raise StoreError(f"after copying, {dst_name}'s time origin is not {src_name}'s")
    return MigrationReport(
        source=src_name,
        destination=dst_name,
        episodes=len(want),
        copied=copied,
        skipped=skipped,
        robots=robots,
        checksum=_combined(want),
    )
