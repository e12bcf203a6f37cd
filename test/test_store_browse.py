"""What the memory browser reads from a store, on both backends: summaries, one frame, refresh.

Every test taking ``store_location`` runs on the SQLite folder and on a PostgreSQL database
of a real server (``store_backends.pg_server``). The writer and the reader are two store
objects on the same location, as the memory node and ``surprise-memory serve`` are.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from surprise_memory.config import StoreConfig
from surprise_memory.errors import InputError, StoreError
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import EpisodeStoreBackend, open_store
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
DIM = 16
MODEL = "PE-Core-L-14-336"


def _add(
    store: EpisodeStoreBackend,
    i: int,
    *,
    surprise: float = 1.0,
    pose: Pose | None = None,
    robot_id: str = "rover-1",
    threshold: float = math.nan,
) -> str:
    rng = np.random.default_rng(i)
    frames = [
        Frame(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8), i * S + j * S // 10)
        for j in range(4)
    ]
    rec = store.add(
        frames,
        rng.standard_normal((4, DIM)),
        stamp_ns=i * S + S // 10,
        surprise=surprise,
        threshold=threshold,
        pose=pose,
        embedder_model=MODEL,
        embedder_pretrained=True,
        robot_id=robot_id,
        episode_id=f"ep-{i}",
    )
    return rec.id


def test_summaries_list_each_episode_in_brief_in_the_order_added(store_location: str) -> None:
    with open_store(store_location) as store:
        assert store.summaries() == []
        _add(store, 5, surprise=2.5, threshold=1.5, pose=Pose(1.0, -2.0, 0.5, frame_id="map"))
        _add(store, 2, robot_id="rover-2")  # added second, though earlier in time
        _add(store, 7, pose=Pose(3.0, 0.0, 0.0, frame_id="odom"), robot_id="rover-2")
        got = store.summaries()
        assert [s.id for s in got] == ["ep-5", "ep-2", "ep-7"]
        first = got[0]
        assert (first.robot_id, first.stamp_ns, first.surprise) == ("rover-1", 5 * S + S // 10, 2.5)
        assert (first.threshold, first.pose_valid) == (1.5, True)
        assert (first.position, first.pose_frame) == ((1.0, -2.0, 0.5), "map")
        assert math.isnan(got[1].threshold) and not got[1].pose_valid
        assert [s.id for s in store.summaries("rover-2")] == ["ep-2", "ep-7"]
        assert store.summaries("nobody") == []
        store.delete(["ep-2"])
        assert [s.id for s in store.summaries()] == ["ep-5", "ep-7"]


def test_frame_jpeg_is_the_stored_file_unchanged(store_location: str) -> None:
    with open_store(store_location) as store:
        ep = _add(store, 1)
        stored = store.get(ep).load_jpegs()
        assert [store.frame_jpeg(ep, i) for i in range(4)] == stored
        assert stored[0].startswith(b"\xff\xd8")  # JPEG, as written at add time
        for bad in (-1, 4, 10**9, True, "0"):
            with pytest.raises(InputError, match=r"frames 0\.\.3"):
                store.frame_jpeg(ep, bad)  # type: ignore[arg-type]
        with pytest.raises(StoreError, match="no episode"):
            store.frame_jpeg("ep-404", 0)


def test_a_reader_sees_what_a_writer_adds_and_evicts_after_refresh(store_location: str) -> None:
    """The browser's view of a store that a memory node keeps writing (with a budget)."""
    cfg = StoreConfig(max_episodes=2)
    with open_store(store_location, cfg) as writer:
        _add(writer, 1, surprise=1.0)
        with open_store(store_location, read_only=True) as reader:
            assert reader.refresh() is False  # nothing since the open
            _add(writer, 2, surprise=3.0)
            assert reader.refresh() is True
            assert reader.refresh() is False
            assert [s.id for s in reader.summaries()] == ["ep-1", "ep-2"]
            hits = reader.retrieve(RetrievalQuery(start_ns=2 * S))
            assert [h.episode.id for h in hits] == ["ep-2"]
            assert reader.frame_jpeg("ep-2", 3) == writer.frame_jpeg("ep-2", 3)

            _add(writer, 3, surprise=2.0)  # over budget: ep-1, the least surprising, goes
            assert "ep-1" not in writer
            assert reader.refresh() is True
            assert [s.id for s in reader.summaries()] == ["ep-2", "ep-3"]
            assert [h.episode.id for h in reader.retrieve(RetrievalQuery())] == ["ep-3", "ep-2"]
            with pytest.raises(StoreError, match="no episode"):
                reader.get("ep-1")
            assert reader.origin_ns == writer.origin_ns


def test_a_writer_refresh_counts_its_own_adds(store_location: str) -> None:
    with open_store(store_location) as store:
        assert store.refresh() is False
        _add(store, 1)
        assert store.refresh() is True
        assert store.refresh() is False
        store.delete(["ep-1"])
        assert store.refresh() is True


def test_a_stale_folder_reader_answers_cleanly_for_an_evicted_episode(tmp_path: Path) -> None:
    """Before its refresh, a read-only folder store still lists an episode the writer evicted:
    reading it is a StoreError (was a KeyError), and a query leaves it out."""
    with open_store(tmp_path) as writer:
        _add(writer, 1)
        _add(writer, 2)
        with open_store(tmp_path, read_only=True) as reader:
            writer.delete(["ep-1"])
            with pytest.raises(StoreError, match="no episode 'ep-1'"):
                reader.get("ep-1")
            with pytest.raises(StoreError, match="ep-1"):
                reader.frame_jpeg("ep-1", 0)
            assert [h.episode.id for h in reader.retrieve(RetrievalQuery())] == ["ep-2"]
            assert [s.id for s in reader.summaries()] == ["ep-2"]


def test_a_reader_opened_on_an_empty_folder_store_takes_the_first_episode(
    tmp_path: Path,
) -> None:
    with open_store(tmp_path) as writer:
        writer.note_origin(S // 2)
        with open_store(tmp_path, read_only=True) as reader:
            assert reader.embedding_dim is None
            _add(writer, 1)
            assert reader.refresh() is True
            assert (reader.embedding_dim, reader.embedder_model) == (DIM, MODEL)
            q = np.ones(DIM, dtype=np.float32)
            (hit,) = reader.retrieve(RetrievalQuery(embedding=q, embedder_model=MODEL))
            assert hit.episode.id == "ep-1" and hit.score is not None


def test_frame_jpeg_refuses_a_path_the_database_leads_outside_the_folder(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    with open_store(store_dir) as store:
        _add(store, 1)
    (tmp_path / "secret.jpg").write_bytes(b"\xff\xd8 not yours")
    conn = sqlite3.connect(store_dir / "episodes.sqlite3")
    with conn:
        conn.execute("UPDATE frames SET path = '../secret.jpg' WHERE idx = 0")
    conn.close()
    with open_store(store_dir, read_only=True) as store, pytest.raises(StoreError, match="outside"):
        store.frame_jpeg("ep-1", 0)
