"""The SQLite store's on-disk episode index against exact search, and its crash safety.

Real store folders and real usearch files, at a small scale: the index's sizes are
shrunk (segments of 256 episodes, a checkpoint every 64 additions, exact scoring of at
most 16 filtered episodes per segment) so that a few thousand episodes go through every
path a robot-year does: sealed memory-mapped segments, the RAM tail, the approximate
search with filters and its widening, the catch-up after a kill -9, the rebuild of a
missing or damaged index, and eviction.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from surprise_memory.config import StoreConfig
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import EpisodeStore, ann, episode_index, segment_merge
from surprise_memory.memory.store.catalog import Catalog
from surprise_memory.memory.store.records import EpisodeRecord
from surprise_memory.memory.store.schema import insert_episode
from surprise_memory.memory.store.search import EmbeddingIndex
from surprise_memory.memory.store.segment_merge import SegmentMerger
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
DIM = 32
FRAMES = 4
PLACES = 60
MODEL = "test-embedder"
ROOT = Path(__file__).resolve().parents[1]
SMALL = {"SEGMENT_SIZE": 256, "CHECKPOINT_EVERY": 64, "MERGE_FANOUT": 1}  # merges: own tests


@pytest.fixture(autouse=True)
def small_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments, checkpoints and exact scoring at a scale a test reaches."""
    for name, value in SMALL.items():
        monkeypatch.setattr(ann, name, value)
    monkeypatch.setattr(episode_index, "EXACT_PER_SEGMENT", 16)
    monkeypatch.setattr(episode_index, "RERANK", 40)
    monkeypatch.setattr(episode_index, "_MIN_COUNT", 8)


def _world(seed: int = 3, dim: int = DIM) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((PLACES, dim)), rng.uniform(0, 200, (PLACES, 2))


def _episode(
    i: int, rng: np.random.Generator, dim: int = DIM
) -> tuple[np.ndarray, float, float, str]:
    """Frames of episode ``i``: its place's direction, a slow drift, its own noise."""
    vec, pos = _world(dim=dim)
    place = int(rng.integers(PLACES))
    drift = np.sin(i / 400 + np.arange(dim))
    centre = vec[place] + 0.3 * drift + 0.6 * rng.standard_normal(dim)
    frames = centre + 0.4 * rng.standard_normal((FRAMES, dim))
    x, y = pos[place] + rng.normal(0, 2, 2)
    return frames, float(x), float(y), "alpha" if i % 3 else "bravo"


def _frames(stamp: int) -> list[Frame]:
    return [Frame(np.zeros((8, 8, 3), dtype=np.uint8), stamp + j) for j in range(FRAMES)]


def _add(store: EpisodeStore, i: int, rng: np.random.Generator, dim: int = DIM) -> None:
    emb, x, y, robot = _episode(i, rng, dim)
    store.add(
        _frames(i * 60 * S),
        emb,
        stamp_ns=i * 60 * S,
        surprise=float(rng.random()),
        embedder_model=MODEL,
        embedder_pretrained=True,
        pose=Pose(x, y, 0.0, frame_id="map"),
        episode_id=f"e{i:05d}",
        robot_id=robot,
    )


def _fill(path: Path, n: int, seed: int = 5, dim: int = DIM) -> None:
    """``n`` episodes: the first through ``add``, the rest as rows in one transaction.

    The rows are what ``add`` commits, without the JPEG files (queries without images
    never read them); the index takes them in when the store opens next (its catch-up).
    """
    rng = np.random.default_rng(seed)
    with EpisodeStore(path) as store:
        _add(store, 0, rng, dim)
    conn = sqlite3.connect(path / "episodes.sqlite3", isolation_level=None)
    conn.execute("BEGIN")
    for i in range(1, n):
        emb, x, y, robot = _episode(i, rng, dim)
        unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
        blobs = [row.astype("<f2").tobytes() for row in unit]
        stamp = i * 60 * S
        rec = EpisodeRecord(
            id=f"e{i:05d}",
            stamp_ns=stamp,
            start_ns=stamp,
            end_ns=stamp + FRAMES,
            pose=Pose(x, y, 0.0, frame_id="map"),
            pose_valid=True,
            surprise=float(rng.random()),
            threshold=float("nan"),
            frame_stamps_ns=tuple(stamp + j for j in range(FRAMES)),
            frame_paths=tuple(f"frames/e{i:05d}/{j:02d}.jpg" for j in range(FRAMES)),
            encoder_model="enc",
            encoder_pretrained=True,
            embedder_model=MODEL,
            embedder_pretrained=True,
            created_wall_ns=0,
            robot_id=robot,
        )
        insert_episode(conn, rec, nbytes=100, blobs=blobs, dtype="<f2", jpeg_sizes=[25] * FRAMES)
    conn.execute("COMMIT")
    conn.close()


def _exact(store: EpisodeStore) -> Catalog:
    """Today's exact search (every frame vector in RAM) over what the store holds."""
    catalog = Catalog(DIM)
    for ep_id in store.episode_ids():
        rec = store.get(ep_id)
        catalog.add(
            store._folder.key(ep_id),
            ep_id,
            1,
            stamp_ns=rec.stamp_ns,
            position=rec.pose.position,
            pose_valid=rec.pose_valid,
            surprise=rec.surprise,
            unit_embeddings=EmbeddingIndex.normalise(store.embeddings(ep_id)),
            robot_id=rec.robot_id,
            pose_frame=rec.pose.frame_id,
        )
    return catalog


def _queries(count: int, seed: int = 11) -> list[RetrievalQuery]:
    """Text-like queries, unfiltered and with each filter, selective and not."""
    vec, pos = _world()
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        place = int(rng.integers(PLACES))
        q = (vec[place] + 0.8 * rng.standard_normal(DIM)).astype(np.float32)
        base = {"embedding": q, "embedder_model": MODEL, "max_results": 10}
        start = int(rng.integers(0, 2500)) * 60 * S
        x, y = pos[place]
        filters = [
            {},
            {"start_ns": start, "end_ns": start + 30 * 60 * S},  # 30 episodes: exact
            {"start_ns": start // 3, "end_ns": start // 3 + 1500 * 60 * S},  # wide: search
            {"near": (float(x), float(y), 0.0), "radius_m": 25.0, "near_frame": "map"},
            {"robot_id": "bravo"},
        ]
        out += [RetrievalQuery(**base, **f) for f in filters]  # type: ignore[arg-type]
    return out


def _recall(store: EpisodeStore, queries: list[RetrievalQuery]) -> list[float]:
    """recall@10 of each query against exact search; checks every hit is stored and exact."""
    exact = _exact(store)
    stored = set(store.episode_ids())
    out = []
    for q in queries:
        want = exact.index.search(q, 10)
        got = store.retrieve(q)
        ids = [h.episode.id for h in got]
        assert set(ids) <= stored
        truth = {int(k) for k in want.keys}
        keys = [store._folder.key(i) for i in ids]
        out.append(len(truth & set(keys)) / len(truth) if truth else 1.0)
        # the scores of what is returned are exact max-over-frames scores
        exact_score = dict(zip(want.keys.tolist(), want.scores.tolist(), strict=True))
        for key, hit in zip(keys, got, strict=True):
            if key in exact_score:
                assert hit.score == pytest.approx(exact_score[key], abs=1e-5)
    return out


def _index_files(path: Path) -> list[str]:
    return sorted(p.name for p in (path / "index").iterdir())


def test_recall_against_exact_search_with_and_without_filters(tmp_path: Path) -> None:
    path = tmp_path / "store"
    _fill(path, 2500)
    with EpisodeStore(path) as store:  # the index takes in the rows: sealed segments + tail
        ann_index = store._folder.catalog.index.ann  # type: ignore[attr-defined]
        assert ann_index is not None and len(ann_index) == 2500 and ann_index.segments == 10
        queries = _queries(12)
        recalls = np.asarray(_recall(store, queries)).reshape(12, 5)
    by_filter = recalls.mean(axis=0)
    # unfiltered, 30-episode window, 1500-episode window, 25 m radius, one robot
    assert np.all(by_filter >= 0.99), by_filter
    assert any(name.startswith("segment-") for name in _index_files(path))


def test_the_same_rows_build_the_same_graphs(tmp_path: Path) -> None:
    """A catch-up or a rebuild gives the same index, so the same answers, every time (usearch
    builds a batch on every core by default, and then each build's graph differed)."""
    files = []
    for name in ("a", "b"):
        path = tmp_path / name
        _fill(path, 700)
        with EpisodeStore(path):
            pass  # the catch-up at open builds the graphs, sealed segments and the tail
        index = path / "index"
        files.append({n: (index / n).read_bytes() for n in _index_files(path) if "usearch" in n})
    assert len(files[0]) >= 3 and files[0].keys() == files[1].keys()
    assert files[0] == files[1]


def test_a_read_only_store_answers_like_the_writer_and_sees_new_episodes(tmp_path: Path) -> None:
    path = tmp_path / "store"
    _fill(path, 700)
    rng = np.random.default_rng(9)
    q = _queries(2)
    with EpisodeStore(path) as writer, EpisodeStore(path, read_only=True) as reader:
        for query in q:
            assert [h.episode.id for h in reader.retrieve(query)] == [
                h.episode.id for h in writer.retrieve(query)
            ]
        for i in range(700, 720):
            _add(writer, i, rng)
        assert reader.refresh()
        assert len(reader) == 720
        last = writer.embeddings("e00719").mean(axis=0).astype(np.float32)
        hit = reader.search(embedding=last, embedder_model=MODEL, max_results=1)
        assert hit[0].episode.id == "e00719"


_KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    import numpy as np
    sys.path.insert(0, sys.argv[3])
    import test_store_episode_index as t
    from surprise_memory.memory.store import EpisodeStore, ann
    for name, value in t.SMALL.items():
        setattr(ann, name, value)
    rng = np.random.default_rng(1)
    store = EpisodeStore(Path(sys.argv[1]))
    for i in range(1000, 1000 + int(sys.argv[2])):
        t._add(store, i, rng)
    os.kill(os.getpid(), signal.SIGKILL)  # kill -9 after the last commit, before any close
    """
)


def test_after_kill_9_the_index_catches_up_and_returns_only_stored_episodes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store"
    _fill(path, 300)
    with EpisodeStore(path):
        pass  # the index holds the 300 (a checkpoint at open)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.run(
        [sys.executable, "-c", _KILLED, str(path), "100", str(Path(__file__).parent)],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == -9, child.stderr
    manifest = json.loads((path / "index" / "manifest.json").read_text())
    # 100 adds after key 300, a checkpoint every 64: the files cover up to key 364
    assert manifest["covered"] == 364
    # the database lost two episodes the index holds (as an eviction the kill cut short
    # would leave them): they must never come back
    conn = sqlite3.connect(path / "episodes.sqlite3", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("DELETE FROM episodes WHERE id IN ('e01010', 'e01050')")
    conn.close()
    with EpisodeStore(path) as store:
        assert len(store) == 398
        ann_index = store._folder.catalog.index.ann  # type: ignore[attr-defined]
        assert ann_index.covered == 400  # caught up (and checkpointed) at open
        for ep_id in ("e01080", "e01099"):
            q = store.embeddings(ep_id).mean(axis=0).astype(np.float32)
            hits = store.search(embedding=q, embedder_model=MODEL, max_results=5)
            assert hits[0].episode.id == ep_id
        for query in _queries(6):
            for hit in store.retrieve(query):
                assert hit.episode.id not in ("e01010", "e01050")
        assert np.mean(_recall(store, _queries(6))) >= 0.99


@pytest.mark.parametrize("damage", ["deleted", "manifest", "segment", "tail"])
def test_a_missing_or_damaged_index_is_rebuilt_with_one_log_line(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "store"
    _fill(path, 600)
    queries = _queries(4)
    with EpisodeStore(path):
        pass
    index = path / "index"
    if damage == "deleted":
        for f in index.iterdir():
            f.unlink()
        index.rmdir()
    elif damage == "manifest":
        (index / "manifest.json").write_text("{not json")
    elif damage == "segment":
        seg = next(index.glob("segment-*.usearch"))
        seg.write_bytes(seg.read_bytes()[:100])
    else:
        (index / "tail.f32").write_bytes(b"")
    caplog.set_level(logging.WARNING, logger="surprise_memory.memory.store.ann")
    with EpisodeStore(path) as store:
        # the graph is built on several threads: answers agree with exact search, within
        # the recall bound, not necessarily with the graph before
        recalls = _recall(store, queries)
    rebuilt = [r for r in caplog.records if "rebuilding the episode index" in r.getMessage()]
    assert len(rebuilt) == 1 and "600 episodes" in rebuilt[0].getMessage()
    assert np.mean(recalls) >= 0.99
    with EpisodeStore(path):  # rebuilt files open without a rebuild
        pass
    assert len([r for r in caplog.records if "rebuilding" in r.getMessage()]) == 1


def test_eviction_removes_episodes_from_the_answers_and_compacts_the_filters(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store"
    _fill(path, 800)
    rng = np.random.default_rng(4)
    with EpisodeStore(path, StoreConfig(max_episodes=250)) as store:
        _add(store, 800, rng)  # alpha's budget: 250 of its ~534
        _add(store, 801, rng)  # bravo's budget: 250 of its ~268
        held = set(store.episode_ids())
        robots = [store.get(i).robot_id for i in held]
        assert robots.count("alpha") == 250 and robots.count("bravo") == 250
        index = store._folder.catalog.index
        assert len(index) == 500 and len(index._keys) < 600  # compacted
        recalls = _recall(store, _queries(6))
        for q in _queries(6):
            assert {h.episode.id for h in store.retrieve(q)} <= held
    assert np.mean(recalls) >= 0.99
    with EpisodeStore(path) as store:  # reopened: the evicted stay out
        assert set(store.episode_ids()) == held
        for q in _queries(3):
            assert {h.episode.id for h in store.retrieve(q)} <= held


_OPEN_THEN_ROS = textwrap.dedent(
    """
    import sys
    from surprise_memory.memory.store import EpisodeStore
    store = EpisodeStore(sys.argv[1], read_only=True)  # loads the index's library
    print(len(store.search(max_results=3)))
    import rclpy  # what `surprise-memory goto` does next
    rclpy.init()
    node = rclpy.create_node("after_store")
    node.destroy_node()
    rclpy.shutdown()
    print("ros ok")
    """
)


@pytest.mark.ros  # starts rclpy in a child process: the main stage only
def test_a_process_that_opens_a_store_can_start_ros_afterwards(tmp_path: Path) -> None:
    path = tmp_path / "store"
    _fill(path, 40)
    with EpisodeStore(path):
        pass
    child = subprocess.run(
        [sys.executable, "-c", _OPEN_THEN_ROS, str(path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["3", "ros", "ok"]


# ------------------------------------------------------------------ segment merges
def _named_files(path: Path) -> list[str]:
    """The files the manifest names (with itself): what an index folder should hold."""
    manifest = json.loads((path / "index" / "manifest.json").read_text())
    names = {"manifest.json", *ann.segment_files("tail")}
    for entry in manifest["segments"]:
        names.update(ann.segment_files(entry["name"]))
    return sorted(n for n in names if (path / "index" / n).exists())


def _ann(store: EpisodeStore) -> ann.AnnIndex:
    index = store._folder.catalog.index.ann  # type: ignore[attr-defined]
    assert index is not None
    return index


def test_sealed_segments_merge_in_the_background_while_adds_and_queries_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ann, "MERGE_FANOUT", 4)
    path = tmp_path / "store"
    _fill(path, 2500)  # 9 sealed segments of 256 + a tail: two merges due at open
    rng = np.random.default_rng(8)
    failures: list[BaseException] = []
    answered = 0
    stop = threading.Event()

    def ask(store: EpisodeStore) -> None:
        nonlocal answered
        while not stop.is_set():
            for q in _queries(1, seed=answered):
                try:
                    assert len(store.retrieve(q)) == 10 or q.radius_m
                    answered += 1
                except BaseException as exc:  # reported by the test
                    failures.append(exc)

    with EpisodeStore(path) as store, EpisodeStore(path, read_only=True) as reader:
        asker = threading.Thread(target=ask, args=(store,))
        asker.start()
        for i in range(2500, 3100):  # three more seals, a third merge, while queries run
            _add(store, i, rng)
        stop.set()
        asker.join()
        assert store._merger.wait(60)
        # a reader opened before the merges keeps its memory-mapped parts (their files
        # removed under it) and answers as the writer does
        assert reader.refresh()
        for q in _queries(3):
            assert [h.episode.id for h in reader.retrieve(q)] == [
                h.episode.id for h in store.retrieve(q)
            ]
        index = _ann(store)
        # 3,100 episodes: 12 sealed segments merged into 3 graphs, and the tail of 28
        assert [len(s) for s in index.parts()] == [1024, 1024, 1024, 28]
        assert len(index) == 3100 and index.segments == 4
        recalls = _recall(store, _queries(8))
        answers = [[h.episode.id for h in store.retrieve(q)] for q in _queries(3)]
    assert not failures, failures[:3]
    assert answered > 0
    assert np.mean(recalls) >= 0.99
    assert _index_files(path) == _named_files(path)  # the parts' files are gone
    with EpisodeStore(path) as store:  # the merged files open as they are
        assert _ann(store).segments == 4
        assert [[h.episode.id for h in store.retrieve(q)] for q in _queries(3)] == answers


def test_a_merge_leaves_out_the_episodes_the_store_no_longer_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store"
    _fill(path, 1100)  # keys 1..1100: 4 sealed segments (1..1024) + a tail of 76
    gone = [f"e{i:05d}" for i in range(0, 1000, 2)]  # keys 1, 3, ..., 999
    with EpisodeStore(path) as store:  # no merge yet (MERGE_FANOUT 1)
        assert store.delete(gone) == 500
        assert len(_ann(store)) == 1100  # the files keep what the store no longer holds
    monkeypatch.setattr(ann, "MERGE_FANOUT", 4)
    with EpisodeStore(path) as store:
        assert store._merger.wait(60)
        index = _ann(store)
        assert index.segments == 2 and len(index) == 600
        assert np.mean(_recall(store, _queries(6))) >= 0.99
        for q in _queries(6):
            assert not {h.episode.id for h in store.retrieve(q)} & set(gone)


MERGE_SEGMENT, MERGE_DIM = 8192, 256  # a merge of 4 x 8,192 vectors of 256-d: seconds
MERGE_ROWS = 4 * MERGE_SEGMENT + 100


@pytest.fixture(scope="module")
def merge_rows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of ``MERGE_ROWS`` episodes of ``MERGE_DIM`` as rows only (its index holds
    the first): the writer that opens it builds its index. Made once (half a minute),
    copied by each test."""
    path = tmp_path_factory.mktemp("merge_rows") / "store"
    _fill(path, MERGE_ROWS, dim=MERGE_DIM)
    return path


# a writer process, the kill tests' victim: it opens the store (building the index from the
# rows, then merging), answers queries and adds episodes until it is killed
_STORE_WRITER = textwrap.dedent(
    """
    import sys
    import threading
    from pathlib import Path

    import numpy as np

    sys.path.insert(0, sys.argv[2])
    import test_store_episode_index as t
    from surprise_memory.memory.store import EpisodeStore, ann

    ann.SEGMENT_SIZE, ann.MERGE_FANOUT = t.MERGE_SEGMENT, 4
    store = EpisodeStore(Path(sys.argv[1]))  # indexes the rows, then starts the merge
    lines = threading.Lock()  # two threads print: print() writes the text and its end apart

    def say(line: str) -> None:
        with lines:
            sys.stdout.write(line + "\\n")
            sys.stdout.flush()

    say("merging" if store._merger.running else "not merging")
    probes = [f"e{i:05d}" for i in range(1, 4 * t.MERGE_SEGMENT, 997)]

    def ask() -> None:  # queries all along, as an agent's
        while True:
            for ep_id in probes:
                q = store.embeddings(ep_id).mean(axis=0).astype(np.float32)
                hits = store.search(embedding=q, embedder_model=t.MODEL, max_results=5)
                say("answered" if hits[0].episode.id == ep_id else f"wrong {ep_id}")

    threading.Thread(target=ask, daemon=True).start()
    rng = np.random.default_rng(1)
    for i in range(int(sys.argv[3]), 10**6):
        t._add(store, i, rng, t.MERGE_DIM)
        say(f"added e{i:05d}")  # after add returned: committed
    """
)


def _merge_ends_while_it_works(merger: SegmentMerger, stall_s: float = 60.0) -> bool:
    """Wait for a merge as long as its thread uses CPU; False when it stops for ``stall_s``.

    The merge runs at nice 10 by design: on a machine busy with other programs it gets a
    small share of the CPU (24 s alone, 54 s beside two busy processes, over 120 s in CI
    beside its other stages), so a wall-clock bound fails a merge that works. A stuck one
    (a lock never released, a thread waiting forever) uses no CPU.
    """
    thread = merger._thread  # the merge's own thread: its CPU time is its progress
    assert thread is not None and thread.native_id is not None
    stat = Path(f"/proc/self/task/{thread.native_id}/stat")
    used, since = -1, time.monotonic()
    while merger.running:
        try:  # utime + stime, in clock ticks
            now = sum(int(v) for v in stat.read_text().rsplit(")", 1)[1].split()[11:13])
        except OSError:  # the thread ended between the two checks
            break
        if now != used:
            used, since = now, time.monotonic()
        elif time.monotonic() - since > stall_s:
            return False
        merger.wait(1.0)
    return merger.wait(0)


@pytest.mark.slow  # 1-3 min on a loaded machine; the robot stages run the merge's own tests
def test_a_store_killed_in_a_merge_while_it_adds_and_answers_loses_nothing_and_merges_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, merge_rows: Path
) -> None:
    """A writer process merges four sealed segments in the background while it adds episodes
    and answers queries, and is killed with SIGKILL while the merged files are written.
    Opened again, the store holds every episode an add returned for, its index finds each
    of them, the kill's files are gone, and the open has started the merge again."""
    path = tmp_path / "store"
    filled = MERGE_ROWS
    shutil.copytree(merge_rows, path)  # rows only: the writer's open indexes them
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", _STORE_WRITER, str(path), str(Path(__file__).parent),
         str(filled)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert child.stdout is not None
    added: list[str] = []
    during = {"added": 0, "answered": 0}  # since the merge began writing its files
    try:
        assert child.stdout.readline() == "merging\n", child.stderr.read()  # type: ignore[union-attr]
        writing = False
        while during["added"] < 5 or during["answered"] < 1:
            line = child.stdout.readline()
            assert line, child.stderr.read()  # type: ignore[union-attr]
            word, *rest = line.split()
            assert word in during, line  # "wrong <id>": a query missed its own episode
            during[word] += writing
            added += rest
            writing = writing or bool(list((path / "index").glob("segment-1-*.tmp")))
        # the merge thread runs at a lower priority than the rest of the process
        nice = {
            int(task.name): int((task / "stat").read_text().rsplit(")", 1)[1].split()[16])
            for task in Path(f"/proc/{child.pid}/task").iterdir()
        }
        main = nice.pop(child.pid)  # 0, unless the tests themselves run niced
        assert max(main, segment_merge.NICE) in nice.values(), (main, nice)
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == -9
    added += [line.split()[1] for line in out.splitlines() if line.startswith("added ")]
    left = _index_files(path)
    assert any(n.endswith(".tmp") for n in left) and left != _named_files(path)  # mid-merge
    for name, value in (("SEGMENT_SIZE", MERGE_SEGMENT), ("MERGE_FANOUT", 4)):
        monkeypatch.setattr(ann, name, value)
    with EpisodeStore(path) as store:
        assert store._merger.running  # the open started the merge again
        assert _merge_ends_while_it_works(store._merger)
        index = _ann(store)
        assert len(store) == filled + len(added) and len(index) == len(store)
        # the four sealed segments are one; the adds are in the tail, with the last 100 rows
        assert [len(s) for s in index.parts()] == [4 * MERGE_SEGMENT, 100 + len(added)]
        probe = np.random.default_rng(1).choice(filled, 40, replace=False)
        for ep_id in [*added, *(f"e{i:05d}" for i in probe)]:
            q = store.embeddings(ep_id).mean(axis=0).astype(np.float32)
            hits = store.search(embedding=q, embedder_model=MODEL, max_results=5)
            assert hits[0].episode.id == ep_id
    assert _index_files(path) == _named_files(path)  # what the kill left is removed


@pytest.mark.slow  # 1-2 min on a loaded machine
def test_a_store_killed_while_it_builds_its_index_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, merge_rows: Path
) -> None:
    """The rows of 32,868 episodes without their index (a lost index, or a database copied
    alone): a writer's open builds it, sealing a segment at a time. Killed with SIGKILL
    after the first seal, before the open returned, the next open builds on from what the
    kill left (or anew) and finds every episode."""
    path = tmp_path / "store"
    filled = MERGE_ROWS
    shutil.copytree(merge_rows, path)  # rows only: the writer's open indexes them
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", _STORE_WRITER, str(path), str(Path(__file__).parent),
         str(filled)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    first = path / "index" / f"segment-1-{MERGE_SEGMENT}.usearch"
    try:
        deadline = time.monotonic() + 300
        while not first.exists():  # the first segment sealed: the build is under way
            assert time.monotonic() < deadline and child.poll() is None, child.stderr
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == -9 and "merging" not in out  # killed inside the open
    monkeypatch.setattr(ann, "SEGMENT_SIZE", MERGE_SEGMENT)  # MERGE_FANOUT 1: no merge
    with EpisodeStore(path) as store:
        index = _ann(store)
        assert len(store) == filled and len(index) == filled
        assert [len(s) for s in index.parts()] == [MERGE_SEGMENT] * 4 + [100]
        probe = np.random.default_rng(2).choice(filled, 40, replace=False)
        for ep_id in (f"e{i:05d}" for i in probe):
            q = store.embeddings(ep_id).mean(axis=0).astype(np.float32)
            hits = store.search(embedding=q, embedder_model=MODEL, max_results=5)
            assert hits[0].episode.id == ep_id
    assert _index_files(path) == _named_files(path)


_MERGE_DISK_FULL = textwrap.dedent(
    """
    import logging
    import resource
    import signal
    import sys

    import numpy as np

    sys.path.insert(0, sys.argv[2])
    import test_store_episode_index as t
    from surprise_memory.memory.store import EpisodeStore, ann

    for name, value in {**t.SMALL, "MERGE_FANOUT": 4}.items():
        setattr(ann, name, value)
    logging.basicConfig(level=logging.WARNING)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[3]), int(sys.argv[3])))
    with EpisodeStore(sys.argv[1]) as store:
        assert store._merger.wait(60)
        print(len(t._ann(store)), t._ann(store).segments)
        print(np.mean(t._recall(store, t._queries(4))))
    """
)


def test_a_merge_on_a_full_disk_leaves_the_index_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store"
    _fill(path, 1100)
    with EpisodeStore(path):
        pass  # the index's files: 4 sealed segments (1..1024) and the tail
    before = {n: (path / "index" / n).read_bytes() for n in _index_files(path)}
    # a write past 64 KiB fails: the merged vectors (1,024 x 32 float32, 128 KiB) do not fit
    limit = 64 * 1024
    assert limit < 1024 * DIM * 4
    child = subprocess.run(
        [sys.executable, "-c", _MERGE_DISK_FULL, str(path), str(Path(__file__).parent), str(limit)],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        },
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr
    assert "merging index segments 1-1024 failed" in child.stderr
    assert "File too large" in child.stderr and "tried again in 600 s" in child.stderr
    count, segments, recall = child.stdout.split()
    assert (int(count), int(segments), float(recall)) == (1100, 5, pytest.approx(1.0, abs=0.01))
    after = {n: (path / "index" / n).read_bytes() for n in _index_files(path)}
    assert after == before  # nothing changed, nothing left behind
    monkeypatch.setattr(ann, "MERGE_FANOUT", 4)
    with EpisodeStore(path) as store:  # room again: the merge is done at the next open
        assert store._merger.wait(60) and _ann(store).segments == 2


def _resident(path: Path) -> float:
    """The share of the file's bytes in the page cache (util-linux's ``fincore``)."""
    out = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return min(1.0, int(out.strip()) / max(path.stat().st_size, 1))  # whole pages counted


def _evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _mapping_flags(path: Path) -> list[set[str]]:
    """The kernel's flags of each of this process's mappings of ``path`` (``smaps``)."""
    flags, inside = [], False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        first = line.split(maxsplit=1)[0] if line.strip() else ""
        if re.fullmatch(r"[0-9a-f]+-[0-9a-f]+", first):  # a mapping's header line
            inside = line.endswith(" " + str(path))
        elif inside and first == "VmFlags:":
            flags.append(set(line.split()[1:]))
    return flags


def test_the_sealed_vectors_are_mapped_for_scattered_reads(tmp_path: Path) -> None:
    # a query reads a few hundred scattered rows of them: without MADV_RANDOM each page
    # fault reads the disk's read-ahead window around it (a robot-year held to 2 GiB read
    # 556 MiB per query, p50 1.35 s; RESULTS.md)
    path = tmp_path / "store"
    _fill(path, 700)
    with EpisodeStore(path):
        pass  # the catch-up seals two segments; a later open maps them
    with EpisodeStore(path, StoreConfig(index_prefetch=False), read_only=True) as store:
        index = store._folder.catalog.index.ann  # type: ignore[attr-defined]
        sealed = [seg for seg in index.parts() if not seg.in_ram]
        assert len(sealed) == 2 and index.parts()[-1].in_ram  # the tail stays in RAM
        files = [p for p in (path / "index").glob("segment-*") if p.suffix in (".keys", ".f32")]
        assert len(files) == 4
        for file in files:
            flags = _mapping_flags(file)
            assert flags and all("rr" in f for f in flags), (file.name, flags)  # rr: random
        assert len(store.retrieve(_queries(1)[0])) == 10  # read through those mappings


def test_an_open_reads_the_index_files_into_the_page_cache(tmp_path: Path) -> None:
    # the cold start after a boot: the memory-mapped segments are read in the background,
    # so queries do not each wait for the disk (index_prefetch)
    path = tmp_path / "store"
    _fill(path, 1000)
    subprocess.run(  # the index built in another process: none of its pages mapped here
        [
            sys.executable,
            "-c",
            f"from surprise_memory.memory.store import EpisodeStore as S\n"
            f"from surprise_memory.memory.store import ann\nann.SEGMENT_SIZE = 256\n"
            f"S({str(path)!r}).close()",
        ],
        check=True,
    )
    files = sorted((path / "index").glob("segment-*"))
    assert len(files) == 9  # 3 sealed segments: graph, keys, vectors
    vectors = [f for f in files if f.suffix == ".f32"]
    for f in files:
        _evict(f)
    evicted = all(_resident(f) == 0.0 for f in files)  # False where /tmp is a tmpfs
    with EpisodeStore(path, StoreConfig(index_prefetch=False), read_only=True) as store:
        assert store.wait_for_prefetch(0)  # none started
        if evicted:
            assert max(_resident(f) for f in vectors) < 0.5
    with EpisodeStore(path, read_only=True) as store:
        assert store.wait_for_prefetch(30)
        assert [_resident(f) for f in files] == [1.0] * len(files)
        hits = store.retrieve(_queries(1)[0])
        assert len(hits) == 10
