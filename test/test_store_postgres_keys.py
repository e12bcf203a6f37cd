"""Schema 8 of the PostgreSQL store: the robot id in every key (issue 49).

A distributed PostgreSQL (Citus) shards a table by one column and needs it in every unique
key and foreign key; these tests check that every key holds ``robot_id``, that a schema-7
store with rows migrates to exactly what a new store creates with nothing lost, that an id
stays unique across robots, and that robots' fleet senders on either side of the upgrade
keep their episodes and say why they wait. Real PostgreSQL + pgvector throughout.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fleet_helpers import DIM, NS, Robot, server_ids, wait_until
from store_backends import new_database
from test_store_postgres import _sql, as_schema_7

import surprise_memory.memory.store.postgres.schema as pg_schema
from surprise_memory.errors import StoreError
from surprise_memory.memory.snapshot import SnapshotNote
from surprise_memory.memory.store import EpisodeStoreBackend, open_store
from surprise_memory.memory.store.base import EpisodeCopy
from surprise_memory.memory.store.fleet.link import fleet_findings
from surprise_memory.memory.store.migrate import episode_digest
from surprise_memory.perception.frames import Frame

_KEYS = (
    "SELECT c.conrelid::regclass::text, c.contype, pg_get_constraintdef(c.oid) "
    "FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace "
    "WHERE n.nspname = 'surprise_memory' AND c.contype IN ('p', 'u', 'f') ORDER BY 1, 2, 3"
)
_EPISODE_TABLES = ("frames", "embeddings", "episode_vectors", "snapshots")


def _add(store: EpisodeStoreBackend, episode_id: str, k: int, robot_id: str) -> str:
    """Episode ``k`` of ``robot_id``: 8 noise frames, random embeddings."""
    rng = np.random.default_rng(k)
    frames = [
        Frame(rng.integers(0, 255, (12, 16, 3), dtype=np.uint8), k * NS + i) for i in range(8)
    ]
    return store.add(
        frames,
        rng.normal(size=(8, DIM)),
        stamp_ns=k * NS,
        surprise=1.0,
        embedder_model="m",
        embedder_pretrained=True,
        episode_id=episode_id,
        robot_id=robot_id,
    ).id


def _fill(url: str, robots: tuple[str, ...], per_robot: int) -> list[str]:
    """Episodes of each robot through the public add, a snapshot note on the first."""
    with open_store(url) as store:
        ids = [_add(store, f"{robot}-{k}", k, robot) for k in range(per_robot) for robot in robots]
        store.note_snapshot([ids[0]], SnapshotNote("event", 1, 2, True, "recorded"))
    return ids


def _robots(url: str) -> list[tuple[object, ...]]:
    return _sql(url, "SELECT * FROM surprise_memory.robots ORDER BY robot_id")


def test_every_key_of_a_new_store_holds_the_robot_id(pg_url: str) -> None:
    _fill(pg_url, ("r1",), 1)
    keys = _sql(pg_url, _KEYS)
    tables = {t for t, _, _ in keys}
    assert {f"surprise_memory.{t}" for t in (*_EPISODE_TABLES, "episodes")} <= tables
    for table, kind, definition in keys:
        if table == "surprise_memory.meta":  # the store's settings: no robot's rows
            continue
        assert "robot_id" in str(definition), (table, kind, definition)
    foreign = [str(d) for t, k, d in keys if k == "f"]
    assert len(foreign) == len(_EPISODE_TABLES) and all(
        d.startswith("FOREIGN KEY (episode_seq, robot_id) REFERENCES surprise_memory.episodes")
        for d in foreign
    ), foreign


def test_a_schema_7_store_with_rows_migrates_and_keeps_every_episode(
    pg_server: Any, pg_url: str
) -> None:
    ids = _fill(pg_url, ("r1", "r2", "r3"), 3)
    with open_store(pg_url, read_only=True) as store:
        before = {i: episode_digest(store, i) for i in ids}
        notes = store.snapshot_notes(ids)
    counts = _robots(pg_url)
    as_schema_7(pg_url)
    old_keys = [d for t, _, d in _sql(pg_url, _KEYS) if t != "surprise_memory.robots"]
    assert "robot_id" not in str(old_keys)  # what schema 7 wrote
    with pytest.raises(StoreError, match="needs migrating"):
        open_store(pg_url, read_only=True)
    with open_store(pg_url) as store:
        assert {i: episode_digest(store, i) for i in ids} == before
        assert _robots(pg_url) == counts
        assert store.snapshot_notes(ids) == notes and notes
        assert store.delete([ids[0]]) == 1  # its frames, vectors and note go with it
    left = _sql(
        pg_url,
        "SELECT (SELECT count(*) FROM surprise_memory.frames), "
        "(SELECT count(*) FROM surprise_memory.embeddings), "
        "(SELECT count(*) FROM surprise_memory.episode_vectors), "
        "(SELECT count(*) FROM surprise_memory.snapshots)",
    )
    assert left == [(8 * 8, 8 * 8, 8, 0)]
    # the migrated keys are exactly those a new store gets
    fresh = new_database(pg_server)
    _fill(fresh, ("r1",), 1)
    assert _sql(pg_url, _KEYS) == _sql(fresh, _KEYS)
    assert _sql(pg_url, "SELECT value FROM surprise_memory.meta WHERE key = 'schema_version'") == [
        (str(pg_schema.SCHEMA_VERSION),)
    ]


def test_an_id_another_robot_holds_is_refused_and_nothing_of_it_is_kept(pg_url: str) -> None:
    with open_store(pg_url) as store:
        _add(store, "shared-id", 1, "r1")
        counts = _robots(pg_url)
        with pytest.raises(StoreError, match=r"shared-id is already in the store \(robot 'r1'\)"):
            _add(store, "shared-id", 2, "r2")
        copies = [
            EpisodeCopy(store.get(i), store.get(i).load_jpegs(), store.embeddings(i))
            for i in ("shared-id",)
        ]
        other = dataclasses.replace(copies[0].record, id="new-id", robot_id="r3")
        batch = [EpisodeCopy(other, copies[0].jpegs, copies[0].embeddings)]
        batch.append(copies[0]._replace(record=dataclasses.replace(other, id="shared-id")))
        with pytest.raises(StoreError, match="shared-id is already in the store"):
            store.import_episodes(batch)  # one transaction: new-id is not kept either
        assert store.episode_ids() == ["shared-id"] and _robots(pg_url) == counts
    assert _sql(pg_url, "SELECT count(*) FROM surprise_memory.frames") == [(8,)]


def test_fleet_senders_on_either_side_of_the_upgrade(
    tmp_path: Path, pg_server: Any, pg_url: str
) -> None:
    """A robot whose code is older than the server's schema keeps its episodes and says
    why; a robot whose code is newer migrates a schema-7 server holding others' rows."""
    old_rows = _fill(pg_url, ("r0",), 2)
    with open_store(pg_url, read_only=True) as store:
        digests = {i: episode_digest(store, i) for i in old_rows}
    as_schema_7(pg_url)
    # a new robot against the old server: its first delivery migrates it, others' rows kept
    new = Robot(tmp_path, pg_url, "r1")
    try:
        new.add(0)
        assert wait_until(new.delivered, 30.0), new.store.status()
    finally:
        new.store.close()
    assert server_ids(pg_url) == [*old_rows, "r1-0"]
    with open_store(pg_url, read_only=True) as store:
        assert {i: episode_digest(store, i) for i in old_rows} == digests
    # an old robot against a newer server: the server is a schema ahead of this code
    ahead = str(pg_schema.SCHEMA_VERSION + 1)
    _sql(pg_url, f"UPDATE surprise_memory.meta SET value = '{ahead}' WHERE key = 'schema_version'")
    old = Robot(tmp_path, pg_url, "r2")
    try:
        records = [old.add(k) for k in range(2)]  # committed on the robot at once
        assert wait_until(lambda: bool(old.store.status().link.refused), 20.0)
        status = old.store.status()
        assert status.backlog.episodes == 2
        said = " ".join(f.reason for f in fleet_findings(status, 0) if f is not None)
        assert f"schema version {ahead} is newer than this code's" in said, said
        assert "update surprise_memory" in said
        # the robot is updated (here: the server back at this code's schema): delivered
        _sql(
            pg_url,
            f"UPDATE surprise_memory.meta SET value = '{pg_schema.SCHEMA_VERSION}' "
            "WHERE key = 'schema_version'",
        )
        assert wait_until(old.delivered, 30.0), old.store.status()
    finally:
        old.store.close()
    assert server_ids(pg_url)[-2:] == [r.id for r in records]
    assert old.not_sent == []
