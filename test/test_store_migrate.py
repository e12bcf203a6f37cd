"""``surprise-memory migrate`` (SQLite <-> PostgreSQL) and ``query`` on either backend.

Real stores on both sides: a SQLite folder and a database of the session's PostgreSQL
server. A migration is interrupted by SIGKILL and finished by running it again; the
verification is shown to catch a changed and an extra episode.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from store_backends import new_database

from surprise_memory.cli import main
from surprise_memory.config import StoreConfig
from surprise_memory.errors import StoreError
from surprise_memory.memory.camera_view import CameraView
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.store import DB_NAME, EpisodeStoreBackend, migrate, open_store
from surprise_memory.memory.store.base import EpisodeCopy
from surprise_memory.memory.store.migrate import migrate_store, store_digest
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
DIM = 16
MODEL = "PE-Core-L-14-336"
ROOT = Path(__file__).resolve().parents[1]


def _fill(location: str, n: int, dtype: str = "float16") -> None:
    """Two robots' episodes; robot alpha's budget evicts its oldest, so the origin is older."""
    rng = np.random.default_rng(7)
    cfg = StoreConfig(embedding_dtype=dtype, max_episodes=max(0, n // 2 - 2))
    with open_store(location, cfg) as store:
        for i in range(n):
            frames = [
                Frame(rng.integers(0, 256, (16, 20, 3), dtype=np.uint8), i * S + j)
                for j in range(8)
            ]
            store.add(
                frames,
                rng.standard_normal((8, DIM)),
                stamp_ns=i * S + 5,
                surprise=float(i),  # the oldest go first
                threshold=float("nan") if i % 3 else 0.5,
                pose=None if i % 4 == 0 else Pose(float(i), -1.0, 0.0, frame_id="map"),
                embedder_model=MODEL,
                embedder_pretrained=True,
                encoder_model="facebook/vjepa2-vitl-fpc64-256",
                robot_id="alpha" if i % 2 else "bravo",
                # a camera (with its pose, or none) on most: the copy keeps it (issue 42)
                camera=CameraView(
                    ("front", "rear", "")[i % 3],
                    f"cam{i % 3}_optical",
                    None if i % 5 == 0 else Pose(float(i), 1.0, 0.5, -0.5, 0.5, -0.5, 0.5, "map"),
                ),
            )


def _same(a: EpisodeStoreBackend, b: EpisodeStoreBackend) -> None:
    assert sorted(a.episode_ids()) == sorted(b.episode_ids())
    assert a.origin_ns == b.origin_ns and a.embedding_dim == b.embedding_dim
    for ep_id in a.episode_ids():
        ra, rb = a.get(ep_id), b.get(ep_id)
        assert ra == rb
        assert ra.load_jpegs() == rb.load_jpegs()
        np.testing.assert_array_equal(
            a.embeddings(ep_id).astype(np.float16), b.embeddings(ep_id).astype(np.float16)
        )
    q = np.random.default_rng(1).standard_normal(DIM)
    for robot, camera in ((None, None), ("alpha", None), (None, "rear")):
        kw = {"embedding": q, "embedder_model": MODEL, "max_results": 5, "camera": camera}
        want = a.search(robot_id=robot, **kw)
        got = b.search(robot_id=robot, **kw)
        assert [h.episode.id for h in got] == [h.episode.id for h in want]


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_sqlite_to_postgres_and_back_keeps_everything(
    tmp_path: Path, pg_url: str, dtype: str
) -> None:
    src = str(tmp_path / "robot")
    _fill(src, 24, dtype)
    report = migrate_store(src, pg_url)
    assert (report.episodes, report.copied, report.skipped) == (20, 20, 0)
    assert report.robots == {"alpha": 10, "bravo": 10}
    with open_store(src, read_only=True) as a, open_store(pg_url, read_only=True) as b:
        assert a.origin_ns == 0  # evicted episode 0's first frame (0 ns) is still the origin
        _same(a, b)
    back = str(tmp_path / "back")
    again = migrate_store(pg_url, back)
    assert again.checksum == report.checksum
    with open_store(src, read_only=True) as a, open_store(back, read_only=True) as c:
        _same(a, c)
    with pytest.raises(StoreError, match="the same store"):
        migrate_store(src, str(tmp_path / "robot" / "."))


def test_a_float16_store_copied_into_an_int8_store_verifies_and_shrinks(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # the way to compact an existing robot's store: migrate it into a new int8 folder
    src, small = str(tmp_path / "robot"), str(tmp_path / "small")
    _fill(src, 24)
    assert main(["migrate", src, small, "--embedding-dtype", "int8"]) == 0
    checksum = capsys.readouterr().out.split("sha256 ")[1].strip()
    with open_store(src, read_only=True) as a, open_store(small, read_only=True) as b:
        assert sorted(a.episode_ids()) == sorted(b.episode_ids())
        for ep_id in a.episode_ids():
            assert a.get(ep_id) == b.get(ep_id)
            np.testing.assert_allclose(b.embeddings(ep_id), a.embeddings(ep_id), atol=1 / 127)
    conn = sqlite3.connect(Path(small) / DB_NAME)
    assert conn.execute("SELECT DISTINCT dtype FROM embeddings").fetchall() == [("q8",)]
    conn.close()
    # on to a fleet server (halfvec) and back into float32: every copy verifies, one checksum
    assert migrate_store(small, pg_url).checksum == checksum
    back = str(tmp_path / "back")
    assert migrate_store(pg_url, back, config=StoreConfig(embedding_dtype="float32")).checksum == (
        checksum
    )


def test_an_empty_store_keeps_its_time_origin(tmp_path: Path, pg_url: str) -> None:
    src = str(tmp_path / "robot")
    with open_store(src) as store:
        store.note_origin(42 * S)  # the writer saw frames; no episode was kept
    report = migrate_store(src, pg_url)
    assert (report.episodes, report.copied) == (0, 0)
    with open_store(pg_url, read_only=True) as b:
        assert len(b) == 0 and b.origin_ns == 42 * S
    back = str(tmp_path / "back")
    migrate_store(pg_url, back)
    with open_store(back, read_only=True) as c:
        assert c.origin_ns == 42 * S


_KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from surprise_memory.memory.store.migrate import migrate_store

    def progress(done, total):
        print(done, flush=True)
        if done == int(sys.argv[3]):
            os.kill(os.getpid(), signal.SIGKILL)  # a kill -9 in the middle of a migration

    migrate_store(sys.argv[1], sys.argv[2], progress=progress, batch=3)
    """
)


def test_an_interrupted_migration_finishes_when_run_again(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    src = str(tmp_path / "robot")
    _fill(src, 20)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.run(
        [sys.executable, "-c", _KILLED, src, pg_url, "9"],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -9 and child.stdout.split() == ["3", "6", "9"]
    with open_store(pg_url, read_only=True) as partial:
        assert len(partial) == 9  # three batches of three, each one transaction
    assert main(["migrate", src, pg_url]) == 0
    out = capsys.readouterr().out
    assert "16 episodes (7 copied, 9 already there)" in out and "verified" in out
    with open_store(src, read_only=True) as a, open_store(pg_url, read_only=True) as b:
        _same(a, b)
        assert store_digest(a) == store_digest(b)


def test_verification_finds_a_changed_or_an_extra_episode(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    src = str(tmp_path / "robot")
    _fill(src, 10)
    migrate_store(src, pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE surprise_memory.episodes SET surprise = surprise + 1 "
            "WHERE seq = (SELECT min(seq) FROM surprise_memory.episodes)"
        )
    with pytest.raises(StoreError, match="differs between"):
        migrate_store(src, pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM surprise_memory.episodes "
            "WHERE seq = (SELECT max(seq) FROM surprise_memory.episodes)"
        )
    with open_store(src, read_only=True) as store:
        last = store.episode_ids()[-1]
    # the next run copies the missing episode again; the changed one is still reported
    with pytest.raises(StoreError, match="differs between"):
        migrate_store(src, pg_url)
    with open_store(pg_url, read_only=True) as store:
        assert last in store
    assert main(["migrate", src, pg_url]) == 1
    assert "differs between" in capsys.readouterr().err


def _robot_folder(path: Path, robot: str, n: int, seed: int) -> str:
    """One robot's folder: ``n`` episodes with ids of its own."""
    rng = np.random.default_rng(seed)
    with open_store(str(path)) as store:
        for i in range(n):
            frames = [
                Frame(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8), i * S + j) for j in range(8)
            ]
            store.add(
                frames,
                rng.standard_normal((8, DIM)),
                stamp_ns=i * S + 5,
                surprise=float(i),
                embedder_model=MODEL,
                embedder_pretrained=True,
                robot_id=robot,
                episode_id=f"{robot}-{i}",
            )
    return str(path)


_MIGRATE = (
    "import sys\nfrom surprise_memory.cli import main\nsys.exit(main(['migrate', *sys.argv[1:]]))"
)


def test_two_robots_migrate_into_one_fleet_store_one_after_another_and_at_once(
    tmp_path: Path, pg_url: str, pg_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    r1 = _robot_folder(tmp_path / "r1", "r1", 6, 1)
    r2 = _robot_folder(tmp_path / "r2", "r2", 5, 2)
    assert main(["migrate", r1, pg_url]) == 0
    assert main(["migrate", r2, pg_url]) == 0  # the fleet store holds r1's: not a difference
    assert capsys.readouterr().out.count("verified") == 2
    at_once = new_database(pg_server)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _MIGRATE, src, at_once], env=env)
        for src in (r1, r2)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    for fleet in (pg_url, at_once):
        with open_store(fleet, read_only=True) as store:
            assert (
                sorted(store.get(i).robot_id for i in store.episode_ids())
                == ["r1"] * 6 + ["r2"] * 5
            )
            for src in (r1, r2):
                with open_store(src, read_only=True) as robot:
                    for ep_id in robot.episode_ids():
                        assert robot.get(ep_id) == store.get(ep_id)


def test_a_batch_that_meets_an_episode_copied_meanwhile_is_copied_one_by_one(
    tmp_path: Path, pg_url: str
) -> None:
    # what a second run of the same migration sees: DST took an episode after this run
    # listed what DST held, so the batch's COPY fails on its id and is rolled back whole
    src = str(tmp_path / "robot")
    _fill(src, 12)
    with open_store(src, read_only=True) as a, open_store(pg_url) as b:
        ids = a.episode_ids()
        rec = a.get(ids[3])
        b.import_episode(rec, rec.load_jpegs(), a.embeddings(ids[3]))
        assert migrate._copy(a, b, ids, a.origin_ns) == len(ids) - 1
        assert sorted(b.episode_ids()) == sorted(ids)
        with pytest.raises(StoreError, match="already in the store"):
            b.import_episodes([EpisodeCopy(rec, rec.load_jpegs(), a.embeddings(ids[3]))])
    report = migrate_store(src, pg_url)
    assert (report.copied, report.skipped) == (0, len(ids))


def test_many_robot_folders_load_a_fleet_store_in_one_command(
    tmp_path: Path, pg_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = new_database(pg_server)
    r1 = _robot_folder(tmp_path / "r1", "r1", 4, 3)
    r2 = _robot_folder(tmp_path / "r2", "r2", 3, 4)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "episodes.sqlite3").write_bytes(b"not a database")
    # the broken folder is reported and the others still go: exit 1 at the end; the HNSW
    # index is built once, after the last folder (each copy into it costs ms an episode)
    assert main(["migrate", r1, str(broken), r2, fleet]) == 1
    assert _has_hnsw(fleet)
    said = capsys.readouterr()
    assert said.out.count("verified") == 2, said.out
    assert "(2/3 " in said.err and "1 of 3 stores failed" in said.err, said.err
    assert str(broken) in said.err.splitlines()[-1]
    with open_store(fleet, read_only=True) as store:
        assert sorted(store.episode_ids()) == [f"r1-{i}" for i in range(4)] + [
            f"r2-{i}" for i in range(3)
        ]
    # run again without it: nothing copied twice, everything verified
    assert main(["migrate", r1, r2, fleet]) == 0
    out = capsys.readouterr().out
    assert "(0 copied, 4 already there)" in out and "(0 copied, 3 already there)" in out


_FLEET_KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from surprise_memory.memory.store.migrate import migrate_stores

    def progress(source, done, total):
        print(source, done, flush=True)
        if source == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # in the second folder, after its first batch

    migrate_stores(sys.argv[1:-1], sys.argv[-1], progress=progress)
    """
)


def test_a_fleet_load_killed_in_its_second_folder_finishes_when_run_again(
    tmp_path: Path, pg_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``migrate`` of many folders into a new fleet server, killed with SIGKILL in the
    middle of the second folder: the first folder and the second's first batch are in, the
    HNSW index (built once after the last folder) is not yet; the same command again
    copies only what is missing and builds the index."""
    fleet = new_database(pg_server)
    r1 = _robot_folder(tmp_path / "r1", "r1", 70, 5)
    r2 = _robot_folder(tmp_path / "r2", "r2", 2 * migrate.IMPORT_BATCH + 10, 6)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.run(
        [sys.executable, "-c", _FLEET_KILLED, r1, r2, fleet],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == -9, child.stderr
    assert child.stdout.splitlines()[-1] == f"1 {migrate.IMPORT_BATCH}"
    with open_store(fleet, read_only=True) as partial:
        assert len(partial) == 70 + migrate.IMPORT_BATCH  # whole batches, each one commit
    assert not _has_hnsw(fleet)
    assert main(["migrate", r1, r2, fleet]) == 0
    out = capsys.readouterr().out
    assert "(0 copied, 70 already there)" in out, out
    assert f"({migrate.IMPORT_BATCH + 10} copied, {migrate.IMPORT_BATCH} already there)" in out
    assert out.count("verified") == 2 and _has_hnsw(fleet)
    for folder in (r1, r2):
        with open_store(folder, read_only=True) as a, open_store(fleet, read_only=True) as b:
            for ep_id in a.episode_ids():
                assert ep_id in b


def _has_hnsw(url: str) -> bool:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT to_regclass('surprise_memory.episode_vectors_hnsw') IS NOT NULL"
        ).fetchone()
    return bool(row and row[0])


def test_a_migration_builds_the_search_index_after_its_last_copy(
    tmp_path: Path, pg_url: str, pg_server: Any
) -> None:
    src = str(tmp_path / "robot")
    _fill(src, 12)  # 8 kept: the budget evicted the oldest
    report = migrate_store(src, pg_url, batch=3, build_index=False)
    assert report.copied == 8 and not _has_hnsw(pg_url)
    q = np.random.default_rng(3).standard_normal(DIM)
    with open_store(src, read_only=True) as a, open_store(pg_url) as b:
        kw = {"embedding": q, "embedder_model": MODEL, "max_results": 5}
        want = [h.episode.id for h in a.search(**kw)]
        assert [h.episode.id for h in b.search(**kw)] == want  # answered without the index
        b.build_deferred_index()
        assert _has_hnsw(pg_url)
        assert [h.episode.id for h in b.search(**kw)] == want
    fresh = new_database(pg_server)
    migrate_store(src, fresh, batch=3)  # by default, built at the end
    assert _has_hnsw(fresh)


def test_query_command_reads_postgres_and_filters_by_robot(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(pg_url, 12)
    assert main(["query", pg_url, "--robot-id", "alpha", "-k", "20", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["hits"] and {h["robot_id"] for h in out["hits"]} == {"alpha"}
    assert all(h["frames"][0].startswith("frames/") for h in out["hits"])
    assert "password" not in out["store"]
    assert main(["query", pg_url, "--near", "7,-1", "--radius", "0.5"]) == 0
    assert "(7.00, -1.00, 0.00) map" in capsys.readouterr().out


def test_place_keyframes_are_copied_with_their_kind_and_every_view(
    tmp_path: Path, pg_url: str
) -> None:
    """A copy keeps every place view as the source holds it, even into a store whose own
    place_history is smaller (it bounds adds, not copies), and answers the same (issue 47)."""
    src = str(tmp_path / "robot")
    _fill(src, 6)
    rng = np.random.default_rng(3)
    keys = ("map@2m:0,0:0/8", "map@2m:5,0:4/8")
    with open_store(src, StoreConfig(place_history=2)) as store:
        for i in range(6):
            store.add(
                [Frame(rng.integers(0, 256, (16, 20, 3), dtype=np.uint8), 100 * S + i * S)],
                rng.standard_normal((1, DIM)), stamp_ns=100 * S + i * S, surprise=0.0,
                embedder_model=MODEL, embedder_pretrained=True, robot_id="alpha",
                pose=Pose(10.0 * (i % 2), 0.0, 0.0, frame_id="map"), kind="place",
                place_key=keys[i % 2],
            )  # fmt: skip
        places = {h.episode.id for h in store.search(kinds={"place"}, max_results=20)}
        held = len(store)
    assert len(places) == 4  # two views of each place
    report = migrate_store(src, pg_url, config=StoreConfig(place_history=1))
    assert report.episodes == report.copied == held
    back = str(tmp_path / "back")
    migrate_store(pg_url, back, config=StoreConfig(place_history=1))
    for copy in (pg_url, back):
        with open_store(src, read_only=True) as a, open_store(copy, read_only=True) as b:
            _same(a, b)
            got = {h.episode.id for h in b.search(kinds={"place"}, max_results=20)}
            assert got == places
            assert a.latest_places(keys) == b.latest_places(keys)
            assert len(a.latest_places(keys)) == 2
