"""The episodes' filter columns kept in a file beside the database (column_file.py).

Real store folders and databases: a writable open writes the file and names it; every later
open takes its rows from it, corrected by the database's change log (deletions, updates, rows
added after it), and gets exactly the columns the database holds; a file that is damaged, of
another store, or written but never named (a kill between the two) is not used.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from surprise_memory.config import StoreConfig
from surprise_memory.memory.camera_view import CameraView
from surprise_memory.memory.places import PLACE
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.memory.store.column_file import (
    COLUMN_FILE,
    COLUMN_FILE_TOKEN,
    LoadedColumns,
    episode_columns,
    load_columns,
    needs_rewrite,
    write_column_file,
)
from surprise_memory.memory.store.schema import DB_NAME
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
DIM = 16
MODEL = "test-embedder"


def _add(store: EpisodeStore, i: int, rng: np.random.Generator) -> None:
    """Episode ``e{i}``: two robots, two cameras, and every seventh a place's view."""
    place = i % 7 == 0
    store.add(
        [Frame(np.full((8, 8, 3), i % 250, np.uint8), i * S + j) for j in range(2)],
        rng.standard_normal((2, DIM)),
        stamp_ns=i * S,
        surprise=float(rng.random()),
        embedder_model=MODEL,
        embedder_pretrained=True,
        pose=Pose(float(i), -float(i), 0.5, frame_id="map" if i % 5 else "odom"),
        episode_id=f"e{i:03d}",
        robot_id="alpha" if i % 3 else "bravo",
        camera=CameraView(name="front" if i % 2 else "rear"),
        kind=PLACE if place else "episode",
        place_key=f"p{i}" if place else "",
    )


def _fill(root: Path, n: int, *, with_file: bool = True) -> None:
    """``n`` episodes added to a new store, then (``with_file``) a writable open with rows,
    which writes the column file and names it (the first open had no rows to write)."""
    rng = np.random.default_rng(1)
    with EpisodeStore(root) as store:
        for i in range(n):
            _add(store, i, rng)
    if with_file:
        with EpisodeStore(root):
            pass


def _loaded(root: Path) -> LoadedColumns:
    """What an open reads, with what the database holds beside it."""
    conn = sqlite3.connect(f"file:{root / DB_NAME}?mode=ro", uri=True)
    try:
        conn.execute("BEGIN")
        loaded = load_columns(conn, root)
        held = episode_columns(conn)  # exactly, whatever served it (values and their types)
        assert (loaded.columns is None) == (held is None)
        for got, want in zip(loaded.columns or (), held or (), strict=True):
            assert list(got) == list(want)
            assert [type(v) for v in got] == [type(v) for v in want]
        return loaded
    finally:
        conn.close()


def _answers(root: Path) -> list[list[str]]:
    """A read-only store's ids, and its answers to a filtered and an unfiltered query."""
    query = np.random.default_rng(9).standard_normal(DIM)
    with EpisodeStore(root, read_only=True) as store:
        answers = [sorted(store.episode_ids())]
        for robot in (None, "bravo"):
            hits = store.retrieve(
                RetrievalQuery(embedding=query, embedder_model=MODEL, max_results=5, robot_id=robot)
            )
            answers.append([h.episode.id for h in hits])
    return answers


def test_a_writable_open_writes_the_file_and_later_opens_read_their_rows_from_it(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    _fill(root, 40, with_file=False)
    first = _loaded(root)  # the first store's close wrote none: its open had no rows
    assert (first.from_file, first.from_db) == (0, 40)
    with EpisodeStore(root):
        pass  # an open with rows, none from a file: writes it
    assert (root / COLUMN_FILE).is_file()
    again = _loaded(root)
    assert (again.from_file, again.from_db) == (40, 0)
    with_file = _answers(root)
    (root / COLUMN_FILE).unlink()
    assert _answers(root) == with_file


def test_rows_added_deleted_or_updated_after_the_file_are_read_from_the_database(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    _fill(root, 30)
    rng = np.random.default_rng(2)
    with EpisodeStore(root) as store:
        for i in range(30, 36):  # six added
            _add(store, i, rng)
        assert store.delete(["e003", "e004", "e033"]) == 3  # two the file holds, one it does not
    # an update by code that knows nothing of the file (an older version, a tool): logged too
    conn = sqlite3.connect(root / DB_NAME, isolation_level=None)
    conn.execute("UPDATE episodes SET robot_id = 'charlie', pos_x = 99.0 WHERE id = 'e010'")
    conn.close()
    loaded = _loaded(root)  # equal to the database's columns: the deletions, the update
    assert loaded.columns is not None and "e003" not in loaded.columns.episode_id
    assert (loaded.from_file, loaded.from_db) == (30 - 2 - 1, 1 + 5)
    with_file = _answers(root)
    (root / COLUMN_FILE).unlink()
    assert _answers(root) == with_file


def test_a_new_file_takes_the_change_log_it_accounts_for(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _fill(root, 20)
    with EpisodeStore(root) as store:
        store.delete(["e001"])  # logged; the file written at this open is older
    (root / COLUMN_FILE).unlink()  # (as if lost): the next open writes one
    with EpisodeStore(root):
        pass
    conn = sqlite3.connect(root / DB_NAME)
    assert conn.execute("SELECT count(*) FROM episode_changes").fetchone() == (0,)
    conn.close()
    loaded = _loaded(root)
    assert (loaded.from_file, loaded.from_db) == (19, 0)


@pytest.mark.parametrize("damage", ["payload", "truncated", "header", "other_store", "unnamed"])
def test_a_file_the_database_does_not_vouch_for_is_not_used(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "store"
    _fill(root, 25)
    path = root / COLUMN_FILE
    data = path.read_bytes()
    if damage == "payload":  # a flipped bit in a column
        path.write_bytes(data[:-10] + bytes([data[-10] ^ 1]) + data[-9:])
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "header":
        path.write_bytes(b"not a column file" + data[17:])
    elif damage == "other_store":  # another store's file, of the same rows, put here
        other = tmp_path / "other"
        _fill(other, 25)
        path.write_bytes((other / COLUMN_FILE).read_bytes())
    else:  # written, then killed before the database named it
        conn = sqlite3.connect(root / DB_NAME)
        conn.execute("BEGIN")
        rows = load_columns(conn, root)
        conn.execute("COMMIT")
        conn.close()
        assert write_column_file(root, rows) is not None
    with caplog.at_level(logging.WARNING):
        loaded = _loaded(root)
    assert (loaded.from_file, loaded.from_db) == (0, 25)
    if damage in ("payload", "truncated", "header"):
        assert f"{path}: not used" in caplog.text
    with EpisodeStore(root):
        pass  # a writable open replaces it
    assert _loaded(root).from_file == 25


def test_a_read_only_open_of_a_store_no_writable_open_of_this_code_saw(tmp_path: Path) -> None:
    """No change log, no token: the database's rows, and nothing written."""
    root = tmp_path / "store"
    _fill(root, 10, with_file=False)
    conn = sqlite3.connect(root / DB_NAME, isolation_level=None)
    conn.execute("DROP TRIGGER episodes_deleted")
    conn.execute("DROP TRIGGER episodes_updated")
    conn.execute("DROP TABLE episode_changes")
    conn.execute("DELETE FROM meta WHERE key = ?", (COLUMN_FILE_TOKEN,))
    conn.close()
    assert _loaded(root).from_db == 10
    assert len(_answers(root)[0]) == 10
    assert not (root / COLUMN_FILE).exists()


def test_when_a_writable_open_writes_the_file_again() -> None:
    def loaded(from_file: int, from_db: int, logged: int = 0) -> LoadedColumns:
        columns = None if from_file + from_db == 0 else object()  # only whether there are rows
        return LoadedColumns(columns, None, from_file, from_db, logged)  # type: ignore[arg-type]

    assert not needs_rewrite(loaded(0, 0))  # no rows: nothing to write
    assert needs_rewrite(loaded(0, 3))  # none from a file
    assert not needs_rewrite(loaded(100_000, 4096))  # a day or two of a robot: not yet
    assert needs_rewrite(loaded(100_000, 4097))
    assert not needs_rewrite(loaded(1_000_000, 20_000))  # 2 % of the rows
    assert needs_rewrite(loaded(1_000_000, 20_409))
    # a log of deleted rows, however few rows the open read from the database
    assert not needs_rewrite(loaded(100_000, 10, logged=4096))
    assert needs_rewrite(loaded(100_000, 10, logged=4097))
    assert needs_rewrite(loaded(1_000_000, 0, logged=20_409))


def test_views_replaced_lap_after_lap_leave_no_log_behind_the_next_open(tmp_path: Path) -> None:
    """Place keyframes replaced on every revisit (``place_history`` 1): 5,000 rows deleted
    and only a few live rows added since the file. The next writable open reads the log's
    keys, writes a new file and empties the log (before, the log kept every deletion until
    rows read from the database passed the bound, which churn never does)."""
    root = tmp_path / "store"
    _fill(root, 20)
    rng = np.random.default_rng(3)
    with EpisodeStore(root, StoreConfig(place_history=1)) as store:
        for i in range(5_000):  # 50 places, each replaced 100 times
            store.add(
                [Frame(np.full((8, 8, 3), 7, np.uint8), (100 + i) * S)],
                rng.standard_normal((1, DIM)),
                stamp_ns=(100 + i) * S, surprise=0.0, embedder_model=MODEL,
                embedder_pretrained=True, pose=Pose(float(i % 50), 0.0, 0.0, frame_id="map"),
                kind=PLACE, place_key=f"lap{i % 50}",
            )  # fmt: skip
    loaded = _loaded(root)
    assert (loaded.from_db, loaded.logged) == (50, 4_950)
    assert needs_rewrite(loaded)
    with EpisodeStore(root):
        pass  # the open that writes the file again
    conn = sqlite3.connect(root / DB_NAME)
    assert conn.execute("SELECT count(*) FROM episode_changes").fetchone() == (0,)
    conn.close()
    again = _loaded(root)
    assert (again.from_file, again.from_db, again.logged) == (70, 0, 0)


def test_a_follower_takes_in_deletions_from_the_log_and_after_a_new_file_from_the_rows(
    tmp_path: Path,
) -> None:
    """A read-only store following writers (``refresh``): the deletions of each, also those
    whose log entries a new column file took before the follower looked."""
    root = tmp_path / "store"
    _fill(root, 20)
    rng = np.random.default_rng(4)
    with EpisodeStore(root, read_only=True) as follower:
        with EpisodeStore(root) as writer:
            writer.delete(["e002"])
            _add(writer, 20, rng)
        assert follower.refresh()  # from the log
        assert "e002" not in follower.episode_ids() and "e020" in follower.episode_ids()
        with EpisodeStore(root) as writer:
            writer.delete(["e005", "e020"])
        (root / COLUMN_FILE).unlink()
        with EpisodeStore(root):
            pass  # a new file: the log's entries of those two deletions go with its naming
        conn = sqlite3.connect(root / DB_NAME)
        assert conn.execute("SELECT count(*) FROM episode_changes").fetchone() == (0,)
        conn.close()
        assert follower.refresh()
        ids = follower.episode_ids()
        assert "e005" not in ids and "e020" not in ids and len(ids) == 18
        with EpisodeStore(root) as writer:
            writer.delete(["e007"])
        assert follower.refresh()
        assert sorted(follower.episode_ids()) == sorted(_answers(root)[0])  # a fresh open's
        assert "e007" not in follower.episode_ids()
