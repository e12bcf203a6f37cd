"""The episode store on both backends: round trip, validation, budget, threads, kill -9.

Tests taking ``store_location`` run twice: on the SQLite folder and on a PostgreSQL
database of a real server (``store_backends.pg_server``). The SQLite folder's own layout
(WAL, schema pragma, writer lock, orphan files) is tested here too; the PostgreSQL
schema, migrations, many writers and the approximate index in test_store_postgres.py.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import surprise_memory.memory.store.schema as store_mod
from surprise_memory.config import ConfigError, StoreConfig
from surprise_memory.errors import InputError, StoreError
from surprise_memory.memory.camera_view import CameraView, mounting_pose
from surprise_memory.memory.pose import Pose, compose
from surprise_memory.memory.retrieval import EmbedderMismatchError, RetrievalQuery
from surprise_memory.memory.snapshot import SnapshotNote
from surprise_memory.memory.store import (
    DB_NAME,
    EpisodeStore,
    EpisodeStoreBackend,
    is_postgres_url,
    open_store,
)
from surprise_memory.memory.store.camera_columns import CAMERA_COLUMN_TYPES
from surprise_memory.memory.store.records import host_robot_id, host_session_id
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
DIM = 16
MODEL = "PE-Core-L-14-336"
ROOT = Path(__file__).resolve().parents[1]


def _frames(rng: np.random.Generator, t0: int, n: int = 8, hw: tuple[int, int] = (24, 32)):
    # smooth images so JPEG round trips stay close to the original
    base = rng.integers(0, 256, size=(1, 1, 3))
    ramp = np.linspace(0, 60, hw[1])[None, :, None]
    return [
        Frame(np.clip(base + ramp + 5 * i, 0, 255).astype(np.uint8), t0 + i * S // 10)
        for i in range(n)
    ]


def _add(store: EpisodeStoreBackend, rng: np.random.Generator, i: int, surprise: float = 1.0, **kw):
    frames = kw.pop("frames") if "frames" in kw else _frames(rng, i * S)
    emb = kw.pop("embeddings", None)
    if emb is None:
        emb = rng.standard_normal((len(frames), DIM))
    kw.setdefault("embedder_model", MODEL)
    kw.setdefault("embedder_pretrained", True)
    return store.add(frames, emb, stamp_ns=i * S + 3 * S // 10, surprise=surprise, **kw)


def _store_files(path: Path) -> set[str]:
    return {p.name for p in (path / "frames").iterdir()}


def _held_frames(location: str) -> set[str]:
    """Episodes whose frames the store holds: frame folders, or frame rows in PostgreSQL."""
    if not is_postgres_url(location):
        return _store_files(Path(location))
    import psycopg

    with psycopg.connect(location) as conn:
        rows = conn.execute(
            "SELECT DISTINCT e.id FROM surprise_memory.frames f "
            "JOIN surprise_memory.episodes e ON e.seq = f.episode_seq"
        ).fetchall()
    return {r[0] for r in rows}


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("pose", [None, Pose(1.0, -2.0, 0.5, 0.0, 0.0, 0.7071, 0.7071, "map")])
def test_round_trip_survives_reopen(store_location: str, dtype: str, pose: Pose | None) -> None:
    rng = np.random.default_rng(1)
    frames = _frames(rng, 5 * S)
    emb = rng.standard_normal((8, DIM)).astype(np.float32)
    cfg = StoreConfig(embedding_dtype=dtype, robot_id="rover-1")
    with open_store(store_location, cfg) as store:
        rec = store.add(
            frames,
            emb,
            stamp_ns=5 * S + 3,
            surprise=2.5,
            threshold=1.25,
            pose=pose,
            embedder_model=MODEL,
            embedder_pretrained=False,
            encoder_model="facebook/vjepa2-vitl-fpc64-256",
            episode_id="golf-cart_1",
        )
    with open_store(store_location, cfg, read_only=True) as store:
        got = store.get("golf-cart_1")
        assert got == rec
        assert got.robot_id == "rover-1"
        assert got.pose_valid is (pose is not None)
        assert got.pose == (pose or Pose())
        assert (got.start_ns, got.end_ns) == (frames[0].stamp_ns, frames[-1].stamp_ns)
        assert got.frame_stamps_ns == tuple(f.stamp_ns for f in frames)
        assert got.frame_paths == tuple(f"frames/golf-cart_1/{i:02d}.jpg" for i in range(8))
        assert (got.embedder_model, got.embedder_pretrained) == (MODEL, False)
        assert store.embedding_dim == DIM and store.embedder_pretrained is False
        images = got.load_images()
        for img, fr in zip(images, frames, strict=True):
            assert img.shape == fr.rgb.shape and img.dtype == np.uint8
            assert np.abs(img.astype(int) - fr.rgb).mean() < 3.0
        unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
        # PostgreSQL keeps halfvec (float16) whatever embedding_dtype says
        half = dtype == "float16" or is_postgres_url(store_location)
        tol = 2e-3 if half else 1e-6
        np.testing.assert_allclose(store.embeddings("golf-cart_1"), unit, atol=tol)


def test_database_is_wal_with_a_schema_version(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    with EpisodeStore(tmp_path) as store:
        _add(store, rng, 0)
        conn = sqlite3.connect(tmp_path / DB_NAME)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"episodes", "frames", "embeddings", "meta"} <= tables
        assert conn.execute("SELECT dim, dtype FROM embeddings LIMIT 1").fetchone() == (DIM, "<f2")
        conn.close()


def test_a_new_database_has_16_kib_pages_and_an_old_one_keeps_its_own(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    with EpisodeStore(tmp_path / "new") as store:
        _add(store, rng, 0)
    conn = sqlite3.connect(tmp_path / "new" / DB_NAME)
    assert conn.execute("PRAGMA page_size").fetchone()[0] == store_mod.PAGE_SIZE == 16384
    conn.close()
    # a store written before (SQLite's 4 KiB pages) opens, takes episodes and keeps its pages
    old = tmp_path / "old"
    old.mkdir()
    conn = sqlite3.connect(old / DB_NAME)
    conn.execute("PRAGMA page_size = 4096")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    with EpisodeStore(old) as store:
        _add(store, rng, 1)
        _add(store, rng, 2)
        assert len(store) == 2
    conn = sqlite3.connect(old / DB_NAME)
    assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096
    conn.close()


def test_newer_schema_is_refused_and_foreign_db_is_refused(tmp_path: Path) -> None:
    EpisodeStore(tmp_path / "a").close()
    conn = sqlite3.connect(tmp_path / "a" / DB_NAME)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreError, match="schema version 99 is newer"):
        EpisodeStore(tmp_path / "a")
    (tmp_path / "b").mkdir()
    conn = sqlite3.connect(tmp_path / "b" / DB_NAME)
    conn.execute("CREATE TABLE other (x)")
    conn.close()
    with pytest.raises(StoreError, match="not an episode store"):
        EpisodeStore(tmp_path / "b")


def test_migration_path_runs_each_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    with EpisodeStore(tmp_path) as store:
        rec = _add(store, rng, 0)
    v = store_mod.SCHEMA_VERSION

    def next_step(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE episodes ADD COLUMN note TEXT NOT NULL DEFAULT ''")

    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", v + 1)
    monkeypatch.setattr(store_mod, "_MIGRATIONS", {**store_mod._MIGRATIONS, v: next_step})
    with pytest.raises(StoreError, match="needs migrating"):
        EpisodeStore(tmp_path, read_only=True)
    with EpisodeStore(tmp_path) as store:
        assert store.get(rec.id) == rec
    conn = sqlite3.connect(tmp_path / DB_NAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == v + 1
    assert conn.execute("SELECT note FROM episodes").fetchone() == ("",)
    conn.close()
    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", v + 2)
    with pytest.raises(StoreError, match=f"no migration from schema version {v + 1} to {v + 2}"):
        EpisodeStore(tmp_path)


def test_schema_versions_are_origin_then_robot_id_then_snapshots_then_session_id() -> None:
    """Version 2 moved the origin to the first frame (issue 13), version 3 added robot ids,
    version 4 the snapshot notes (issue 30), version 5 session ids (issue 29), version 6
    the episode's camera (issue 42), version 7 the record's kind and place (issue 47),
    version 8 the pose's uncertainty and map (issue 48)."""
    assert store_mod.SCHEMA_VERSION == 8
    assert sorted(store_mod._MIGRATIONS) == [1, 2, 3, 4, 5, 6, 7]


def test_time_origin_is_the_first_frame_seen_and_persisted(store_location: str) -> None:
    rng = np.random.default_rng(0)
    with open_store(store_location) as store:
        assert store.origin_ns is None
        # a store never told of a frame: the first frame of its earliest episode
        _add(store, rng, 40)
        assert store.origin_ns == 40 * S
        store.note_origin(35 * S)  # the writer's first frame, 5 s before that episode
        store.note_origin(38 * S)  # later frames never move it
        assert store.origin_ns == 35 * S
        _add(store, rng, 36)  # an episode after the origin leaves it alone
        store.delete(store.episode_ids())  # eviction keeps it
        with pytest.raises(InputError, match="must be >= 0"):
            store.note_origin(-1)
        with pytest.raises(InputError, match="integer number of nanoseconds"):
            store.note_origin(1.5)  # type: ignore[arg-type]
    with open_store(store_location, read_only=True) as store:
        assert store.origin_ns == 35 * S
        with pytest.raises(StoreError, match="read-only"):
            store.note_origin(S)
    with open_store(store_location) as store:
        store.note_origin(0)  # a video's first frame is at 0 ns: a valid origin
        assert store.origin_ns == 0
    with open_store(store_location, read_only=True) as store:
        assert store.origin_ns == 0


def as_version_7(db: Path) -> None:
    """Turn a store's database back into what schema version 7 wrote (no pose trust)."""
    conn = sqlite3.connect(db)
    conn.execute("ALTER TABLE episodes DROP COLUMN map_id")
    conn.execute("ALTER TABLE episodes DROP COLUMN pose_sigma_m")
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()


def as_version_6(db: Path) -> None:
    """Turn a store's database back into what schema version 6 wrote (no kinds, no places)."""
    as_version_7(db)
    conn = sqlite3.connect(db)
    conn.execute("DROP INDEX episodes_place")
    conn.execute("ALTER TABLE episodes DROP COLUMN place_key")
    conn.execute("ALTER TABLE episodes DROP COLUMN kind")
    conn.execute("PRAGMA user_version = 6")
    conn.commit()
    conn.close()


def _as_version_5(db: Path) -> None:
    """Turn a store's database back into what schema version 5 wrote (no cameras)."""
    as_version_6(db)
    conn = sqlite3.connect(db)
    for name, _, _ in CAMERA_COLUMN_TYPES:
        conn.execute(f"ALTER TABLE episodes DROP COLUMN {name}")
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()


def _as_version_4(db: Path) -> None:
    """Turn a store's database back into what schema version 4 wrote (no session ids)."""
    _as_version_5(db)
    conn = sqlite3.connect(db)
    conn.execute("ALTER TABLE episodes DROP COLUMN session_id")
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.close()


def test_snapshot_notes_are_kept_per_episode_and_kind(store_location: str) -> None:
    """A bag recorder's answers (issue 30): one note per episode and kind, gone with it."""
    rng = np.random.default_rng(0)
    asked = SnapshotNote("event", 5 * S, 6 * S, True)
    failed = SnapshotNote("aftermath", 7 * S, 0, False, "no recorder serves /x/snapshot")
    with open_store(store_location) as store:
        a, b, c = (_add(store, rng, t).id for t in (10, 20, 30))
        assert store.note_snapshot([a, b, "ep-gone"], asked) == 2  # an evicted one is skipped
        assert store.note_snapshot([a], failed) == 1
        again = SnapshotNote("event", 8 * S, 9 * S, True)
        assert store.note_snapshot([b], again) == 1  # one per kind: the later call replaces
        assert store.snapshot_notes([a, b, c]) == {a: [asked, failed], b: [again]}
        store.delete([a])
        assert store.snapshot_notes([a, b]) == {b: [again]}
    with open_store(store_location, read_only=True) as store:
        assert store.snapshot_notes([b]) == {b: [again]}
        with pytest.raises(StoreError, match="read-only"):
            store.note_snapshot([b], asked)
    with pytest.raises(InputError, match="snapshot kind"):
        SnapshotNote("later", 0, 0, True)  # type: ignore[arg-type]


def _as_version_1(db: Path, origin_ns: int | None = None) -> None:
    """Turn a store's database back into what schema version 1 wrote."""
    _as_version_4(db)
    conn = sqlite3.connect(db)
    conn.execute("DROP TABLE snapshots")  # version 4's table
    conn.execute("DROP INDEX episodes_robot")  # version 3's column
    conn.execute("ALTER TABLE episodes DROP COLUMN robot_id")
    if origin_ns is not None:  # version 1's origin: the earliest trigger stamp
        conn.execute("UPDATE meta SET value = ? WHERE key = 'origin_ns'", (str(origin_ns),))
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()


def test_version_1_store_migrates_its_origin_to_the_first_frame(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    with EpisodeStore(tmp_path) as store:
        _add(store, rng, 50)
        _add(store, rng, 20)
    _as_version_1(tmp_path / DB_NAME, origin_ns=20 * S + 3 * S // 10)
    with EpisodeStore(tmp_path) as store:
        assert store.origin_ns == 20 * S  # the first stored frame, 0.3 s before that trigger
    conn = sqlite3.connect(tmp_path / DB_NAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION
    conn.close()


@pytest.mark.parametrize("version", [1, 2])
def test_older_store_gains_robot_ids(tmp_path: Path, version: int) -> None:
    """A store from before robot ids (schema 1 or 2) opens with this host's id on its episodes."""
    rng = np.random.default_rng(0)
    with EpisodeStore(tmp_path) as store:
        rec = _add(store, rng, 0)
    _as_version_1(tmp_path / DB_NAME)
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute(f"PRAGMA user_version = {version:d}")
    conn.commit()
    conn.close()
    with EpisodeStore(tmp_path) as store:
        got = store.get(rec.id)
        assert got.robot_id == host_robot_id() and got.session_id == ""  # unknown
        assert got == dataclasses.replace(rec, session_id="")
        assert [h.episode.id for h in store.search(robot_id=host_robot_id())] == [rec.id]
        assert store.search(robot_id="someone-else") == []
        assert store.origin_ns == 0  # the first frame of episode 0
    conn = sqlite3.connect(tmp_path / DB_NAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION
    conn.close()


def test_version_4_store_gains_unknown_session_ids(tmp_path: Path) -> None:
    """A store from before session ids opens; its episodes' session is unknown (""), new
    episodes get this machine's (or the one given)."""
    rng = np.random.default_rng(0)
    with EpisodeStore(tmp_path) as store:
        old = _add(store, rng, 0)
    assert old.session_id == host_session_id() and old.session_id.startswith("boot-")
    _as_version_4(tmp_path / DB_NAME)
    with pytest.raises(StoreError, match="needs migrating"):
        EpisodeStore(tmp_path, read_only=True)
    with EpisodeStore(tmp_path) as store:
        assert store.get(old.id) == dataclasses.replace(old, session_id="")
        new = _add(store, rng, 10)
        given = store.add(
            [Frame(np.zeros((8, 8, 3), np.uint8), 20 * S)],
            rng.standard_normal((1, DIM)),
            stamp_ns=20 * S,
            surprise=1.0,
            embedder_model=MODEL,
            embedder_pretrained=True,
            session_id="boot-elsewhere",
        )
        with pytest.raises(InputError, match="session_id"):
            store.add(
                [Frame(np.zeros((8, 8, 3), np.uint8), 30 * S)],
                rng.standard_normal((1, DIM)),
                stamp_ns=30 * S,
                surprise=1.0,
                embedder_model=MODEL,
                embedder_pretrained=True,
                session_id="two words",
            )
    with EpisodeStore(tmp_path, read_only=True) as store:
        assert store.get(new.id).session_id == host_session_id()
        assert store.get(given.id).session_id == "boot-elsewhere"
    conn = sqlite3.connect(tmp_path / DB_NAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION
    conn.close()


def test_version_5_store_opens_with_one_unnamed_camera(tmp_path: Path) -> None:
    """A store from before cameras (schema 5) opens: its episodes were seen by one unnamed
    camera whose pose is unknown; new episodes keep theirs (issue 42)."""
    rng = np.random.default_rng(0)
    with EpisodeStore(tmp_path) as store:
        old = _add(store, rng, 0)
    _as_version_5(tmp_path / DB_NAME)
    with pytest.raises(StoreError, match="needs migrating"):
        EpisodeStore(tmp_path, read_only=True)
    with EpisodeStore(tmp_path) as store:
        got = store.get(old.id)
        assert got == old and got.camera == CameraView("", "", None)
        assert [h.episode.id for h in store.search(camera="")] == [old.id]
        new = _add(store, rng, 10, camera=FRONT)
        assert [h.episode.id for h in store.search(camera="front")] == [new.id]
    with EpisodeStore(tmp_path, read_only=True) as store:
        assert store.get(new.id).camera == FRONT
    conn = sqlite3.connect(tmp_path / DB_NAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION
    conn.close()


FRONT = CameraView("front", "front_optical", Pose(1.0, 2.0, 0.5, -0.5, 0.5, -0.5, 0.5, "map"))
REAR = CameraView(
    "rear", "rear_optical", compose(Pose(1.0, 2.0, frame_id="map"), mounting_pose(180))
)


def test_episodes_keep_their_camera_and_are_found_by_it(store_location: str) -> None:
    """The camera's name, optical frame and pose travel with the episode; a query may ask
    for one camera; the summaries give the viewing direction for a map (issue 42)."""
    rng = np.random.default_rng(1)
    with open_store(store_location) as store:
        front = _add(store, rng, 0, camera=FRONT, pose=Pose(1.0, 2.0, 0.0, frame_id="map"))
        rear = _add(store, rng, 1, camera=REAR)
        unnamed = _add(store, rng, 2, camera=CameraView(frame_id="cam"))
        assert store.get(front.id).camera == FRONT and store.get(rear.id).camera == REAR
        assert store.get(unnamed.id).camera == CameraView("", "cam", None)
        for camera, want in (("front", [front]), ("rear", [rear]), ("", [unnamed])):
            assert [h.episode.id for h in store.search(camera=camera)] == [r.id for r in want]
        assert store.search(camera="left") == []
        q = rng.standard_normal(DIM)
        hits = store.search(embedding=q, embedder_model=MODEL, camera="rear")
        assert [h.episode.id for h in hits] == [rear.id]
        yaws = {s.id: (s.camera, s.view_yaw) for s in store.summaries()}
        assert yaws[front.id] == ("front", pytest.approx(0.0, abs=1e-9))  # looks along +x
        assert yaws[rear.id][0] == "rear" and yaws[rear.id][1] == pytest.approx(np.pi)
        assert yaws[unnamed.id][0] == "" and np.isnan(yaws[unnamed.id][1])
        with pytest.raises(InputError, match="camera name"):
            _add(store, rng, 3, camera=CameraView("9x"))
        with pytest.raises(InputError, match="camera pose"):
            _add(store, rng, 4, camera=CameraView("x", pose=Pose(float("nan"))))
        with pytest.raises(InputError, match="camera="):
            RetrievalQuery(camera="front left")


def test_one_writer_and_read_only_readers(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    with EpisodeStore(tmp_path) as writer:
        rec = _add(writer, rng, 0)
        with pytest.raises(StoreError, match="open for writing in another process"):
            EpisodeStore(tmp_path)
        with EpisodeStore(tmp_path, read_only=True) as reader:
            assert reader.episode_ids() == [rec.id]
            with pytest.raises(StoreError, match="read-only"):
                _add(reader, rng, 1)
    with pytest.raises(StoreError, match="no episode store here"):
        EpisodeStore(tmp_path / "missing", read_only=True)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"frames": []}, InputError, "at least one frame"),
        ({"embeddings": np.ones((7, DIM))}, InputError, "7 embeddings for 8 frames"),
        ({"embeddings": np.full((8, DIM), np.nan)}, InputError, "NaN"),
        ({"embeddings": np.zeros((8, DIM))}, InputError, "all zeros"),
        ({"embeddings": np.ones(DIM)}, InputError, r"expected \(frames, D\)"),
        ({"episode_id": "../escape"}, InputError, "episode_id="),
        ({"episode_id": ".hidden"}, InputError, "episode_id="),
        ({"episode_id": "first"}, StoreError, "already in the store"),
        ({"surprise": float("nan")}, InputError, "surprise=nan"),
        ({"embedder_model": ""}, InputError, "embedder_model"),
        ({"pose": (1.0, 2.0, 3.0)}, InputError, "expected surprise_memory.memory.pose.Pose"),
        ({"pose": Pose(x=float("nan"))}, InputError, "must be finite"),
        ({"pose": Pose(qw=0.0)}, InputError, "zero quaternion"),
        ({"embedder_model": "other"}, EmbedderMismatchError, "cannot join a store of"),
        ({"embedder_pretrained": False}, EmbedderMismatchError, "pretrained=False"),
        ({"embeddings": np.ones((8, DIM + 1))}, EmbedderMismatchError, "dim=17"),
    ],
)
def test_bad_adds_raise_and_change_nothing(
    store_location: str, change: dict[str, object], error: type[Exception], match: str
) -> None:
    rng = np.random.default_rng(0)
    with open_store(store_location) as store:
        _add(store, rng, 0, episode_id="first")
        before = (_held_frames(store_location), store.total_bytes, len(store))
        with pytest.raises(error, match=match):
            _add(store, rng, 1, **change)
        assert (_held_frames(store_location), store.total_bytes, len(store)) == before


@pytest.mark.parametrize(
    ("frames", "match"),
    [
        ([Frame(np.zeros((4, 4, 3), np.uint8), -1)], "stamp_ns=-1"),
        (
            [Frame(np.zeros((4, 4, 3), np.uint8), 5), Frame(np.zeros((4, 4, 3), np.uint8), 4)],
            "order",
        ),
        (["not a frame"], "expected surprise_memory.Frame"),
    ],
)
def test_bad_frames_are_refused(store_location: str, frames: list[Frame], match: str) -> None:
    with open_store(store_location) as store, pytest.raises(InputError, match=match):
        store.add(
            frames,
            np.ones((len(frames), DIM)),
            stamp_ns=1,
            surprise=1.0,
            embedder_model=MODEL,
            embedder_pretrained=True,
        )


def _expected_survivors(
    surprises: list[float], max_episodes: int, sizes: list[int] | None = None, max_bytes: int = 0
) -> list[int]:
    """The documented policy, replayed by hand: lowest surprise, then oldest, never the new one."""
    kept: list[int] = []
    for i in range(len(surprises)):
        kept.append(i)

        def over(k: list[int]) -> bool:
            n_over = max_episodes > 0 and len(k) > max_episodes
            b_over = max_bytes > 0 and sum(sizes[j] for j in k) > max_bytes  # type: ignore[index]
            return n_over or b_over

        while over(kept):
            others = [j for j in kept if j != i]
            if not others:
                break
            kept.remove(min(others, key=lambda j: (surprises[j], j)))
    return kept


@pytest.mark.parametrize(
    ("surprises", "max_episodes"),
    [
        ([1.0, 2.0, 3.0, 4.0, 5.0], 3),
        ([5.0, 4.0, 3.0, 2.0, 1.0], 3),  # each new one is the lowest: it survives its own add
        ([2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 3.0], 4),
        ([1.0, 1.0, 1.0, 1.0], 2),  # equal surprise: oldest first
        ([3.0, 1.0], 1),
    ],
)
def test_episode_budget_evicts_lowest_surprise_oldest_first(
    store_location: str, surprises: list[float], max_episodes: int
) -> None:
    rng = np.random.default_rng(0)
    cfg = StoreConfig(max_episodes=max_episodes)
    with open_store(store_location, cfg) as store:
        ids = [_add(store, rng, i, surprise=s).id for i, s in enumerate(surprises)]
        assert ids[-1] in store
        expected = [ids[j] for j in _expected_survivors(surprises, max_episodes)]
        assert store.episode_ids() == expected
    assert _held_frames(store_location) == set(expected)
    with open_store(store_location, cfg) as store:
        assert store.episode_ids() == expected
        got = store.retrieve(RetrievalQuery(max_results=10))
        assert sorted(h.episode.id for h in got) == sorted(expected)


def test_byte_budget_counts_jpegs_and_embeddings_and_keeps_the_new_one(
    new_location: Callable[[], str],
) -> None:
    rng = np.random.default_rng(3)
    surprises = [4.0, 1.0, 3.0, 2.0, 0.5, 5.0, 0.1]
    data = [(_frames(rng, i * S), rng.standard_normal((8, DIM))) for i in range(len(surprises))]
    sizes = []
    with open_store(new_location()) as probe:  # same data, no budget: each one's size
        for i, (fr, emb) in enumerate(data):
            before = probe.total_bytes
            rec = _add(probe, rng, i, frames=fr, embeddings=emb)
            sizes.append(probe.total_bytes - before)
            stored = sum(len(j) for j in rec.load_jpegs()) + 8 * DIM * 2
            assert sizes[-1] == stored
    max_bytes = int(2.5 * np.mean(sizes))
    with open_store(new_location(), StoreConfig(max_store_bytes=max_bytes)) as store:
        ids = [
            _add(store, rng, i, surprise=s, frames=fr, embeddings=emb).id
            for i, ((fr, emb), s) in enumerate(zip(data, surprises, strict=True))
        ]
        expected = [ids[j] for j in _expected_survivors(surprises, 0, sizes, max_bytes)]
        assert store.episode_ids() == expected
        assert ids[-1] in expected  # the lowest surprise of all, kept because just added
        assert store.total_bytes == sum(sizes[ids.index(e)] for e in expected)
    with open_store(new_location(), StoreConfig(max_store_bytes=1)) as store:
        a = _add(store, rng, 0)
        b = _add(store, rng, 1)
        assert store.episode_ids() == [b.id] and a.id not in store


def test_budget_and_queries_are_per_robot(store_location: str) -> None:
    """A robot's adds evict only its own episodes; a query may ask for one robot's."""
    rng = np.random.default_rng(4)
    cfg = StoreConfig(max_episodes=2)
    with open_store(store_location, cfg) as store:
        a = [_add(store, rng, i, surprise=1.0 + i, robot_id="alpha").id for i in range(4)]
        b = [_add(store, rng, 10 + i, surprise=0.1, robot_id="bravo").id for i in range(3)]
        # alpha kept its two most surprising; bravo's lower surprises did not evict them
        assert store.episode_ids() == [a[2], a[3], b[1], b[2]]
        assert [h.episode.id for h in store.search(robot_id="alpha")] == [a[3], a[2]]
        assert {h.episode.robot_id for h in store.search(robot_id="bravo")} == {"bravo"}
        assert store.search(robot_id="charlie") == []
        q = store.embeddings(b[1])[0]
        hits = store.search(embedding=q, embedder_model=MODEL, robot_id="alpha", max_results=5)
        assert {h.episode.id for h in hits} == {a[2], a[3]}
        assert store.search(embedding=q, embedder_model=MODEL, max_results=1)[0].episode.id == b[1]
    with pytest.raises(InputError, match="robot_id="):
        RetrievalQuery(robot_id="no spaces")
    with pytest.raises(ConfigError, match="robot_id="):
        StoreConfig(robot_id="../x")


def test_place_queries_compare_poses_in_one_frame(store_location: str) -> None:
    """tf poses are in map, odometry fallbacks in odom: their numbers do not compare (issue 12).

    A place query names its frame and matches only episodes posed in it; without a frame it
    is answered when every pose shares one, and refused, naming them, when they do not.
    """
    rng = np.random.default_rng(9)
    at_origin = {
        "map": Pose(0.2, 0.0, 0.0, 0, 0, 0, 1, "map"),
        "odom": Pose(0.1, 0, 0, 0, 0, 0, 1, "odom"),
    }
    with open_store(store_location) as store:
        in_map = _add(store, rng, 0, pose=at_origin["map"]).id
        assert [h.episode.id for h in store.search(near=(0, 0, 0), radius_m=1.0)] == [in_map]
        in_odom = _add(store, rng, 1, pose=at_origin["odom"]).id
        hits = store.search(near=(0, 0, 0), radius_m=1.0, near_frame="map")
        assert [h.episode.id for h in hits] == [in_map]
        hits = store.search(near=(0, 0, 0), near_frame="odom")
        assert [h.episode.id for h in hits] == [in_odom]
        assert store.search(near=(0, 0, 0), near_frame="utm") == []
        with pytest.raises(InputError, match="several frames \\(map, odom\\)"):
            store.search(near=(0, 0, 0), radius_m=1.0)
    with pytest.raises(InputError, match="near_frame="):
        RetrievalQuery(near_frame="map")


def test_store_config_rules() -> None:
    with pytest.raises(ConfigError, match="default_max_results=20: must be <= max_results_cap=10"):
        StoreConfig(default_max_results=20, max_results_cap=10)
    with pytest.raises(ConfigError, match="embedding_dtype"):
        StoreConfig(embedding_dtype="int4")


def test_orphans_are_cleaned_on_open(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    with EpisodeStore(tmp_path) as store:
        rec = _add(store, rng, 0)
    (tmp_path / "frames" / ".tmp-ep-x-1234").mkdir()
    (tmp_path / "frames" / ".tmp-ep-x-1234" / "00.jpg").write_bytes(b"partial")
    (tmp_path / "frames" / "ep-uncommitted").mkdir()
    (tmp_path / "frames" / "ep-uncommitted" / "00.jpg").write_bytes(b"x")
    (tmp_path / "frames" / "stray.jpg").write_bytes(b"x")
    with EpisodeStore(tmp_path, read_only=True) as reader:  # a reader never deletes
        assert len(reader) == 1
    assert len(_store_files(tmp_path)) == 4
    with EpisodeStore(tmp_path) as store:
        assert _store_files(tmp_path) == {rec.id}
        assert len(store.get(rec.id).load_images()) == 8


def test_add_from_one_thread_query_from_another(store_location: str) -> None:
    rng = np.random.default_rng(0)
    n = 30
    data = [(_frames(rng, i * S), rng.standard_normal((8, DIM))) for i in range(n)]
    errors: list[BaseException] = []
    done = threading.Event()
    with open_store(store_location, StoreConfig(max_episodes=20)) as store:

        def writer() -> None:
            try:
                for i, (fr, emb) in enumerate(data):
                    store.add(
                        fr,
                        emb,
                        stamp_ns=i * S,
                        surprise=float(i % 5),
                        embedder_model=MODEL,
                        embedder_pretrained=True,
                    )
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
            finally:
                done.set()

        def reader() -> None:
            q = np.ones(DIM, np.float32)
            try:
                while not done.is_set():
                    for hit in store.search(
                        embedding=q, embedder_model=MODEL, max_results=5, include_images=True
                    ):
                        assert len(hit.jpegs) == 8
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors, errors
        assert len(store) == 20
        assert len(store.search(max_results=100)) == 20


_CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from surprise_memory.perception.frames import Frame
    from surprise_memory.memory.pose import Pose
    from surprise_memory.memory.store import open_store

    rng = np.random.default_rng(int(sys.argv[2]))
    store = open_store(sys.argv[1])
    i = len(store)
    while True:
        frames = [
            Frame(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8), i * 10**9 + j)
            for j in range(8)
        ]
        rec = store.add(
            frames, rng.standard_normal((8, 16)), stamp_ns=i * 10**9, surprise=1.0,
            embedder_model="m", embedder_pretrained=True, pose=Pose(x=float(i)),
        )
        print(rec.id, flush=True)  # printed only after the commit returned
        i += 1
    """
)


def test_kill_9_while_adding_loses_nothing_committed(store_location: str) -> None:
    committed: list[str] = []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for round_, delay in enumerate([0.0, 0.013, 0.029]):
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, store_location, str(round_)],
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert child.stdout is not None
        for _ in range(3):  # let a few commits through, then kill inside a later add
            line = child.stdout.readline()
            assert line, "child died before adding"
            committed.append(line.strip())
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        # the rest from the same reader: readline() may have buffered more lines than it
        # returned, which communicate(timeout=...) would lose (it reads the raw pipe); a
        # loaded run lost 3 so and counted their episodes as never committed
        with child.stdout:
            committed += child.stdout.read().split()
        assert child.wait(timeout=30) == -signal.SIGKILL

        with open_store(store_location) as store:  # opens without repair
            ids = store.episode_ids()
            assert set(committed) <= set(ids)  # no committed episode lost
            # at most the add in flight at each kill so far, whole
            assert len(set(ids) - set(committed)) <= round_ + 1
            assert _held_frames(store_location) == set(ids)  # no orphans, nothing half there
            for ep_id in ids:
                rec = store.get(ep_id)
                assert len(rec.frame_stamps_ns) == 8
                assert len(rec.load_images()) == 8
                assert store.embeddings(ep_id).shape == (8, 16)
            hits = store.search(near=(0.0, 0.0, 0.0), max_results=100)
            assert len(hits) == len(ids)
        committed = ids
