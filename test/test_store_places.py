"""Place keyframes in the store, on both backends: kind, bounded views, budget, latest, still there.

Tests taking ``store_location`` run on the SQLite folder and on a PostgreSQL database of a
real server (``store_backends.pg_server``), as in test_store.py.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from test_store import as_version_6

from surprise_memory.config import PlacesConfig, StoreConfig
from surprise_memory.errors import InputError
from surprise_memory.memory.camera_view import CameraView, yaw_pose
from surprise_memory.memory.place_status import (
    nearby_place_keys,
    place_status,
    places_as_stored,
    record_place,
    with_place_status,
)
from surprise_memory.memory.places import PlaceKeyframeSelector, place_cell
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import (
    DB_NAME,
    EpisodeStore,
    EpisodeStoreBackend,
    RetrievalHit,
    RetrievalHits,
    open_store,
)
from surprise_memory.memory.store.frame_files import FrameFiles
from surprise_memory.memory.store.records import EpisodeRecord
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
DIM = 16
MODEL = "PE-Core-L-14-336"
CONFIG = PlacesConfig()


def _image(rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)


def _episode(
    store: EpisodeStoreBackend,
    rng: np.random.Generator,
    t: float,
    pose: Pose | None,
    *,
    surprise: float = 1.0,
    embeddings: np.ndarray | None = None,
    robot: str = "alpha",
) -> EpisodeRecord:
    stamp = round(t * S)
    frames = [Frame(_image(rng), stamp + (i - 4) * S // 10) for i in range(8)]
    emb = rng.standard_normal((8, DIM)) if embeddings is None else embeddings
    return store.add(
        frames, emb, stamp_ns=stamp, surprise=surprise, embedder_model=MODEL,
        embedder_pretrained=True, pose=pose, robot_id=robot,
    )  # fmt: skip


def _place(
    store: EpisodeStoreBackend,
    rng: np.random.Generator,
    t: float,
    pose: Pose,
    *,
    embedding: np.ndarray | None = None,
    robot: str = "alpha",
    camera: CameraView | None = None,
    config: PlacesConfig = CONFIG,
) -> EpisodeRecord:
    """A place keyframe as the selector decides it: one frame, its pose, its place's key."""
    stamp = round(t * S)
    decision = PlaceKeyframeSelector(config).push(stamp, pose)
    assert decision is not None
    emb = rng.standard_normal((1, DIM)) if embedding is None else embedding[None, :]
    return store.add(
        [Frame(_image(rng), stamp)], emb, stamp_ns=stamp, surprise=0.0, embedder_model=MODEL,
        embedder_pretrained=True, pose=pose, robot_id=robot, camera=camera, kind="place",
        place_key=decision.place_key,
    )  # fmt: skip


def _ids(records: list[EpisodeRecord]) -> list[str]:
    return [r.id for r in records]


AT = yaw_pose(3.0, 5.0, 0.0, 0.0, "map")  # cell (1, 2), sector 0 of 8


def test_a_place_keyframe_keeps_its_kind_and_place(store_location: str) -> None:
    rng = np.random.default_rng(0)
    with open_store(store_location) as store:
        ep = _episode(store, rng, 1.0, AT)
        view = _place(store, rng, 2.0, AT)
        assert (ep.kind, ep.place_key) == ("episode", "")
        assert (view.kind, view.place_key) == ("place", "map@2m:1,2:0/8")
    with open_store(store_location, read_only=True) as store:
        assert store.get(view.id) == view and store.get(ep.id) == ep
        kinds = {s.id: s.kind for s in store.summaries()}
        assert kinds == {ep.id: "episode", view.id: "place"}
        assert len(store) == 2


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"kind": "place", "place_key": ""}, "a place needs"),
        ({"kind": "episode", "place_key": "map@2m:0,0:0/8"}, "an episode has none"),
        ({"kind": "places", "place_key": "x"}, "kind="),
        ({"kind": "place", "place_key": "x" * 300}, "at most 256"),
        ({"kind": "place", "place_key": "map@2m:0,0:0/8", "pose": None}, "needs a pose"),
    ],
)
def test_a_bad_kind_or_place_is_refused(
    store_location: str, fields: dict[str, object], match: str
) -> None:
    rng = np.random.default_rng(1)
    with open_store(store_location) as store:
        fields = {"pose": AT, **fields}
        with pytest.raises(InputError, match=match):
            store.add(
                [Frame(_image(rng), S)], rng.standard_normal((1, DIM)), stamp_ns=S,
                surprise=0.0, embedder_model=MODEL, embedder_pretrained=True,
                **fields,  # type: ignore[arg-type]
            )  # fmt: skip
        assert len(store) == 0


@pytest.mark.parametrize("history", [1, 3])
def test_a_place_keeps_its_newest_views_only(
    store_location: str, history: int, tmp_path: Path
) -> None:
    """Each view of a place replaces its oldest beyond place_history (same transaction,
    files too), per robot; other places and other robots' views are left alone."""
    rng = np.random.default_rng(2)
    elsewhere = yaw_pose(41.0, 5.0, 0.0, 0.0, "map")
    with open_store(store_location, StoreConfig(place_history=history)) as store:
        views = [_place(store, rng, 10.0 * i, AT) for i in range(6)]
        other = [_place(store, rng, 10.0 * i + 1, elsewhere) for i in range(2)]
        bravo = _place(store, rng, 5.0, AT, robot="bravo")
        held = set(store.episode_ids())
        assert held == {*_ids(views[-history:]), *_ids(other[-history:]), bravo.id}
        # an old view delivered late (a fleet's backlog) is itself the surplus
        late = dataclasses.replace(
            views[-1], id="late-view", stamp_ns=1, start_ns=1, end_ns=1, frame_stamps_ns=(1,),
            frame_paths=tuple(FrameFiles.relative_paths("late-view", 1)),
        )  # fmt: skip
        imported = store.import_episode(
            late, views[-1].load_jpegs(), rng.standard_normal((1, DIM)), budget=True
        )
        assert imported.id not in store and set(store.episode_ids()) == held
    if "://" not in store_location:  # the folder's frames went with the rows
        folders = {p.name for p in (Path(store_location) / "frames").iterdir()}
        assert folders == held


def test_places_are_outside_the_episodes_budget(store_location: str) -> None:
    rng = np.random.default_rng(3)
    with open_store(store_location, StoreConfig(max_episodes=3)) as store:
        eps = [_episode(store, rng, 1.0 + i, AT, surprise=float(i + 1)) for i in range(3)]
        views = [_place(store, rng, 10.0 + i, yaw_pose(2.0 * i, 0, 0, 0, "map")) for i in range(8)]
        assert set(store.episode_ids()) == set(_ids(eps + views))  # no episode made room
        fourth = _episode(store, rng, 20.0, AT, surprise=10.0)
        assert set(store.episode_ids()) == set(_ids([*eps[1:], fourth, *views]))
        assert store.total_bytes > 0


def test_a_query_may_ask_for_one_kind(store_location: str) -> None:
    rng = np.random.default_rng(4)
    q = rng.standard_normal(DIM)
    with open_store(store_location) as store:
        ep = _episode(store, rng, 1.0, AT, embeddings=np.tile(q, (8, 1)))
        view = _place(store, rng, 2.0, AT, embedding=-q)
        both = {"embedding": q, "embedder_model": MODEL}
        for kinds, want in (({"episode"}, [ep]), ({"place"}, [view]), (None, [ep, view])):
            for query in (both, {"near": (3.0, 5.0, 0.0), "radius_m": 1.0}, {}):
                hits = store.search(kinds=kinds, **query)  # type: ignore[arg-type]
                assert {h.episode.id for h in hits} == set(_ids(want)), (kinds, query)
        hits = store.search(**both)
        assert [(h.episode.id, h.episode.kind) for h in hits] == [
            (ep.id, "episode"), (view.id, "place"),
        ]  # fmt: skip
    assert RetrievalQuery(kinds="place").kinds == frozenset({"place"})
    for bad in (set(), {"episodes"}, 3):
        with pytest.raises(InputError, match="kinds="):
            RetrievalQuery(kinds=bad)  # type: ignore[arg-type]


def test_the_latest_view_of_each_place(store_location: str) -> None:
    rng = np.random.default_rng(5)
    b = yaw_pose(9.0, 9.0, 0.0, 3.0, "map")
    with open_store(store_location) as store:
        a1, a2 = _place(store, rng, 1.0, AT), _place(store, rng, 3.0, AT)
        b1 = _place(store, rng, 2.0, b)
        a_bravo = _place(store, rng, 4.0, AT, robot="bravo")
        keys = [a1.place_key, "map@2m:99,99:0/8", b1.place_key, a1.place_key]
        assert _ids(store.latest_places(keys)) == [a_bravo.id, b1.id]
        assert _ids(store.latest_places(keys, robot_id="alpha")) == [a2.id, b1.id]
        assert store.latest_places(["nowhere"]) == []


def test_is_it_still_there(store_location: str) -> None:
    """An episode's place seen again later: alike (still there), unlike (gone), or not at
    all since (unknown); views elsewhere, in another direction or earlier do not count."""
    rng = np.random.default_rng(6)
    look = rng.standard_normal(DIM)
    emb = rng.standard_normal((8, DIM))
    with open_store(store_location) as store:
        ep = _episode(store, rng, 100.0, AT, embeddings=emb)
        trigger = emb[4]  # the frame at the trigger stamp
        status = place_status(store, ep, CONFIG)
        assert status is not None and status.place_key == record_place(ep, CONFIG).key
        unseen = (status.last_seen_ns, status.similarity, status.still_there)
        assert unseen == (ep.stamp_ns, None, None)
        _place(store, rng, 50.0, AT, embedding=look)  # before the episode
        _place(store, rng, 120.0, yaw_pose(30.0, 5.0, 0.0, 0.0, "map"), embedding=trigger)
        _place(store, rng, 130.0, yaw_pose(3.0, 5.0, 0.0, 3.14, "map"), embedding=trigger)
        assert place_status(store, ep, CONFIG).still_there is None
        same = _place(store, rng, 200.0, yaw_pose(3.5, 5.5, 0.0, 0.5, "map"), embedding=trigger)
        status = place_status(store, ep, CONFIG)
        assert (status.view_id, status.last_seen_ns) == (same.id, same.stamp_ns)
        assert status.similarity == pytest.approx(1.0, abs=1e-2) and status.still_there
        gone = _place(store, rng, 300.0, AT, embedding=-trigger)
        status = place_status(store, ep, CONFIG)
        assert (status.view_id, status.still_there) == (gone.id, False)
        assert status.similarity == pytest.approx(-1.0, abs=1e-2)
        assert place_status(store, _episode(store, rng, 400.0, None), CONFIG) is None


def test_the_latest_pass_decides_not_its_newest_view(store_location: str) -> None:
    """Driving by, the robot sees the place, then looks past it from a cell beside it: the
    pass's best view says it is still there; outside the pass, or with no pass (0 s), the
    newest view alone decides."""
    rng = np.random.default_rng(7)
    emb = rng.standard_normal((8, DIM))
    trigger = emb[4]
    away = rng.standard_normal(DIM)
    with open_store(store_location) as store:
        ep = _episode(store, rng, 100.0, AT, embeddings=emb)
        seen = _place(store, rng, 300.0, AT, embedding=trigger)
        past = _place(store, rng, 310.0, yaw_pose(4.5, 5.0, 0.0, 0.0, "map"), embedding=away)
        assert past.place_key != seen.place_key  # another cell within the radius
        status = place_status(store, ep, CONFIG)
        assert status is not None and status.last_seen_ns == past.stamp_ns
        assert (status.view_id, status.still_there) == (seen.id, True)
        assert status.similarity == pytest.approx(1.0, abs=1e-2)
        newest_only = dataclasses.replace(CONFIG, place_status_pass_seconds=0.0)
        alone = place_status(store, ep, newest_only)
        assert alone is not None and (alone.view_id, alone.still_there) == (past.id, False)
        short = dataclasses.replace(CONFIG, place_status_pass_seconds=5.0)  # seen: 10 s before
        assert place_status(store, ep, short).view_id == past.id  # type: ignore[union-attr]


def test_hits_with_their_place_status(store_location: str) -> None:
    """An answer's episodes get their status, its place keyframes none; partial kept."""
    rng = np.random.default_rng(7)
    emb = rng.standard_normal((8, DIM))
    with open_store(store_location) as store:
        ep = _episode(store, rng, 100.0, AT, embeddings=emb)
        view = _place(store, rng, 200.0, AT, embedding=-emb[4])
        hits = RetrievalHits(
            [RetrievalHit(ep, 0.5, None), RetrievalHit(view, 0.4, None)], partial="fleet down"
        )
        out = with_place_status(store, hits, CONFIG)
        assert out.partial == "fleet down" and [h.score for h in out] == [0.5, 0.4]
        assert out[0].place_status == place_status(store, ep, CONFIG)
        assert out[0].place_status.still_there is False and out[1].place_status is None


def test_a_reader_takes_the_stores_grid_not_its_own(store_location: str) -> None:
    """Keyframes kept on a 5 m grid of 4 sectors, read with the defaults (2 m, 8): the
    status is found on the store's grid (the reader's would name other places and find
    nothing); a store without place keyframes gives no status at all."""
    rng = np.random.default_rng(8)
    emb = rng.standard_normal((8, DIM))
    kept_with = PlacesConfig(place_cell_m=5.0, place_sectors=4)
    with open_store(store_location) as store:
        ep = _episode(store, rng, 100.0, AT, embeddings=emb)
        assert places_as_stored(store, CONFIG) is None
        assert (
            with_place_status(store, [RetrievalHit(ep, 0.5, None)], CONFIG)[0].place_status is None
        )
        view = _place(store, rng, 200.0, AT, embedding=emb[4], config=kept_with)
        assert view.place_key == "map@5m:0,1:0/4"
        grid = places_as_stored(store, CONFIG)
        assert grid == PlacesConfig(place_cell_m=5.0, place_sectors=4)
        assert place_status(store, ep, CONFIG).view_id is None  # the reader's own grid
        (hit,) = with_place_status(store, [RetrievalHit(ep, 0.5, None)], CONFIG)
        assert (hit.place_status.view_id, hit.place_status.still_there) == (view.id, True)
        assert hit.place_status.place_key == "map@5m:0,1:0/4"


@pytest.mark.parametrize(("radius", "x", "cells"), [(2.0, 3.0, 9), (0.5, 3.0, 1), (0.5, 2.1, 2)])
def test_the_keys_near_a_place(radius: float, x: float, cells: int) -> None:
    cell = place_cell(yaw_pose(x, 5.0, 0.0, 0.0, "map"), 0.0, 2.0, 8)
    keys = nearby_place_keys(cell, x, 5.0, PlacesConfig(place_status_radius_m=radius))
    assert keys[0] == cell.key and len(keys) == len(set(keys)) == cells * 3
    assert {k.rsplit(":", 1)[1] for k in keys} == {"0/8", "1/8", "7/8"}


def test_a_schema_6_store_opens_and_its_rows_are_episodes(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    with EpisodeStore(tmp_path) as store:
        old = _episode(store, rng, 1.0, AT)
    as_version_6(tmp_path / DB_NAME)
    with EpisodeStore(tmp_path) as store:
        assert store.get(old.id) == old and old.kind == "episode"
        view = _place(store, rng, 2.0, AT)
        assert _ids(store.latest_places([view.place_key])) == [view.id]
        assert [h.episode.id for h in store.search(kinds={"episode"})] == [old.id]
    conn = sqlite3.connect(tmp_path / DB_NAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 8
    conn.close()


def test_a_schema_5_postgres_store_opens_and_its_rows_are_episodes(pg_url: str) -> None:
    from test_store_postgres import as_schema_5

    rng = np.random.default_rng(8)
    with open_store(pg_url, StoreConfig(max_episodes=2)) as store:
        old = _episode(store, rng, 1.0, AT, surprise=5.0)
    as_schema_5(pg_url)
    with open_store(pg_url, StoreConfig(max_episodes=2, place_history=1)) as store:
        assert store.get(old.id) == old
        views = [_place(store, rng, 2.0 + i, AT) for i in range(3)]
        eps = [_episode(store, rng, 10.0 + i, AT, surprise=1.0 + i) for i in range(2)]
        assert set(store.episode_ids()) == {old.id, views[-1].id, eps[1].id}
        assert [h.episode.id for h in store.search(kinds={"place"})] == [views[-1].id]


def _index_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in (folder / "index").iterdir())


EPISODES, LAPS = 2_300, 3  # the 300 views replaced are under an eighth of the records


def test_place_keyframes_churn_outside_the_episode_index(tmp_path: Path) -> None:
    """A building patrolled lap after lap, every lap replacing every place's view: the
    folder's graph segments hold the episodes only, so its index files do not grow with the
    laps (in them a replaced view would stay until a merge of four full segments); the
    replaced views' rows in RAM are reclaimed as they go, though the records removed are
    too few (under an eighth of the store) for the arrays of every record to be compacted;
    and a text query still ranks the latest views exactly, with and without a kind or a
    place filter, before and after a reopen (which reads the places' rows back)."""
    rng = np.random.default_rng(11)
    poses = [yaw_pose(2.0 * i + 1.0, 1.0, 0.0, 0.0, "map") for i in range(150)]
    folder = tmp_path / "store"
    truth: dict[str, np.ndarray] = {}  # id -> its frame embeddings as added (unit rows)
    with EpisodeStore(folder, StoreConfig(place_history=1)) as store:
        for i in range(EPISODES):  # more than the re-ranking's hundred of either kind
            # an episode's frames alike, as a moment's are (the pooled vector then finds it)
            emb = rng.standard_normal(DIM) + 0.1 * rng.standard_normal((8, DIM))
            truth[_episode(store, rng, 1.0 + i, poses[i % 150], embeddings=emb).id] = emb
        index = store._folder.catalog.index  # type: ignore[attr-defined]
        sizes = []
        for lap in range(LAPS):
            for i, pose in enumerate(poses):
                emb = rng.standard_normal(DIM)
                truth[_place(store, rng, 1000.0 * (lap + 1) + i, pose, embedding=emb).id] = emb[
                    None, :
                ]
            sizes.append(_index_bytes(folder))
        assert sizes[1:] == sizes[:1] * (LAPS - 1), sizes
        assert len(index.ann) == EPISODES and len(store) == EPISODES + 150
        # at most an eighth of the rows held are removed ones: RAM bounded by the 150 live
        # views, not by the 450 written
        assert index.frame_rows <= 151 + 151 // 7, index.frame_rows

    def exact(ids: set[str], q: np.ndarray) -> list[str]:
        unit = q / np.linalg.norm(q)
        best = {i: float(np.max(truth[i] @ unit / np.linalg.norm(truth[i], axis=1))) for i in ids}
        return sorted(best, key=best.__getitem__, reverse=True)[:10]

    for read_only in (False, True):
        with EpisodeStore(folder, read_only=read_only) as store:
            live = set(store.episode_ids())
            places = {i for i in live if store.get(i).kind == "place"}
            near = {i for i in live if abs(store.get(i).pose.x - 100.0) <= 30.0}
            for _ in range(5):
                q = rng.standard_normal(DIM)
                ask = {"embedding": q, "embedder_model": MODEL, "max_results": 10}
                got = [h.episode.id for h in store.search(**ask, kinds={"place"})]
                assert got == exact(places, q)
                assert [h.episode.id for h in store.search(**ask)] == exact(live, q)
                filtered = store.search(**ask, near=(100.0, 1.0, 0.0), radius_m=30.0)
                assert [h.episode.id for h in filtered] == exact(near, q)
