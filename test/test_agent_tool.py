"""The LLM agent tool, driven against a real store (a fixed word->vector table embeds text)."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from surprise_memory.agents.tool import EpisodicMemoryTool
from surprise_memory.errors import InputError
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
DIM = 12
MODEL = "PE-Core-L-14-336"
T0 = 1_700_000_000 * S  # recording start (wall-clock-like stamps)
# episode: (seconds after T0, position or None, concept shown by one frame)
EPISODES = [
    (10.0, (0.0, 0.0, 0.0), "door"),
    (65.0, (12.0, 5.0, 0.0), "golf cart"),
    (130.0, None, "person"),
    (200.0, (12.5, 4.0, 0.0), "dog"),
]
VOCAB = {name: np.eye(DIM)[i] for i, name in enumerate(["door", "golf cart", "person", "dog"])}


def _embed_text(text: str) -> np.ndarray:
    return VOCAB[text].astype(np.float32)


@pytest.fixture
def store(tmp_path: Path) -> EpisodeStore:
    rng = np.random.default_rng(0)
    st = EpisodeStore(tmp_path)
    for i, (sec, pos, concept) in enumerate(EPISODES):
        t = T0 + round(sec * S)
        emb = 0.1 * rng.standard_normal((8, DIM))
        emb[3] += VOCAB[concept]
        st.add(
            [Frame(np.full((16, 16, 3), 30 * i, np.uint8), t + j * S // 10) for j in range(8)],
            emb,
            stamp_ns=t + 3 * S // 10,
            surprise=1.0 + i,
            pose=None if pos is None else Pose(*pos, frame_id="map"),
            embedder_model=MODEL,
            embedder_pretrained=True,
            episode_id=f"ep{i}",
        )
    yield st
    st.close()


def _tool(store: EpisodeStore, **kw: object) -> EpisodicMemoryTool:
    kw.setdefault("origin_ns", T0)
    return EpisodicMemoryTool(store, embed_text=_embed_text, embedder_model=MODEL, **kw)  # type: ignore[arg-type]


def _call(tool: EpisodicMemoryTool, **args: object) -> dict:
    full: dict[str, object] = {
        "query": None,
        "start_time": None,
        "end_time": None,
        "position": None,
        "radius": None,
        "max_results": None,
        "include_images": False,
    }
    full.update(args)
    result = tool.execute(**full)
    json.dumps(result)  # always JSON-able
    return result


def test_schema_is_strict_openai_function(store: EpisodeStore) -> None:
    schema = _tool(store).schema
    json.dumps(schema)
    fn = schema["function"]
    assert schema["type"] == "function" and fn["strict"] is True
    params = fn["parameters"]
    assert params["additionalProperties"] is False
    assert set(params["required"]) == set(params["properties"])
    assert (
        "unavailable"
        in EpisodicMemoryTool(store).schema["function"]["parameters"]["properties"]["query"][
            "description"
        ]
    )


@pytest.mark.parametrize(
    ("args", "expected_ids"),
    [
        ({"query": "golf cart"}, ["ep1"]),
        ({"query": "person", "max_results": 2}, ["ep2"]),
        ({"query": "dog", "position": [12, 5, 0], "radius": 3.0, "max_results": 1}, ["ep3"]),
        ({"start_time": 60, "end_time": 140, "max_results": 10}, ["ep2", "ep1"]),
        ({"start_time": 0, "end_time": 10.3, "max_results": 10}, ["ep0"]),
        ({"position": [12, 5, 0], "max_results": 10}, ["ep1", "ep3", "ep0"]),
        ({"position": [12, 5, 0], "radius": 2.0, "max_results": 10}, ["ep1", "ep3"]),
        ({"max_results": 10}, ["ep3", "ep2", "ep1", "ep0"]),
    ],
)
def test_queries_find_the_right_episodes(
    store: EpisodeStore, args: dict[str, object], expected_ids: list[str]
) -> None:
    result = _call(_tool(store), **args)
    ids = [e["id"] for e in result["episodes"]]
    assert ids[: len(expected_ids)] == expected_ids
    if args.get("query") is None:
        assert ids == expected_ids
    assert result["count"] == len(ids)


def test_times_are_seconds_from_the_recording_start_and_positions_lists(
    store: EpisodeStore,
) -> None:
    result = _call(_tool(store), query="golf cart", max_results=1)
    ep = result["episodes"][0]
    assert ep["time"] == pytest.approx(65.3)  # origin = first episode's trigger
    assert (ep["start_time"], ep["end_time"]) == (pytest.approx(65.0), pytest.approx(65.7))
    assert ep["position"] == [12.0, 5.0, 0.0] and ep["frame"] == "map"
    assert ep["similarity"] > 0.9 and len(ep["frame_times"]) == 8
    person = _call(_tool(store), query="person", max_results=1)["episodes"][0]
    assert person["position"] is None and person["distance"] is None
    # without an origin: the store's first trigger stamp (T0 + 10.3 s), kept after eviction
    default = _call(EpisodicMemoryTool(store), max_results=1)["episodes"][0]
    assert default["time"] == pytest.approx(190.0)
    store.delete(["ep0"])
    assert _call(EpisodicMemoryTool(store), max_results=1)["episodes"][0]["time"] == default["time"]


def test_images_come_back_as_base64_jpegs(store: EpisodeStore) -> None:
    tool = _tool(store, image_episodes=2, frames_per_episode=3)
    result = _call(tool, max_results=4, include_images=True)
    images = result["_images"]
    assert len(images) == 2 * 3
    for im in images:
        with Image.open(io.BytesIO(base64.b64decode(im["base64"]))) as img:
            assert img.format == "JPEG" and img.size == (16, 16)
    assert images[0]["label"].startswith("episode ep3, frame 1/8, t=200.0 s")
    assert "_images" not in _call(tool, max_results=4)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"start_time": 50, "end_time": 10}, "ends before it starts"),
        ({"start_time": -5}, "since the start of the recording"),
        ({"radius": -1.0, "position": [0, 0, 0]}, "radius_m=-1.0"),
        ({"radius": 2.0}, "radius given without a position"),
        ({"position": [1, 2]}, r"must be \[x, y, z\]"),
        ({"max_results": 0}, "between 1 and 20"),
        ({"max_results": 500}, "between 1 and 20"),
        ({"bogus": 1}, "unknown arguments"),
    ],
)
def test_bad_calls_return_an_error_for_the_agent(
    store: EpisodeStore, args: dict[str, object], match: str
) -> None:
    result = _call(_tool(store), **args)
    assert result["episodes"] == []
    assert __import__("re").search(match, result["error"]), result["error"]


def test_text_needs_a_text_embedder_of_the_store_model(store: EpisodeStore) -> None:
    no_text = _call(EpisodicMemoryTool(store), query="dog")
    assert "text search is not available" in no_text["error"]
    other = EpisodicMemoryTool(store, embed_text=_embed_text, embedder_model="ViT-B-32")
    assert "embed the query with the store's model" in _call(other, query="dog")["error"]
    with pytest.raises(InputError, match="needs embedder_model"):
        EpisodicMemoryTool(store, embed_text=_embed_text)
