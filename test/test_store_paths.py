"""A store folder written by someone else never makes the store read or delete outside it.

Issue 12, item 8: frame paths and episode ids read back from the database used to be
trusted (``root / path`` with an absolute path; ``rmtree(frames / id)`` on eviction).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from surprise_memory.config import StoreConfig
from surprise_memory.errors import StoreError
from surprise_memory.memory.store import DB_NAME, EpisodeStore
from surprise_memory.perception.frames import Frame

S = 1_000_000_000


def _add(store: EpisodeStore, i: int, surprise: float = 1.0) -> str:
    rng = np.random.default_rng(i)
    frames = [Frame(np.full((8, 8, 3), 10 * k, np.uint8), i * S + k) for k in range(3)]
    rec = store.add(
        frames,
        rng.standard_normal((3, 4)),
        stamp_ns=i * S,
        surprise=surprise,
        embedder_model="m",
        embedder_pretrained=True,
    )
    return rec.id


def _tamper(root: Path, sql: str, *args: object) -> None:
    with sqlite3.connect(root / DB_NAME) as conn:
        conn.execute(sql, args)


@pytest.mark.parametrize(
    "bad_path", ["/etc/hostname", "../outside.jpg", "frames/../../outside.jpg", "LOCK"]
)
def test_frame_paths_outside_the_store_are_refused(tmp_path: Path, bad_path: str) -> None:
    (tmp_path / "outside.jpg").write_bytes(b"secret")
    root = tmp_path / "store"
    with EpisodeStore(root) as store:
        ep = _add(store, 1)
    _tamper(root, "UPDATE frames SET path = ? WHERE idx = 0", bad_path)
    with EpisodeStore(root, read_only=True) as store:
        record = store.get(ep)
        with pytest.raises(StoreError, match="outside"):
            record.load_jpegs()
        with pytest.raises(StoreError, match="outside"):
            store.search(start_ns=0, include_images=True)


def test_frame_folder_linked_out_of_the_store_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "00.jpg").write_bytes(b"secret")
    root = tmp_path / "store"
    with EpisodeStore(root) as store:
        ep = _add(store, 1)
    _tamper(root, "UPDATE frames SET path = ? WHERE idx = 0", "frames/link/00.jpg")
    (root / "frames" / "link").symlink_to(elsewhere)
    with EpisodeStore(root, read_only=True) as store, pytest.raises(StoreError, match="outside"):
        store.get(ep).load_jpegs()


@pytest.mark.parametrize("bad_id", ["../../../victim", "..", "ABSOLUTE"])
def test_eviction_never_deletes_outside_the_store(tmp_path: Path, bad_id: str) -> None:
    victim = tmp_path / "victim"
    if bad_id == "ABSOLUTE":
        bad_id = str(victim)
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    root = tmp_path / "store" / "a"
    with EpisodeStore(root) as store:
        low = _add(store, 1, surprise=0.1)
        _add(store, 2, surprise=5.0)
    _tamper(root, "UPDATE episodes SET id = ? WHERE id = ?", bad_id, low)
    with EpisodeStore(root, StoreConfig(max_episodes=1)) as store:
        _add(store, 3, surprise=9.0)  # evicts the tampered, lowest-surprise episode
        assert bad_id not in store.episode_ids() and len(store) == 1
        store.delete([bad_id])
    assert (victim / "precious.txt").read_text() == "keep me"
    assert (root / DB_NAME).is_file()  # ".." would have been the store folder itself
