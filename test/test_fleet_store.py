"""A robot's fleet store against a real PostgreSQL server behind a link the test controls.

Every fault of a robot's Wi-Fi, one at a time (:class:`link_proxy.LinkProxy`): a refused
link, a black hole, latency, a cut in the middle of a commit; then the server itself
stopped and hung; a restart with a backlog; three robots with their own flaky links. Each
time: adds never wait for the link, nothing committed is lost, the backlog is delivered
once the link returns, retrievals answer from the robot's own episodes marked partial while
it is down, and the link's state says what happened.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fleet_helpers import (
    Robot,
    add_episode,
    hung,
    server_ids,
    socket_path,
    stopped,
    stuck_report,
    via,
    wait_until,
)
from link_proxy import LinkProxy
from store_backends import new_database

from surprise_memory.errors import StoreUnreachableError
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.store import open_store, partial_of
from surprise_memory.memory.store.fleet.ledger import LEDGER_NAME
from surprise_memory.memory.store.migrate import episode_digest
from surprise_memory.perception.frames import Frame


@pytest.fixture
def link(pg_server: Any) -> Any:
    with LinkProxy(socket_path(pg_server)) as proxy:
        yield proxy


@pytest.fixture
def db(pg_server: Any) -> str:
    return new_database(pg_server)


def _add_without_waiting(robot: Robot, ks: range) -> None:
    """Add episodes in a thread: it must finish whatever the link does."""
    worker = threading.Thread(target=lambda: [robot.add(k) for k in ks])
    worker.start()
    worker.join(timeout=20.0)
    assert not worker.is_alive(), "an add waited for the link"


def test_episodes_are_committed_on_the_robot_then_delivered_whole(
    tmp_path: Path, link: LinkProxy, db: str
) -> None:
    robot = Robot(tmp_path, via(db, link.port), "r1")
    try:
        records = [robot.add(k) for k in range(4)]
        assert len(robot.store.local) == 4  # committed on the robot at once
        assert wait_until(robot.delivered, 20.0), robot.store.status()
        assert server_ids(db) == [r.id for r in records]  # in order
        with open_store(db, read_only=True) as server:
            for r in records:
                assert episode_digest(server, r.id) == episode_digest(robot.store.local, r.id)
        assert wait_until(lambda: robot.store.status().link.state == "connected", 5.0)
        hits = robot.store.search(max_results=10)
        assert partial_of(hits) == "" and [h.episode.id for h in hits] == [
            r.id for r in reversed(records)
        ]
    finally:
        robot.store.close()
    assert robot.not_sent == []


@pytest.mark.parametrize("fault", ["refuse", "black_hole"])
def test_a_dropped_link_costs_delay_never_an_episode(
    tmp_path: Path, link: LinkProxy, db: str, fault: str
) -> None:
    """Refused (the server's host is down) and black-holed (sockets alive, nothing
    answered: only the client's own watchdog notices): the robot goes on storing, says
    the link is unreachable, answers from its own episodes, and delivers all on return."""
    robot = Robot(tmp_path, via(db, link.port), "r1")
    other = Robot(tmp_path, db, "r2")  # another robot, straight on the server
    try:
        other.add(100)
        robot.add(0)
        assert wait_until(robot.delivered, 20.0)
        getattr(link, fault)()
        states: list[str] = []
        with _watching(robot, states):
            _add_without_waiting(robot, range(1, 6))
            assert wait_until(lambda: robot.store.status().link.state == "unreachable", 10.0), (
                robot.store.status()
            )
        status = robot.store.status()
        assert status.backlog.episodes == 5 and status.backlog.nbytes > 0
        if fault == "black_hole":  # cut by the watchdog, or a reconnect that timed out since
            detail = status.link.detail
            assert "no answer from the server within 1 s" in detail or "timeout" in detail
            assert "slow" not in states, states  # a dead link is not a slow one
        hits = robot.store.search(max_results=20)  # answered at once, from the robot
        assert "fleet unreachable" in partial_of(hits)
        assert sorted(h.episode.id for h in hits) == [f"r1-{k}" for k in range(6)]
        link.pass_traffic()
        assert wait_until(robot.delivered, 30.0), robot.store.status()
        assert sorted(server_ids(db)) == sorted([f"r1-{k}" for k in range(6)] + ["r2-100"])

        def whole() -> bool:  # cross-robot answers come back
            found = robot.store.search(max_results=20)
            return partial_of(found) == "" and len(found) == 7

        assert wait_until(whole, 15.0)
    finally:
        robot.store.close()
        other.store.close()
    assert robot.not_sent == []


def test_a_read_caught_by_a_black_hole_says_not_answering_not_slow(
    tmp_path: Path, link: LinkProxy, db: str
) -> None:
    """The first retrieval after the link went silent waits on a connection that answered
    fast before: it gives up at ``store_timeout_seconds`` with a partial answer that says
    the fleet does not answer (never "slow"), and the link reads "not answering" while it
    waits. Which bound speaks first (the read's own, or the connection's watchdog, both at
    that bound) is a race; both messages are true, and neither may say "slow"."""
    robot = Robot(tmp_path, via(db, link.port), "r1")
    try:
        robot.add(0)
        assert wait_until(robot.delivered, 20.0)
        # a whole answer first: the query connection is open and its round trips fast
        assert wait_until(lambda: partial_of(robot.store.search(max_results=5)) == "", 10.0)
        link.black_hole()
        states: list[str] = []
        with _watching(robot, states):
            asked = time.monotonic()
            hits = robot.store.search(max_results=5)
            took = time.monotonic() - asked
        partial = partial_of(hits)
        assert [h.episode.id for h in hits] == ["r1-0"]  # the robot's own, at once after
        assert took < 2 * robot.timeout_s + 1.0, took
        assert partial.startswith("fleet unreachable, answered from r1's own 1 episode(s)")
        assert (
            "the link or the server is not answering" in partial
            or "no answer from the server within 1 s" in partial
        ), partial
        assert "slow" not in partial and "slow" not in states, (partial, states)
        assert "not answering" in states, states
    finally:
        robot.store.close()


def test_a_slow_link_delivers_and_says_it_is_slow(tmp_path: Path, link: LinkProxy, db: str) -> None:
    robot = Robot(tmp_path, via(db, link.port), "r1", timeout_s=3.0)
    try:
        robot.add(0)
        assert wait_until(robot.delivered, 20.0)
        link.set_latency(0.3)  # 0.6 s round trips: slow (over 0.5 s), well under the 3 s bound
        seen = set()

        def done() -> bool:
            seen.add(robot.store.status().link.state)
            return robot.delivered() and "slow" in seen

        robot.add(1)
        assert wait_until(done, 30.0), (seen, robot.store.status())
        assert "unreachable" not in seen
        assert server_ids(db) == ["r1-0", "r1-1"]
    finally:
        robot.store.close()


def test_a_commit_cut_before_its_answer_is_delivered_once(
    tmp_path: Path, link: LinkProxy, db: str
) -> None:
    """The COMMIT reaches the server, the answer is lost: the sender cannot know, sends
    again, and the server's refusal of the known id tells it the first one committed."""
    robot = Robot(tmp_path, via(db, link.port), "r1")
    try:
        robot.add(0)
        assert wait_until(robot.delivered, 20.0)
        link.cut_next_commit()
        robot.add(1)
        assert wait_until(robot.delivered, 20.0), robot.store.status()
        assert link.commit_cuts_pending == 0  # the cut happened
        assert server_ids(db) == ["r1-0", "r1-1"]
    finally:
        robot.store.close()
    assert robot.not_sent == []


def test_an_id_another_robot_holds_on_the_server_is_named_not_sent(
    tmp_path: Path, pg_server: Any, db: str
) -> None:
    """Ids are unique across robots: an id another robot's episode already holds on the
    server is refused there. The sender must not take that refusal for its own earlier
    delivery (the episode would be counted delivered and be missing from the fleet)."""
    other = Robot(tmp_path, db, "r2")
    robot = Robot(tmp_path, db, "r1")
    try:
        add_episode(other.store, np.random.default_rng(1), "r1-1", 1)
        assert wait_until(other.delivered, 20.0), other.store.status()
        for k in range(3):
            robot.add(k)
        assert wait_until(robot.delivered, 20.0), robot.store.status()
        assert server_ids(db) == ["r1-1", "r1-0", "r1-2"]
        with open_store(db, read_only=True) as server:
            assert server.get("r1-1").robot_id == "r2"  # the other robot's, untouched
        assert robot.store.status().backlog.sent == 2
        assert "r1-1" in robot.store.local  # kept on the robot
    finally:
        robot.store.close()
        other.store.close()
    assert [i for i, _ in robot.not_sent] == ["r1-1"]
    assert "robot 'r2'" in robot.not_sent[0][1], robot.not_sent


def test_the_backlog_survives_a_restart_and_a_lost_ledger(
    tmp_path: Path, link: LinkProxy, db: str
) -> None:
    robot = Robot(tmp_path, via(db, link.port), "r1")
    robot.add(0)
    assert wait_until(robot.delivered, 20.0)
    link.refuse()
    for k in range(1, 4):
        robot.add(k)
    robot.store.close()  # the node stops with 3 episodes waiting
    robot.store = robot.open()
    try:
        assert robot.store.status().backlog.episodes == 3
        link.pass_traffic()
        assert wait_until(robot.delivered, 30.0), robot.store.status()
        assert server_ids(db) == [f"r1-{k}" for k in range(4)]
    finally:
        robot.store.close()
    # the ledger is a cache: lost, every episode the robot holds is offered again, and
    # the server's ids make each resend a no-op
    (tmp_path / "r1" / LEDGER_NAME).unlink()
    robot.store = robot.open()
    try:
        assert wait_until(robot.delivered, 30.0), robot.store.status()
        assert robot.store.status().backlog.sent == 4
        assert server_ids(db) == [f"r1-{k}" for k in range(4)]
    finally:
        robot.store.close()
    assert robot.not_sent == []


def test_the_local_copy_keeps_its_bound_delivered_episodes_first(
    tmp_path: Path, link: LinkProxy, db: str
) -> None:
    """Past ``fleet_local_max_bytes`` the delivered episodes leave the robot first; only a
    backlog that alone fills the bound loses episodes, lowest surprise first, each named,
    never the one just added."""
    bound = 2**20
    robot = Robot(tmp_path, via(db, link.port), "r1", fleet_local_max_bytes=bound)
    try:
        for k in range(6):  # about 330 kB each: the robot holds 3
            robot.add(k, side=240)
            assert wait_until(robot.delivered, 20.0)
            assert robot.store.total_bytes <= bound
        assert len(robot.store) < 6 and server_ids(db) == [f"r1-{k}" for k in range(6)]
        link.refuse()
        surprises = {6: 5.0, 7: 1.0, 8: 4.0, 9: 2.0, 10: 6.0, 11: 3.0}
        for k, surprise in surprises.items():
            robot.add(k, surprise, side=240)
            assert robot.store.total_bytes <= bound
        assert "r1-11" in robot.store  # the one just added stays
        lost = [i for i, _ in robot.not_sent]
        kept = [f"r1-{k}" for k in surprises if f"r1-{k}" not in lost]
        assert lost and all(f"r1-{k}" in lost for k in (7, 9))  # the lowest surprise went
        assert all(i in robot.store for i in kept)
        assert all("fleet_local_max_bytes" in why for _, why in robot.not_sent)
        link.pass_traffic()
        assert wait_until(robot.delivered, 30.0), robot.store.status()
        assert sorted(server_ids(db)) == sorted([f"r1-{k}" for k in range(6)] + kept)
    finally:
        robot.store.close()


def test_every_call_of_a_postgres_store_is_bounded(link: LinkProxy, db: str) -> None:
    """Any client (the browser, query, an agent) of a server behind a dead link gets an
    error in seconds, not a hang."""
    from surprise_memory.config import StoreConfig

    with open_store(via(db, link.port), StoreConfig(store_timeout_seconds=1.0)) as store:
        assert len(store) == 0
        link.black_hole()
        # the message names the bound: a live server's long request reads the same
        with pytest.raises(
            StoreUnreachableError,
            match=r"no answer from the server within 1 s \(.*store_timeout_seconds\)",
        ):
            len(store)
        link.pass_traffic()
        assert len(store) == 0  # reconnected


@pytest.mark.parametrize("fault", [hung, stopped], ids=["hung", "stopped"])
def test_a_hung_or_stopped_server(tmp_path: Path, pg_server: Any, db: str, fault: Any) -> None:
    """The server itself: SIGSTOPped (its kernel still answers TCP) or stopped."""
    robot = Robot(tmp_path, db, "r1")
    try:
        robot.add(0)
        assert wait_until(robot.delivered, 20.0)
        with fault(pg_server):
            _add_without_waiting(robot, range(1, 3))
            assert wait_until(lambda: robot.store.status().link.state == "unreachable", 10.0)
            assert "fleet unreachable" in partial_of(robot.store.search(max_results=10))
        assert wait_until(robot.delivered, 30.0), robot.store.status()
        assert server_ids(db) == ["r1-0", "r1-1", "r1-2"]
    finally:
        robot.store.close()
    assert robot.not_sent == []


def test_three_robots_each_with_its_own_flaky_link(tmp_path: Path, pg_server: Any, db: str) -> None:
    links = [LinkProxy(socket_path(pg_server)) for _ in range(3)]
    robots = [Robot(tmp_path, via(db, p.port), f"r{i}") for i, p in enumerate(links)]
    try:
        links[0].refuse()
        links[1].set_latency(0.05)
        links[2].black_hole()
        for k in range(4):
            for robot in robots:
                robot.add(k)
        links[0].pass_traffic()
        links[2].pass_traffic()
        delivered = wait_until(lambda: all(r.delivered() for r in robots), 40.0)
        if not delivered:
            print(stuck_report(db))  # in the captured output: where it hangs, untruncated
        assert delivered, [
            (r.name, r.store.status().backlog.episodes, r.store.status().link) for r in robots
        ]
        with open_store(db, read_only=True) as server:
            counts = server.robot_counts()  # type: ignore[attr-defined]
        assert {r: n for r, (n, _, _) in counts.items()} == {"r0": 4, "r1": 4, "r2": 4}

        answers = []

        def whole() -> bool:  # the fleet's episodes, asked from any robot
            hits = robots[1].store.search(max_results=20)
            answers.append((len(hits), partial_of(hits)))
            return partial_of(hits) == "" and len(hits) == 12

        assert wait_until(whole, 15.0), answers[-3:]
    finally:
        for robot in robots:
            robot.store.close()
        for proxy in links:
            proxy.close()
    assert all(r.not_sent == [] for r in robots)


def _add_view(robot: Robot, k: int) -> Any:
    """A place keyframe of one place at k s (one frame, its pose, its place's key)."""
    stamp = k * 1_000_000_000
    return robot.store.add(
        [Frame(np.full((24, 32, 3), k, dtype=np.uint8), stamp)],
        np.random.default_rng(k).normal(size=(1, 16)).astype(np.float32),
        stamp_ns=stamp, surprise=0.0, embedder_model="m", embedder_pretrained=True,
        pose=Pose(3.0, 5.0, frame_id="map"), kind="place", place_key="map@2m:1,2:0/8",
        episode_id=f"{robot.name}-view-{k}",
    )  # fmt: skip


def test_place_keyframes_are_delivered_and_their_replaced_views_are_not_lost(
    tmp_path: Path, link: LinkProxy, db: str
) -> None:
    """A place's views reach the server with their kind; views the robot replaced while
    the link was down are dropped from the backlog, not named as not sent (issue 47)."""
    robot = Robot(tmp_path, via(db, link.port), "r1")
    try:
        first = _add_view(robot, 1)
        assert wait_until(robot.delivered, 20.0)
        link.refuse()
        for k in range(2, 8):  # place_history 3: the robot keeps views 5, 6, 7
            _add_view(robot, k)
        assert robot.store.status().backlog.episodes == 3
        assert robot.store.local.place_views(first.place_key, "r1") == [
            f"r1-view-{k}" for k in (7, 6, 5)
        ]
        assert [r.id for r in robot.store.latest_places([first.place_key])] == ["r1-view-7"]
        link.pass_traffic()
        assert wait_until(robot.delivered, 30.0), robot.store.status()
        with open_store(db, read_only=True) as server:  # its own bound: the newest 3
            assert server.episode_ids() == [f"r1-view-{k}" for k in (5, 6, 7)]
            assert episode_digest(server, "r1-view-7") == episode_digest(
                robot.store.local, "r1-view-7"
            )
            assert {h.episode.kind for h in server.search(kinds={"place"})} == {"place"}
    finally:
        robot.store.close()
    assert robot.not_sent == []


@contextlib.contextmanager
def _watching(robot: Robot, states: list[str]) -> Iterator[None]:
    """Record every state of the robot's link (every 5 ms) during the block."""
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            states.append(robot.store.status().link.state)
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()


def _whole(robot: Robot, episodes: int) -> bool:
    hits = robot.store.search(max_results=20)
    return partial_of(hits) == "" and len(hits) == episodes


@contextlib.contextmanager
def _refused(link: LinkProxy) -> Iterator[None]:
    link.refuse()
    try:
        yield
    finally:
        link.pass_traffic()


@pytest.mark.parametrize("fault", ["stopped", "refused"])
def test_answers_are_whole_again_within_five_heartbeats_of_the_return(
    tmp_path: Path, pg_server: Any, link: LinkProxy, db: str, fault: str
) -> None:
    """The server stopped and started again, or its link refused, for 3 s, with the
    robot's read connection open before. From the return, cross-robot answers are whole
    within 5 x fleet_heartbeat_seconds (the sender's longest wait between tries) and one
    round of connecting; and a robot that read nothing since the return gets a whole
    first answer (its connection from before the fault is found dropped and opened
    again, not used), the link never called unreachable after the return."""
    heartbeat = 0.2
    robot = Robot(tmp_path, via(db, link.port), "r1", fleet_heartbeat_seconds=heartbeat)
    other = Robot(tmp_path, db, "r2")

    def outage() -> contextlib.AbstractContextManager[None]:
        return stopped(pg_server) if fault == "stopped" else _refused(link)

    try:
        other.add(100)
        robot.add(0)
        assert wait_until(robot.delivered, 20.0)
        assert wait_until(lambda: _whole(robot, 2), 10.0)  # the read connection is open
        with outage():
            robot.add(1)
            assert wait_until(lambda: robot.store.status().link.state == "unreachable", 10.0)
            time.sleep(3.0)  # the sender's wait between tries grows to 5 heartbeats
        returned = time.monotonic()
        assert wait_until(lambda: _whole(robot, 3), 10.0, step=0.01)
        whole_after = time.monotonic() - returned
        print(f"{fault}: the first whole answer {whole_after:.2f} s after the return")
        # the backoff, then one connection and a delivery's round trips on a loaded machine
        assert whole_after <= 5 * heartbeat + robot.timeout_s, whole_after

        # again, and the robot reads nothing from the fault until well after the return
        with outage():
            robot.add(2)
            assert wait_until(lambda: robot.store.status().link.state == "unreachable", 10.0)
            time.sleep(2.0)
        assert wait_until(robot.delivered, 20.0)
        time.sleep(5 * heartbeat)
        states: list[str] = []
        with _watching(robot, states):
            assert _whole(robot, 4), robot.store.search(max_results=20)
            time.sleep(5 * heartbeat)  # the sender's checks meanwhile
        assert "unreachable" not in states, states
    finally:
        robot.store.close()
        other.store.close()


def test_a_read_whose_connection_was_dropped_is_tried_again(
    tmp_path: Path, link: LinkProxy, db: str
) -> None:
    """The read connection is reset when it is next used (the server dropped it, and the
    robot finds out only by sending): the read is tried once more on a fresh connection
    within its bound, the answer is whole, and the link never called unreachable."""
    robot = Robot(tmp_path, via(db, link.port), "r1", fleet_heartbeat_seconds=5.0)
    other = Robot(tmp_path, db, "r2")
    try:
        other.add(100)
        robot.add(0)
        assert wait_until(robot.delivered, 20.0)
        assert wait_until(lambda: _whole(robot, 2), 10.0)
        states: list[str] = []
        with _watching(robot, states):
            link.cut_open_on_use()  # the sender's and the reader's connections alike
            start = time.monotonic()
            assert _whole(robot, 2)
            took = time.monotonic() - start
        assert took < robot.timeout_s and "unreachable" not in states, (took, states)
    finally:
        robot.store.close()
        other.store.close()
