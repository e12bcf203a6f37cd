"""Retrieval: ranking and filters against a brute-force reference, and request validation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from surprise_memory.config import StoreConfig
from surprise_memory.errors import InputError, StoreError
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.retrieval import EmbedderMismatchError, RetrievalQuery
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.memory.store.search import EmbeddingIndex
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
DIM = 24
MODEL = "PE-Core-L-14-336"
N_EP = 40


@dataclass
class Truth:
    ids: list[str]
    stamps: np.ndarray
    positions: np.ndarray
    valid: np.ndarray
    emb: list[np.ndarray]


def _tiny_frames(t0: int, n: int) -> list[Frame]:
    return [Frame(np.full((8, 8, 3), 100, np.uint8), t0 + j) for j in range(n)]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Truth]:
    """A float32 store of 40 episodes (1-8 frames each), some without a valid pose."""
    rng = np.random.default_rng(7)
    path = tmp_path_factory.mktemp("world")
    truth = Truth([], np.zeros(N_EP, np.int64), np.zeros((N_EP, 3)), np.zeros(N_EP, bool), [])
    with EpisodeStore(path, StoreConfig(embedding_dtype="float32")) as store:
        for i in range(N_EP):
            n = int(rng.integers(1, 9))
            stamp = int(rng.integers(1, 1000)) * S  # not in insertion order
            pos = rng.uniform(-20, 20, size=3)
            valid = bool(rng.random() > 0.2)
            emb = rng.standard_normal((n, DIM)).astype(np.float32)
            rec = store.add(
                _tiny_frames(stamp, n),
                emb,
                stamp_ns=stamp,
                surprise=1.0,
                pose=Pose(*pos, frame_id="map") if valid else None,
                embedder_model=MODEL,
                embedder_pretrained=True,
            )
            truth.ids.append(rec.id)
            truth.stamps[i], truth.positions[i], truth.valid[i] = stamp, pos, valid
            truth.emb.append(emb / np.linalg.norm(emb, axis=1, keepdims=True))
    return path, truth


def _reference(truth: Truth, q: RetrievalQuery, k: int) -> list[tuple[str, float, float]]:
    """Filters and ordering written out episode by episode: (id, score, distance)."""
    rows = []
    for i, ep_id in enumerate(truth.ids):
        t = truth.stamps[i]
        if q.start_ns is not None and t < q.start_ns:
            continue
        if q.end_ns is not None and t > q.end_ns:
            continue
        dist = np.nan
        if q.near is not None:
            if not truth.valid[i]:
                continue
            dist = float(np.linalg.norm(truth.positions[i] - np.asarray(q.near)))
            if q.radius_m is not None and dist > q.radius_m:
                continue
        score = np.nan
        if q.embedding is not None:
            score = float(np.max(truth.emb[i] @ q.embedding))
        rows.append((ep_id, score, dist, t, i))
    if q.embedding is not None:
        rows.sort(key=lambda r: (-r[1], -r[3], -r[4]))
    elif q.near is not None:
        rows.sort(key=lambda r: (r[2], -r[3], -r[4]))
    else:
        rows.sort(key=lambda r: (-r[3], -r[4]))
    return [(r[0], r[1], r[2]) for r in rows[:k]]


QUERIES = [
    {},
    {"max_results": 3},
    {"start_ns": 200 * S, "end_ns": 600 * S},
    {"start_ns": 500 * S},
    {"end_ns": 300 * S, "max_results": 40},
    {"near": (0.0, 0.0, 0.0)},
    {"near": (5.0, -3.0, 1.0), "radius_m": 15.0, "max_results": 40},
    {"near": (0.0, 0.0, 0.0), "radius_m": 0.5},  # nobody that close
    {"text": 0},
    {"text": 1, "max_results": 1},
    {"text": 2, "start_ns": 100 * S, "end_ns": 900 * S, "max_results": 40},
    {"text": 3, "near": (10.0, 10.0, 0.0), "radius_m": 20.0},
    {"text": 4, "start_ns": 990 * S, "end_ns": 999 * S},  # few candidates: gather path
    {"text": 5, "start_ns": 0, "end_ns": 0},  # zero = open
]


@pytest.mark.parametrize("spec", QUERIES)
def test_results_match_the_reference(world: tuple[Path, Truth], spec: dict[str, object]) -> None:
    path, truth = world
    spec = dict(spec)
    if "text" in spec:
        rng = np.random.default_rng(int(spec.pop("text")))  # type: ignore[call-overload]
        spec["embedding"] = rng.standard_normal(DIM)
        spec["embedder_model"] = MODEL
    q = RetrievalQuery(**spec)  # type: ignore[arg-type]
    with EpisodeStore(path, read_only=True) as store:
        hits = store.retrieve(q)
    expected = _reference(truth, q, q.max_results or 10)
    assert [h.episode.id for h in hits] == [e[0] for e in expected]
    for hit, (_, score, dist) in zip(hits, expected, strict=True):
        if np.isnan(score):
            assert hit.score is None
        else:
            assert hit.score == pytest.approx(score, abs=1e-5)
        if np.isnan(dist):
            assert hit.distance_m is None
        else:
            assert hit.distance_m == pytest.approx(dist, abs=1e-9)
        assert hit.jpegs == ()


def test_a_planted_episode_is_found_first_with_float16(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    target = rng.standard_normal(DIM)
    with EpisodeStore(tmp_path) as store:
        for i in range(30):
            emb = rng.standard_normal((8, DIM))
            if i == 17:
                emb[5] = target + 0.05 * rng.standard_normal(DIM)  # one frame shows it
            store.add(
                _tiny_frames(i * S, 8),
                emb,
                stamp_ns=i * S,
                surprise=1.0,
                embedder_model=MODEL,
                embedder_pretrained=True,
                episode_id=f"e{i}",
            )
        hits = store.search(embedding=target, embedder_model=MODEL, include_images=True)
        assert hits[0].episode.id == "e17" and hits[0].score is not None
        assert hits[0].score > 0.99 and len(hits[0].jpegs) == 8
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_invalid_poses_are_excluded_only_from_place_queries(world: tuple[Path, Truth]) -> None:
    path, truth = world
    with EpisodeStore(path, read_only=True) as store:
        everything = store.search(max_results=100)
        placed = store.search(near=(0, 0, 0), max_results=100)
    assert len(everything) == N_EP
    assert {h.episode.id for h in placed} == {
        ep for ep, v in zip(truth.ids, truth.valid, strict=True) if v
    }
    assert not truth.valid.all()


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"start_ns": 5 * S, "end_ns": 2 * S}, "ends before it starts"),
        ({"start_ns": -1}, "start_ns=-1: must be >= 0"),
        ({"end_ns": 1.5}, "end_ns=1.5: must be an integer"),
        ({"near": (0, 0, 0), "radius_m": -1.0}, r"radius_m=-1.0: must be a finite number > 0"),
        ({"near": (0, 0, 0), "radius_m": float("inf")}, "finite"),
        ({"radius_m": 3.0}, "without a location"),
        ({"near": (1.0, 2.0)}, "three finite numbers"),
        ({"near": "here"}, "three"),
        ({"max_results": 0}, "max_results=0: must be >= 1"),
        ({"max_results": True}, "must be an integer"),
        ({"embedding": np.ones((2, DIM)), "embedder_model": MODEL}, r"shape \(2, 24\)"),
        ({"embedding": np.zeros(DIM), "embedder_model": MODEL}, "all zeros"),
        ({"embedding": np.full(DIM, np.nan), "embedder_model": MODEL}, "NaN"),
        ({"embedding": np.ones(DIM)}, "needs embedder_model"),
    ],
)
def test_bad_requests_name_the_problem(fields: dict[str, object], match: str) -> None:
    with pytest.raises(InputError, match=match):
        RetrievalQuery(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"max_results": 101}, "max_results=101: at most max_results_cap=100"),
        ({"max_results": 10**9}, "max_results_cap"),
        ({"embedding": np.ones(DIM + 1), "embedder_model": MODEL}, "dim 25"),
        ({"embedding": np.ones(DIM), "embedder_model": "ViT-B-32"}, "'ViT-B-32'"),
        (
            {"embedding": np.ones(DIM), "embedder_model": MODEL, "embedder_pretrained": False},
            "pretrained=False",
        ),
    ],
)
def test_store_refuses_what_it_cannot_answer(
    world: tuple[Path, Truth], fields: dict[str, object], match: str
) -> None:
    path, _ = world
    with EpisodeStore(path, read_only=True) as store, pytest.raises(InputError, match=match) as e:
        store.search(**fields)
    if "embedding" in fields:  # a model mismatch is both a store and an input error
        assert isinstance(e.value, EmbedderMismatchError) and isinstance(e.value, StoreError)


def test_empty_store_answers_nothing(tmp_path: Path) -> None:
    with EpisodeStore(tmp_path) as store:
        assert store.search(embedding=np.ones(DIM), embedder_model=MODEL) == []
        assert store.search(near=(0, 0, 0)) == []
        assert store.search() == []


def test_index_stays_exact_through_removals_and_compaction() -> None:
    rng = np.random.default_rng(5)
    index = EmbeddingIndex()
    emb: dict[int, np.ndarray] = {}
    stamps: dict[int, int] = {}
    for key in range(60):
        e = EmbeddingIndex.normalise(rng.standard_normal((int(rng.integers(1, 9)), 8)))
        emb[key], stamps[key] = e, int(rng.integers(1, 10**6))
        index.add(
            key,
            stamp_ns=stamps[key],
            position=(0.0, 0.0, 0.0),
            pose_valid=True,
            surprise=1.0,
            unit_embeddings=e,
        )
    q = RetrievalQuery(embedding=rng.standard_normal(8), embedder_model="m", max_results=60)
    assert q.embedding is not None
    for batch in ([3], [10, 11, 12, 13], list(range(20, 35)), [0, 59]):
        index.remove(batch)
        for key in batch:
            del emb[key]
        got = index.search(q, 60)
        want = sorted(emb, key=lambda k: -float(np.max(emb[k] @ q.embedding)))
        assert got.keys.tolist() == want
        assert len(index) == len(emb)
    assert index.frame_rows > sum(len(e) for e in emb.values())  # dead rows not yet moved
    index.compact()
    assert index.frame_rows == sum(len(e) for e in emb.values())
    assert index.search(q, 60).keys.tolist() == want
    # eviction order: lowest surprise, then oldest stamp
    assert index.eviction_order().tolist() == sorted(emb, key=lambda k: (stamps[k], k))
