"""The LLM agent tool, against a real store and against a live memory_node over DDS.

Every retrieval test runs twice (``retriever`` is parametrized): on the store folder in
this process, and through :class:`RosEpisodeRetriever` on the ``retrieve_episodes`` service
of the installed ``memory_node`` executable serving the same folder. A fixed word->vector
table embeds text (the store's "model"), so the right episodes are known.

A scripted stand-in for the LLM (a fixed list of tool calls) drives a tool loop in DAAAM's
style (``call_tool(name, json_arguments)``, ``_images`` stripped from the text result)
against both, with no network.
"""

from __future__ import annotations

import base64
import io
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import synthetic_frames as sf
from PIL import Image
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from ros_helpers import serving_memory_node

from surprise_memory.agents.ros_client import EpisodicMemoryClient, RosEpisodeRetriever
from surprise_memory.agents.tool import EpisodicMemoryTool
from surprise_memory.errors import InputError
from surprise_memory.memory.camera_view import CameraView, mounting_pose
from surprise_memory.memory.pose import Pose, compose
from surprise_memory.memory.pose_trust import PoseTrust
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import EpisodeRetriever, EpisodeStore
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
DIM = 12
MODEL = "PE-Core-L-14-336"
T0 = 1_700_000_000 * S  # the first frame the store saw (wall-clock-like stamps)
NS = "/surprise_memory"
# episode: (seconds after T0, position or None, concept shown by one frame)
EPISODES = [
    (10.0, (0.0, 0.0, 0.0), "door"),
    (65.0, (12.0, 5.0, 0.0), "golf cart"),
    (130.0, None, "person"),
    (200.0, (12.5, 4.0, 0.0), "dog"),
]
VOCAB = {name: np.eye(DIM)[i] for i, name in enumerate(["door", "golf cart", "person", "dog"])}


# ep1 seen by the front camera (looking 90 deg left of +x), ep3 by the rear one (no pose)
CAMERAS = {
    1: CameraView(
        "front", "front_optical", compose(Pose(12.0, 5.0, 0.0, frame_id="map"), mounting_pose(90))
    ),
    3: CameraView("rear", "rear_optical", None),
}
# ep1's pose from a localiser that gave its covariance on a named map; the others unknown
TRUST = {1: PoseTrust(0.4, "campus")}


def _embed_text(text: str) -> np.ndarray:
    return VOCAB[text].astype(np.float32)


def _fill(path: Path) -> None:
    rng = np.random.default_rng(0)
    with EpisodeStore(path) as st:
        st.note_origin(T0)
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
                camera=CAMERAS.get(i, CameraView()),
                pose_trust=TRUST.get(i),
            )


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("agent_store")
    _fill(path)
    return path


@pytest.fixture(scope="module")
def ros_host(store_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """A node of ours, with the installed memory_node serving ``store_dir`` over DDS."""
    work = tmp_path_factory.mktemp("memory_node")
    with serving_memory_node(sf.node_params(str(store_dir)), work, NS, "agent_tool_test") as node:
        yield node


@pytest.fixture(params=["store", "ros"])
def retriever(request: pytest.FixtureRequest, store_dir: Path) -> Iterator[EpisodeRetriever]:
    """The same episodes, in this process or through the live memory node."""
    if request.param == "store":
        with EpisodeStore(store_dir, read_only=True) as store:
            yield store
    else:
        client = EpisodicMemoryClient(
            request.getfixturevalue("ros_host"), f"{NS}/retrieve_episodes", 30.0
        )
        yield RosEpisodeRetriever(client)
        client.destroy()


def _tool(retriever: EpisodeRetriever, **kw: Any) -> EpisodicMemoryTool:
    kw.setdefault("origin", T0)
    return EpisodicMemoryTool(retriever, embed_text=_embed_text, embedder_model=MODEL, **kw)


def _call(tool: EpisodicMemoryTool, **args: object) -> dict:
    full: dict[str, object] = dict.fromkeys(
        ("query", "start_time", "end_time", "position", "radius", "max_results"), None
    )
    full["include_images"] = False
    full.update(args)
    result = tool.execute(**full)
    json.dumps(result)  # always JSON-able
    return result


def _ids(result: dict) -> list[str]:
    assert "error" not in result, result
    return [e["id"] for e in result["episodes"]]


# ---------------------------------------------------------------------- the tool's answers
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
    retriever: EpisodeRetriever, args: dict[str, object], expected_ids: list[str]
) -> None:
    result = _call(_tool(retriever), **args)
    ids = _ids(result)
    assert ids[: len(expected_ids)] == expected_ids
    if args.get("query") is None:
        assert ids == expected_ids
    assert result["count"] == len(ids)


def test_times_count_from_one_origin_and_positions_are_lists(retriever: EpisodeRetriever) -> None:
    # default: the store's origin, the first frame it saw (T0), the same over DDS
    result = _call(
        EpisodicMemoryTool(retriever, embed_text=_embed_text, embedder_model=MODEL),
        query="golf cart",
        max_results=1,
    )
    ep = result["episodes"][0]
    assert ep["time"] == pytest.approx(65.3)
    assert (ep["start_time"], ep["end_time"]) == (pytest.approx(65.0), pytest.approx(65.7))
    assert ep["position"] == [12.0, 5.0, 0.0] and ep["frame"] == "map"
    assert ep["similarity"] > 0.9 and len(ep["frame_times"]) == 8
    person = _call(_tool(retriever), query="person", max_results=1)["episodes"][0]
    assert person["position"] is None and person["distance"] is None
    near = _call(_tool(retriever), query="dog", position=[12, 5, 0], max_results=1)
    assert near["episodes"][0]["distance"] == pytest.approx(np.hypot(0.5, 1.0), abs=1e-3)
    # DAAAM's origin: its sequence start in Unix seconds, here 5 s after the first frame
    daaam = _tool(retriever, origin=(T0 + 5 * S) / S)
    assert _call(daaam, query="golf cart", max_results=1)["episodes"][0]["time"] == pytest.approx(
        60.3
    )
    # times given by the agent count from the same origin: 60.3 s is ep1's trigger
    assert _ids(_call(daaam, start_time=60.3, end_time=60.3)) == ["ep1"]
    as_ns = _tool(retriever, origin=T0 + 5 * S)  # int ns works the same
    assert _ids(_call(as_ns, start_time=60.3, end_time=60.3)) == ["ep1"]


def test_absolute_times_are_always_accepted(retriever: EpisodeRetriever) -> None:
    tool = _tool(retriever, origin=0)  # whatever the origin
    t1 = T0 + 65 * S + 3 * S // 10  # ep1's trigger
    assert _ids(_call(tool, start_time=f"{t1}ns", end_time=f"{t1}ns")) == ["ep1"]
    assert _ids(_call(tool, start_time=t1, end_time=t1)) == ["ep1"]  # an int of ns
    iso = "2023-11-14T22:14:25.3Z"  # T0 + 65.3 s (T0 = 2023-11-14T22:13:20Z)
    assert _ids(_call(tool, start_time=iso, end_time=iso)) == ["ep1"]


def test_now_keeps_the_future_out(retriever: EpisodeRetriever) -> None:
    assert _ids(_call(_tool(retriever, now=100.0), max_results=10)) == ["ep1", "ep0"]
    # ep1's trigger (65.3 s) is before now, but its last frame (65.7 s) is not
    assert _ids(_call(_tool(retriever, now=65.5), max_results=10)) == ["ep0"]
    clock = [150.0]
    tool = _tool(retriever, now=lambda: clock[0])
    assert _ids(_call(tool, query="dog", max_results=10))[0] != "ep3"
    clock[0] = 300.0
    assert _ids(_call(tool, query="dog", max_results=1)) == ["ep3"]
    assert _ids(_call(tool, end_time=140, max_results=10)) == ["ep2", "ep1", "ep0"]
    late = _call(_tool(retriever, now=50.0), start_time=60)
    assert late["episodes"] == [] and "after the current time" in late["note"]
    absolute = _tool(retriever, now=T0 + 100 * S)  # a robot clock in ns
    assert _ids(_call(absolute, max_results=10)) == ["ep1", "ep0"]


def test_images_come_back_as_base64_jpegs(retriever: EpisodeRetriever) -> None:
    tool = _tool(retriever, image_episodes=2, frames_per_episode=3)
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
        ({"start_time": "yesterday"}, "expected seconds from the recording start"),
        ({"radius": -1.0, "position": [0, 0, 0]}, "radius_m=-1.0"),
        ({"radius": 2.0}, "radius given without a position"),
        ({"position": [1, 2]}, r"must be \[x, y, z\]"),
        ({"max_results": 0}, "between 1 and 20"),
        ({"max_results": 500}, "between 1 and 20"),
        ({"bogus": 1}, "unknown arguments"),
    ],
)
def test_bad_calls_return_an_error_for_the_agent(
    retriever: EpisodeRetriever, args: dict[str, object], match: str
) -> None:
    result = _call(_tool(retriever), **args)
    assert result["episodes"] == []
    assert re.search(match, result["error"]), result["error"]


def test_every_exception_comes_back_as_an_error(retriever: EpisodeRetriever) -> None:
    def broken(text: str) -> np.ndarray:
        raise RuntimeError("CUDA out of memory")

    tool = EpisodicMemoryTool(retriever, embed_text=broken, embedder_model=MODEL, origin=T0)
    assert _call(tool, query="dog")["error"] == "RuntimeError: CUDA out of memory"
    weird_now = _tool(retriever, now=lambda: [1, 2])
    assert "now=[1, 2]" in _call(weird_now)["error"]


def test_the_store_model_name_in_daaam_spelling(retriever: EpisodeRetriever) -> None:
    daaam = EpisodicMemoryTool(retriever, embed_text=_embed_text, embedder_model="PE-Core-L14-336")
    assert _ids(_call(daaam, query="golf cart", max_results=1)) == ["ep1"]
    other = EpisodicMemoryTool(retriever, embed_text=_embed_text, embedder_model="ViT-B-32")
    assert "embed the query with the store's model" in _call(other, query="dog")["error"]


def test_text_needs_a_text_embedder_of_the_store_model(store_dir: Path) -> None:
    with EpisodeStore(store_dir, read_only=True) as store:
        tool = EpisodicMemoryTool(store)
        assert not tool.can_search_text
        assert "unavailable" in tool.signature["parameters"]["properties"]["query"]["description"]
        assert "text search is not available" in _call(tool, query="dog")["error"]
    with pytest.raises(InputError, match="needs embedder_model"):
        EpisodicMemoryTool(store, embed_text=_embed_text)


def test_eviction_keeps_the_origin(tmp_path: Path) -> None:
    _fill(tmp_path)
    with EpisodeStore(tmp_path) as store:
        before = _call(EpisodicMemoryTool(store), max_results=1)["episodes"][0]
        assert before["time"] == pytest.approx(200.3)
        store.delete(["ep0"])
        after = _call(EpisodicMemoryTool(store), max_results=1)["episodes"][0]
        assert after["time"] == before["time"]


# ---------------------------------------------------------------------- over ROS only
def test_the_node_embeds_text_for_an_agent_without_a_model(ros_host: Node) -> None:
    client = EpisodicMemoryClient(ros_host, f"{NS}/retrieve_episodes", 30.0)
    try:
        tool = EpisodicMemoryTool(RosEpisodeRetriever(client))
        assert tool.can_search_text
        # the node's (tiny, random) text tower is not the store's model: refused, by the node
        error = _call(tool, query="dog")["error"]
        assert "retrieve_episodes refused" in error and "store's model" in error
    finally:
        client.destroy()


def test_client_type_checks_instead_of_crashing(ros_host: Node) -> None:
    client = EpisodicMemoryClient(ros_host, f"{NS}/retrieve_episodes", 30.0)
    try:
        with pytest.raises(TypeError, match="text is a RetrievalQuery"):
            client.retrieve(RetrievalQuery(max_results=2))  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="k is a str"):
            client.retrieve(k="3")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="start is a float"):
            client.retrieve(start=1.5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="must be >= 0"):
            client.retrieve(start=-1)
        with pytest.raises(ValueError, match="three finite numbers"):
            client.retrieve(near=(1.0, 2.0))
        with pytest.raises(ValueError, match="needs embedding_model"):
            client.retrieve(embedding=np.ones(DIM))
        found = client.retrieve(
            embedding=VOCAB["dog"], embedding_model=MODEL, k=1, include_images=True
        )
        assert [e.id for e in found] == ["ep3"] and len(found[0].jpegs) == 8
        assert found[0].decode_images()[0].shape == (16, 16, 3)
        assert client.origin_ns == T0
    finally:
        client.destroy()


def test_client_answers_inside_a_callback_of_a_single_threaded_executor(ros_host: Node) -> None:
    host = Node("agent_in_a_callback", context=ros_host.context)
    client = EpisodicMemoryClient(host, f"{NS}/retrieve_episodes", 20.0)
    got: list[Any] = []

    def on_timer() -> None:  # the usual agent pattern: ask the memory from a callback
        if not got:
            try:
                got.append([e.id for e in client.retrieve(k=2)])
            except Exception as exc:
                got.append(exc)

    timer = host.create_timer(0.05, on_timer)
    executor = SingleThreadedExecutor(context=host.context)
    executor.add_node(host)
    try:
        for _ in range(200):
            if got:
                break
            executor.spin_once(timeout_sec=0.5)
        assert got == [["ep3", "ep2"]]
    finally:
        host.destroy_timer(timer)
        executor.remove_node(host)
        executor.shutdown()
        client.destroy()
        host.destroy_node()


# ---------------------------------------------------------------------- an agent's loop
def _agent_loop(
    tools: list[EpisodicMemoryTool], llm: Callable[[list[dict]], dict | str]
) -> tuple[str, list[dict]]:
    """DAAAM's loop, in short: the model asks for calls, each runs by name with JSON
    arguments, the text result (``_images`` stripped) goes back, until it answers."""
    registry = {t.signature["name"]: t for t in tools}
    messages: list[dict] = []
    shown: list[dict] = []
    for _ in range(10):
        step = llm(messages)
        if isinstance(step, str):
            return step, shown
        result = registry[step["name"]].execute(**json.loads(step["arguments"]))
        shown += result.get("_images", [])
        text = {k: v for k, v in result.items() if k != "_images"}
        messages.append({"type": "function_call_output", "output": json.dumps(text)})
    raise AssertionError("the agent never answered")


def _scripted_llm(calls: list[dict[str, Any]]) -> Callable[[list[dict]], dict | str]:
    """A stand-in for the LLM: a fixed list of tool calls, then an answer from the outputs."""

    def llm(messages: list[dict]) -> dict | str:
        if len(messages) < len(calls):
            args = {"query": None, "start_time": None, "end_time": None, "position": None}
            args |= {"radius": None, "max_results": None, "include_images": False}
            return {
                "name": "search_episodic_memory",
                "arguments": json.dumps(args | calls[len(messages)]),
            }
        lines = []
        for m in messages:
            out = json.loads(m["output"])
            lines.append(
                "; ".join(
                    f"{e['id']} at {e['time']:.1f} s pos {e['position']}" for e in out["episodes"]
                )
                or out.get("error", "nothing")
            )
        return "\n".join(lines)

    return llm


def test_a_scripted_agent_answers_with_episodes_images_and_times(
    retriever: EpisodeRetriever,
) -> None:
    # DAAAM's setup: times from its sequence start (here T0 - 2 s), the robot now at 210 s
    tool = EpisodicMemoryTool(
        retriever,
        embed_text=_embed_text,
        embedder_model="PE-Core-L14-336",
        origin=(T0 - 2 * S) / S,
        now=210.0,
    )
    tool.set_scene_graph(object())  # what DAAAM does at every update: harmless
    tool.set_embedding_handlers(None, None)
    tool.set_config(None)
    llm = _scripted_llm(
        [
            {"query": "golf cart", "max_results": 1, "include_images": True},
            {"start_time": 60, "end_time": 140, "max_results": 5},
            {"position": [12, 5, 0], "radius": 2.0, "max_results": 3},
            {"query": "dog", "max_results": 1},  # at 202.3 s, before now: found
            {"start_time": 300},  # after now: nothing
        ]
    )
    answer, images = _agent_loop([tool], llm)
    assert answer.splitlines() == [
        "ep1 at 67.3 s pos [12.0, 5.0, 0.0]",
        "ep2 at 132.3 s pos None; ep1 at 67.3 s pos [12.0, 5.0, 0.0]",
        "ep1 at 67.3 s pos [12.0, 5.0, 0.0]; ep3 at 202.3 s pos [12.5, 4.0, 0.0]",
        "ep3 at 202.3 s pos [12.5, 4.0, 0.0]",
        "nothing",
    ]
    assert [im["label"] for im in images] == [
        f"episode ep1, frame {i}/8, t={t} s" for i, t in ((1, 67.0), (5, 67.4), (8, 67.7))
    ]
    for im in images:
        with Image.open(io.BytesIO(base64.b64decode(im["base64"]))) as img:
            assert img.format == "JPEG"
            assert np.asarray(img)[0, 0, 0] == pytest.approx(30, abs=3)  # ep1's frames


def test_the_agent_asks_one_camera_and_learns_where_it_looked(retriever: EpisodeRetriever) -> None:
    """A camera filter in the tool's one definition, in this process and over the service
    (interface 5); each episode names its camera and its viewing direction (issue 42)."""
    tool = _tool(retriever)
    assert tool.signature["parameters"]["properties"]["camera"]["type"] == ["string", "null"]
    assert "camera" in tool.signature["parameters"]["required"]
    assert _ids(_call(tool, camera="front", max_results=10)) == ["ep1"]
    assert _ids(_call(tool, camera="rear", max_results=10)) == ["ep3"]
    assert _call(tool, camera="left", max_results=10)["episodes"] == []
    front = _call(tool, query="golf cart", max_results=1)["episodes"][0]
    assert (front["camera"], front["view_yaw"]) == ("front", pytest.approx(90.0))
    rear = _call(tool, camera="rear")["episodes"][0]
    assert (rear["camera"], rear["view_yaw"]) == ("rear", None)
    door = _call(tool, query="door", max_results=1)["episodes"][0]
    assert (door["camera"], door["view_yaw"]) == (None, None)  # the one unnamed camera
    assert "camera=3: a camera name" in _call(tool, camera=3)["error"]


def test_each_episode_says_how_far_its_pose_can_be_trusted(retriever: EpisodeRetriever) -> None:
    """The pose's 1-sigma uncertainty and its map, in this process and over the service
    (interface 6), null where the source gave none (issue 48)."""
    found = {e["id"]: e for e in _call(_tool(retriever), max_results=10)["episodes"]}
    assert (found["ep1"]["pose_uncertainty_m"], found["ep1"]["map"]) == (
        pytest.approx(0.4),
        "campus",
    )
    assert (found["ep3"]["pose_uncertainty_m"], found["ep3"]["map"]) == (None, None)
