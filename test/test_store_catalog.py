"""The catalog loaded at an open by whole columns holds what adding each record would.

An open of a robot-year's store (671,000 rows) builds the catalog from the database's
columns at once (:meth:`Catalog.load`); every later add goes one record at a time. Both
must leave the same ids, keys, sizes, per-robot budget counts, places and filter arrays,
or a reopened store would evict, count or filter differently from the one that was closed.
"""

from __future__ import annotations

import numpy as np
import pytest

from surprise_memory.memory.places import EPISODE, PLACE
from surprise_memory.memory.store.catalog import Catalog
from surprise_memory.memory.store.column_file import EpisodeColumns
from surprise_memory.memory.store.episode_index import EpisodeIndex

DIM = 8


def _rows(count: int, robots: tuple[str, ...], seed: int = 5) -> list[tuple]:
    """Rows as the database gives them: keys with gaps, a few places, several cameras."""
    rng = np.random.default_rng(seed)
    keys = np.cumsum(rng.integers(1, 4, count))  # deleted episodes leave gaps
    rows = []
    for i, key in enumerate(keys.tolist()):
        x, y, z = rng.uniform(-50, 50, 3).tolist()
        rows.append(
            (
                key,
                f"ep-{key:05d}",
                int(1_000_000_000 * i + int(rng.integers(0, 1000))),
                x,
                y,
                z,
                int(rng.random() < 0.9),
                float(rng.random()),
                int(rng.integers(1_000, 50_000)),
                robots[int(rng.integers(len(robots)))],
                "map" if i % 5 else "odom",
                ("front", "rear", "")[i % 3],
                PLACE if i % 7 == 0 else EPISODE,
            )
        )
    return rows


def _by_adds(rows: list[tuple]) -> Catalog:
    catalog = Catalog(DIM, EpisodeIndex(DIM))
    empty = np.empty((0, DIM), dtype=np.float32)
    for key, ep_id, stamp, x, y, z, valid, surprise, nbytes, robot, frame, camera, kind in rows:
        catalog.add(
            key,
            ep_id,
            nbytes,
            stamp_ns=stamp,
            position=(x, y, z),
            pose_valid=bool(valid),
            surprise=surprise,
            unit_embeddings=empty,
            robot_id=robot,
            pose_frame=frame,
            camera=camera,
            kind=kind,
        )
    return catalog


def _by_load(rows: list[tuple]) -> Catalog:
    catalog = Catalog(DIM, EpisodeIndex(DIM))
    catalog.load(EpisodeColumns(*zip(*rows, strict=True)))
    return catalog


@pytest.mark.parametrize("robots", [("r1",), ("r1", "r2", "r3")], ids=["one robot", "three"])
def test_loading_columns_equals_adding_each_record(robots: tuple[str, ...]) -> None:
    rows = _rows(500, robots)
    added, loaded = _by_adds(rows), _by_load(rows)

    assert len(loaded) == len(added) == 500
    assert loaded.revision == added.revision
    assert loaded.total_bytes == added.total_bytes
    assert loaded.ids() == added.ids()
    assert all(loaded.key(r[1]) == r[0] for r in rows)
    a_index, l_index = added.index, loaded.index
    for a_col, l_col in zip(a_index._episode_arrays(), l_index._episode_arrays(), strict=True):
        np.testing.assert_array_equal(l_col.view(), a_col.view())
    assert l_index._robot_codes == a_index._robot_codes
    assert l_index._frame_codes == a_index._frame_codes
    assert l_index._camera_codes == a_index._camera_codes
    # the budget: each robot's episodes counted (places not), the same victims in order
    places = {r[0] for r in rows if r[12] == PLACE}
    for robot in robots:
        mine = [r for r in rows if r[9] == robot and r[0] not in places]
        newest = max(r[0] for r in mine)
        for cat in (added, loaded):
            assert cat._robot_count[robot] == len(mine)
            assert cat._robot_bytes[robot] == sum(r[8] for r in mine)
        limits = {"max_episodes": len(mine) // 2, "max_store_bytes": 0}
        victims = loaded.victims(keep=newest, **limits)
        assert victims == added.victims(keep=newest, **limits)
        assert len(victims) == len(mine) - len(mine) // 2
        assert not places & set(victims)
    assert loaded.victims(keep=min(places), max_episodes=1, max_store_bytes=0) == []


def test_a_load_after_an_eviction_rebuilds_the_robots_order() -> None:
    """A robot's eviction heap, built at its first eviction, takes the loaded episodes too."""
    first, second = _rows(200, ("r1",)), _rows(100, ("r1",), seed=6)
    shift = first[-1][0]
    second = [(r[0] + shift, f"late-{r[0]}", *r[2:]) for r in second]
    catalog = _by_load(first)
    keep = first[-1][0]
    assert catalog.victims(keep=keep, max_episodes=10, max_store_bytes=0)  # heap built
    catalog.load(EpisodeColumns(*zip(*second, strict=True)))
    reference = _by_load(first + second)
    keep = second[-1][0]
    assert catalog.victims(keep=keep, max_episodes=10, max_store_bytes=0) == reference.victims(
        keep=keep, max_episodes=10, max_store_bytes=0
    )
