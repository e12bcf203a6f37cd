"""Place keyframes and "is it still there?" through ``retrieve_episodes``, over DDS (issue 47).

A store holding surprise episodes and place keyframes (two robots' views) is served by the
installed ``memory_node``; the test asks it with a plain rclpy client and with
:class:`~surprise_memory.agents.ros_client.RosEpisodeRetriever`:

* ``kinds`` empty (a caller of interface version 6) gets the episodes only; ``["place"]``
  the place keyframes, each marked ``kind: place`` with its ``place_key``; both kinds
  together; an unknown kind is refused with a reason, and the node goes on serving;
* ``include_place_status`` gives each episode its "still there": yes, no (with the
  newest view's id, stamp and similarity) or unknown (not seen since), judged with the
  node's ``place_still_there_similarity`` and, with a robot filter, that robot's views only;
* the retriever reads it all back into the core's hits, as the store answers in-process;
* ``go_to_episode`` says when its episode's place was last seen, and ``goto`` prints it.

The messages' conversions (each still-there value both ways, a version 6 message reading
as an episode) are checked without a node.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import synthetic_frames as sf
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from ros_helpers import serving_memory_node, spin_until

from surprise_memory.agents.ros_client import (
    EpisodicMemoryClient,
    RetrievedEpisode,
    RosEpisodeRetriever,
)
from surprise_memory.agents.ros_navigation import GoToEpisodeClient
from surprise_memory.config import PlacesConfig
from surprise_memory.errors import InputError
from surprise_memory.memory.camera_view import yaw_pose
from surprise_memory.memory.place_status import with_place_status
from surprise_memory.memory.places import PLACE, PlaceStatus, place_cell
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import EpisodeRecord, EpisodeStore
from surprise_memory.msg import Episode
from surprise_memory.nodes.messages import (
    episode_to_msg,
    place_status_from_msg,
    record_kind_from_msg,
)
from surprise_memory.perception.frames import Frame
from surprise_memory.srv import RetrieveEpisodes

S = 1_000_000_000
T0 = 1_700_000_000 * S
DIM = 12
MODEL = "PE-Core-L-14-336"
NS = "/surprise_memory_places_retrieval"
STILL_THERE_SIMILARITY = 0.5  # the node's setting: a view at cosine 0.6 still shows it
TRIGGER = 4  # the trigger frame of every test episode (frames from -0.4 s to +0.3 s)

# each episode's place: a 2 m cell apart from the others, the robot looking along x
AT = {
    "gone": yaw_pose(3.0, 5.0, 0.0, 0.0, "map"),
    "still": yaw_pose(21.0, 5.0, 0.0, 0.0, "map"),
    "half": yaw_pose(41.0, 5.0, 0.0, 0.0, "map"),
    "unseen": yaw_pose(61.0, 5.0, 0.0, 0.0, "map"),
}


def _key(pose: Pose) -> str:
    return place_cell(pose, 0.0, 2.0, 8).key


def _add(
    store: EpisodeStore,
    name: str,
    t: float,
    pose: Pose | None,
    embeddings: np.ndarray,
    *,
    robot: str = "alpha",
    place: bool = False,
) -> str:
    stamp = T0 + round(t * S)
    offsets = [0] if place else [(i - TRIGGER) * S // 10 for i in range(len(embeddings))]
    frames = [Frame(np.full((16, 16, 3), 9 * len(name), np.uint8), stamp + o) for o in offsets]
    record = store.add(
        frames, embeddings, stamp_ns=stamp, surprise=0.0 if place else 2.0, pose=pose,
        embedder_model=MODEL, embedder_pretrained=True, episode_id=name, robot_id=robot,
        kind=PLACE if place else "episode", place_key=_key(pose) if place and pose else "",
    )  # fmt: skip
    return record.id


def _fill(path: Path) -> None:
    """Four episodes with a pose and one without; views taken after (and one before) them."""
    rng = np.random.default_rng(3)
    emb = {name: rng.standard_normal((8, DIM)) for name in (*AT, "nopose")}
    with EpisodeStore(path) as st:
        st.note_origin(T0)
        for i, name in enumerate(AT):
            _add(st, f"ep_{name}", 100.0 + 10 * i, AT[name], emb[name])
        _add(st, "ep_nopose", 140.0, None, emb["nopose"])
        shown = {name: e[TRIGGER] / np.linalg.norm(e[TRIGGER]) for name, e in emb.items()}
        other = rng.standard_normal(DIM)
        other -= (other @ shown["half"]) * shown["half"]  # orthogonal to what "half" showed
        half = 0.6 * shown["half"] + 0.8 * other / np.linalg.norm(other)  # cosine 0.6
        _add(st, "view_gone", 200.0, AT["gone"], -shown["gone"][None], place=True)
        _add(st, "view_still", 210.0, AT["still"], shown["still"][None], place=True)
        _add(st, "view_half", 220.0, AT["half"], half[None], place=True)
        _add(st, "view_before", 50.0, AT["unseen"], shown["unseen"][None], place=True)
        # another robot saw "gone"'s place later still, and there it still is
        _add(st, "view_beta", 300.0, AT["gone"], shown["gone"][None], robot="beta", place=True)


EPISODES = {"ep_gone", "ep_still", "ep_half", "ep_unseen", "ep_nopose"}
PLACES = {"view_gone", "view_still", "view_half", "view_before", "view_beta"}


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("places_store")
    _fill(path)
    return path


@pytest.fixture(scope="module")
def ros_host(store_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """A node of ours, with the installed memory_node serving ``store_dir`` over DDS."""
    params = sf.node_params(str(store_dir), place_still_there_similarity=STILL_THERE_SIMILARITY)
    work = tmp_path_factory.mktemp("memory_node")
    with serving_memory_node(params, work, NS, "places_retrieval_test") as node:
        yield node


def _ask(node: Node, **fields: object) -> RetrieveEpisodes.Response:
    """A raw request (as any ROS caller sends it) and the node's answer."""
    client = EpisodicMemoryClient(node, f"{NS}/retrieve_episodes", timeout=60.0)
    request = RetrieveEpisodes.Request(max_results=50)
    for name, value in fields.items():
        setattr(request, name, value)
    try:
        return client._caller.call(request, 60.0)  # the raw response, unchecked
    finally:
        client.destroy()


def _by_id(response: RetrieveEpisodes.Response) -> dict[str, Episode]:
    assert response.success, response.message
    assert response.interface_version == RetrieveEpisodes.Request.INTERFACE_VERSION == 7
    return {ep.id: ep for ep in response.episodes}


def test_kinds_choose_episodes_places_or_both(ros_host: Node) -> None:
    # a version 6 caller sends no kinds: the episodes only, as before
    old = _by_id(_ask(ros_host))
    assert set(old) == EPISODES
    assert {ep.kind for ep in old.values()} == {"episode"}
    assert {ep.place_key for ep in old.values()} == {""}
    assert not any(ep.place_status_valid for ep in old.values())

    places = _by_id(_ask(ros_host, kinds=["place"]))
    assert set(places) == PLACES
    assert {ep.kind for ep in places.values()} == {"place"}
    assert places["view_half"].place_key == _key(AT["half"])
    assert (
        places["view_beta"].place_key == _key(AT["gone"]) and places["view_beta"].robot_id == "beta"
    )

    both = _ask(ros_host, kinds=["episode", "place"], robot_id="alpha")
    assert set(_by_id(both)) == EPISODES | PLACES - {"view_beta"}
    assert both.message == "5 episode(s), 4 place keyframe(s)", both.message


def test_an_unknown_kind_is_refused_and_the_node_serves_on(ros_host: Node) -> None:
    refusals: list[int] = []

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for status in msg.status:
            if "memory_node" in status.name:
                values = {kv.key: kv.value for kv in status.values}
                refusals.append(int(values.get("retrievals_refused", 0)))

    diagnostics = ros_host.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 10)
    try:
        refused = _ask(ros_host, kinds=["episode", "landmark"])
        assert not refused.success and not refused.episodes
        assert "landmark" in refused.message and "episode, place" in refused.message
        # counted as a malformed request (not as a failure of the node)
        assert spin_until(ros_host, lambda: bool(refusals) and refusals[-1] >= 1, 30.0), refusals
    finally:
        ros_host.destroy_subscription(diagnostics)
    assert set(_by_id(_ask(ros_host, kinds=["episode"]))) == EPISODES


def test_still_there_yes_no_unknown_with_the_robots_views(ros_host: Node) -> None:
    answer = _by_id(
        _ask(ros_host, kinds=["episode", "place"], include_place_status=True, robot_id="alpha")
    )
    yes, no = Episode.STILL_THERE_YES, Episode.STILL_THERE_NO
    gone = answer["ep_gone"]
    assert gone.place_status_valid and gone.still_there == no
    assert gone.view_id == "view_gone" and gone.place_status_key == _key(AT["gone"])
    assert gone.last_seen.sec == T0 // S + 200
    assert gone.view_similarity == pytest.approx(-1.0, abs=1e-3)
    assert (answer["ep_still"].still_there, answer["ep_still"].view_id) == (yes, "view_still")
    assert answer["ep_still"].view_similarity == pytest.approx(1.0, abs=1e-3)
    # cosine 0.6: still there with the node's 0.5 (the default 0.8 would say no)
    half = answer["ep_half"]
    assert half.still_there == yes and half.view_similarity == pytest.approx(0.6, abs=1e-2)
    # its place's only view is older than the episode: not seen since
    unseen = answer["ep_unseen"]
    assert unseen.place_status_valid and unseen.still_there == Episode.STILL_THERE_UNKNOWN
    assert unseen.view_id == "" and math.isnan(unseen.view_similarity)
    assert unseen.last_seen == unseen.header.stamp  # last seen: by the episode itself
    # no pose, no place; a place keyframe is a view, not asked about
    assert not answer["ep_nopose"].place_status_valid
    assert not any(answer[v].place_status_valid for v in PLACES - {"view_beta"})

    # any robot's views: beta saw the place later, and it is there again
    fleet = _by_id(_ask(ros_host, include_place_status=True))
    assert (fleet["ep_gone"].still_there, fleet["ep_gone"].view_id) == (yes, "view_beta")


def test_the_retriever_reads_kinds_and_place_status_back(ros_host: Node, store_dir: Path) -> None:
    client = EpisodicMemoryClient(ros_host, f"{NS}/retrieve_episodes", timeout=60.0)
    try:
        query = RetrievalQuery(robot_id="alpha", max_results=50)  # kinds None: both
        hits = RosEpisodeRetriever(client, place_status=True).retrieve(query)
        plain = RosEpisodeRetriever(client).retrieve(RetrievalQuery(kinds={"place"}))
        with pytest.raises(InputError, match="landmark"):  # refused here, nothing sent
            client.retrieve(kinds=["landmark"])
        with pytest.raises(TypeError, match="kinds"):
            client.retrieve(kinds="place")
        with pytest.raises(TypeError, match="place_status"):
            RosEpisodeRetriever(client, place_status=1)  # type: ignore[arg-type]
        default = client.retrieve(k=50)  # the lower client asks for episodes by default
    finally:
        client.destroy()
    config = PlacesConfig(place_still_there_similarity=STILL_THERE_SIMILARITY)
    with EpisodeStore(store_dir, read_only=True) as store:
        local = with_place_status(store, store.retrieve(query), config, robot_id="alpha")
    assert [h.episode.id for h in hits] == [h.episode.id for h in local]
    for remote, here in zip(hits, local, strict=True):
        assert (remote.episode.kind, remote.episode.place_key) == (
            here.episode.kind,
            here.episode.place_key,
        )
        assert _status_fields(remote.place_status) == _status_fields(here.place_status)
    statuses = {h.episode.id: h.place_status for h in hits}
    assert statuses["ep_gone"] is not None and statuses["ep_gone"].still_there is False
    assert statuses["ep_unseen"] is not None and statuses["ep_unseen"].similarity is None
    assert statuses["ep_nopose"] is None and statuses["view_gone"] is None
    assert {h.episode.id for h in plain} == PLACES
    assert {h.episode.kind for h in plain} == {"place"}
    assert all(h.place_status is None for h in plain)  # not asked
    assert {ep.id for ep in default} == EPISODES


def _status_fields(status: PlaceStatus | None) -> tuple[object, ...] | None:
    """A status, its similarity rounded (it travels as float32)."""
    if status is None:
        return None
    similarity = None if status.similarity is None else round(status.similarity, 4)
    return (status.place_key, status.last_seen_ns, similarity, status.still_there, status.view_id)


@pytest.mark.parametrize("still_there", [True, False, None])
def test_a_place_status_goes_and_comes_back(still_there: bool | None) -> None:
    seen = None if still_there is None else "view_7"
    similarity = None if still_there is None else (0.9 if still_there else 0.1)
    status = PlaceStatus("map@2m:1,2:0/8", T0 + 5 * S, similarity, still_there, seen)
    msg = episode_to_msg(_record(), place_status=status)
    assert msg.place_status_valid
    assert _status_fields(place_status_from_msg(msg)) == _status_fields(status)
    plain = episode_to_msg(_record())  # not asked: as published on `episodes`
    assert place_status_from_msg(plain) is None and plain.kind == "episode"
    assert plain == episode_to_msg(_record())  # no NaN in it: equal messages compare equal


def _record() -> EpisodeRecord:
    """An episode as a store returns it (not stored: only converted)."""
    return EpisodeRecord(
        id="ep_1", stamp_ns=T0, start_ns=T0, end_ns=T0, pose=AT["gone"], pose_valid=True,
        surprise=2.0, threshold=1.0, frame_stamps_ns=(T0,), frame_paths=("frames/ep_1/00.jpg",),
        encoder_model="", encoder_pretrained=True, embedder_model=MODEL,
        embedder_pretrained=True, created_wall_ns=0,
    )  # fmt: skip


def test_a_version_6_message_reads_as_an_episode_and_a_bad_one_is_refused() -> None:
    old = Episode(id="ep_v6")  # no kind, no place status: a node of interface version 6
    assert record_kind_from_msg(old) == "episode"
    got = RetrievedEpisode.from_msg(old, 0.0)
    assert (got.kind, got.place_key, got.place_status) == ("episode", "", None)
    with pytest.raises(InputError, match="landmark"):
        record_kind_from_msg(Episode(id="x", kind="landmark"))
    with pytest.raises(InputError, match="still_there=7"):
        place_status_from_msg(Episode(id="x", place_status_valid=True, still_there=7))


def test_a_goal_through_the_node_says_when_its_place_was_last_seen(
    ros_host: Node, tmp_path: Path
) -> None:
    """``go_to_episode`` puts the chosen episode's place status in its answer (any robot's
    views, the node's threshold); ``goto`` through the service prints it as ``--store`` does."""
    client = GoToEpisodeClient(ros_host, f"{NS}/go_to_episode", timeout=60.0)
    try:
        half = client.go_to(episode_id="ep_half", dry_run=True, allow_other_robots=True)
        gone = client.go_to(episode_id="ep_gone", dry_run=True, allow_other_robots=True)
        view = client.go_to(episode_id="view_still", dry_run=True, allow_other_robots=True)
    finally:
        client.destroy()
    assert half.place_status is not None and half.place_status.view_id == "view_half"
    assert half.place_status.still_there is True  # cosine 0.6 with the node's 0.5
    assert half.place_status.similarity == pytest.approx(0.6, abs=1e-2)
    assert gone.place_status is not None and gone.place_status.view_id == "view_beta"
    assert view.place_status is None  # a place keyframe is a view: nothing to say
    proc = subprocess.run(
        [
            sys.executable, "-m", "surprise_memory", "goto", "--id", "ep_half", "--dry-run",
            "--allow-other-robots", "--service", f"{NS}/go_to_episode", "--timeout", "60",
        ],
        cwd=tmp_path,  # the colcon install, not the checkout
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "dry run, not sent" in lines[2], lines
    assert re.fullmatch(
        r"its place was last seen .+ ago \(still looks the same, similarity 0\.60\)", lines[3]
    ), lines
