"""The memory browser's answers over HTTP, from a real ``surprise-memory serve`` process.

Bad requests (a missing episode, a malformed time, a path outside the store, an upload
too large, a write) get a clear 4xx with a JSON reason, never a stack trace or a file
outside the store; frames are the stored JPEG bytes; the live stream tells of episodes
another process adds and evicts; Ctrl-C stops a server that has a page listening; and the
same page runs on the PostgreSQL backend (a real server, ``store_backends.pg_server``).
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from browser_helpers import (
    EventStream,
    Server,
    copy_episode,
    image_search_ids,
    processed_store,
    serve,
    wait_for,
)

from surprise_memory.memory.episodes import trigger_frame_index
from surprise_memory.memory.store import EpisodeStore, describe_location, open_store
from surprise_memory.memory.store.migrate import migrate_store
from surprise_memory.offline.run_record import load_run_record, read_scores

S = 1_000_000_000
UPLOAD_LIMIT = 65536
LIVE_STREAMS = 2


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return processed_store(tmp_path_factory.mktemp("browser_http"), seconds=10.0, episode_frames=4)


@pytest.fixture(scope="module")
def server(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    cwd = tmp_path_factory.mktemp("cwd")
    options = (
        "--live-poll-seconds",
        "0.2",
        "--max-upload-bytes",
        str(UPLOAD_LIMIT),
        "--max-live-streams",
        str(LIVE_STREAMS),
    )
    with serve(str(store), cwd, *options) as s:
        yield s


@pytest.fixture(scope="module")
def first_id(store: Path) -> str:
    with EpisodeStore(store, read_only=True) as s:
        ids = s.episode_ids()
    assert len(ids) >= 2, "the synthetic run should store a few episodes"
    return ids[0]


def raw_get(server: Server, path: str, host: str | None = None) -> tuple[int, bytes]:
    """A GET whose path is sent exactly as given (``..`` and all), as an attacker would."""
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest("GET", path, skip_host=host is not None)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("path", "status", "reason"),
    [
        ("api/episodes/no-such-episode", 404, "no episode 'no-such-episode'"),
        ("api/episodes/..%2F..%2Fetc%2Fpasswd", 404, "nothing at"),
        ("api/episodes/{id}/frames/99", 404, "frame 99 of episode"),
        ("api/episodes/{id}/frames/-1", 404, "frame '-1' of episode"),
        ("api/episodes/{id}/frames/%C2%B2", 404, "frame '²' of episode"),  # was a 500
        ("api/search?k=%C2%B2", 400, "k '²'"),
        ("api/search?start=1e300", 400, "time '1e300'"),
        ("api/search?start=99999999999999999999ns", 400, "time '99999999999999999999ns'"),
        ("api/search?start=yesterday", 400, "time 'yesterday'"),
        ("api/search?start=2023-11-14T22:13:32", 400, "needs a zone"),
        ("api/search?start=10&end=2", 400, "the end is before the start"),
        ("api/search?near=1,2,3,4", 400, "near '1,2,3,4'"),
        ("api/search?near=0,0&radius=-1", 400, "radius '-1'"),
        ("api/search?radius=3", 400, "a radius needs a place"),
        ("api/search?k=100000", 400, "k '100000'"),
        ("api/search?robot_id=..%2Fx", 400, "robot_id='../x'"),
        ("api/search?text=a+door", 400, "random, untrained weights"),
        ("api/nowhere", 404, "nothing at /api/nowhere"),
    ],
)
def test_a_bad_request_gets_a_clear_4xx(
    server: Server, first_id: str, path: str, status: int, reason: str
) -> None:
    got, body, headers = server.get(path.format(id=first_id))
    assert got == status, body
    assert headers["content-type"] == "application/json"
    assert reason in json.loads(body)["error"]
    assert b"Traceback" not in body


@pytest.mark.parametrize(
    "path",
    [
        "/static/../../../../../../etc/passwd",
        "/static/..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
        "/static/%2e%2e/%2e%2e/episodes.sqlite3",
        "/api/episodes/{id}/frames/../../../../../../etc/passwd",
        "/api/episodes/{id}/frames/..%2f..%2fepisodes.sqlite3",
        "/api/episodes/..%2f..%2frun.json",
    ],
)
def test_a_path_outside_the_store_is_never_served(server: Server, first_id: str, path: str) -> None:
    status, body = raw_get(server, path.format(id=first_id))
    assert status == 404, body
    assert b"root:" not in body and b"SQLite format" not in body and b'"format"' not in body
    assert "error" in json.loads(body)


def test_requests_for_another_host_uploads_and_writes_are_refused(
    server: Server, first_id: str, store: Path
) -> None:
    # a page elsewhere cannot reach the loopback server through a DNS name it controls
    status, _ = raw_get(server, "/api/timeline", host="evil.example:80")
    assert status == 400
    status, body, _ = server.get("api/search", data=b"\xff" * (UPLOAD_LIMIT + 1))
    assert status == 413 and "at most 65536" in json.loads(body)["error"]
    status, body, _ = server.get("api/search", data=b"not an image at all")
    assert status == 400 and "not an image" in json.loads(body)["error"]
    # the page is read-only: no route writes
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.request("DELETE", f"/api/episodes/{first_id}")
    assert conn.getresponse().status == 405
    conn.close()
    with EpisodeStore(store, read_only=True) as s:
        assert first_id in s


def test_frames_are_the_stored_jpeg_bytes(server: Server, store: Path, first_id: str) -> None:
    with EpisodeStore(store, read_only=True) as s:
        rec = s.get(first_id)
    files = rec.frame_files()
    for i, path in enumerate(files):
        status, body, headers = server.get(f"api/episodes/{first_id}/frames/{i}")
        assert status == 200 and headers["content-type"] == "image/jpeg"
        assert body == path.read_bytes()  # never re-encoded
    # the latest episodes' cards: the trigger's frame, as search and the episode view
    status, body, headers = server.get(f"api/episodes/{first_id}/thumbnail")
    assert status == 200 and headers["content-type"] == "image/jpeg"
    assert body == files[trigger_frame_index(rec.frame_stamps_ns, rec.stamp_ns)].read_bytes()
    status, body, _ = server.get("api/episodes/no-such-episode/thumbnail")
    assert status == 404 and "no episode" in json.loads(body)["error"]


def test_timeline_episode_and_curve_match_the_store(
    server: Server, store: Path, first_id: str
) -> None:
    with EpisodeStore(store, read_only=True) as s:
        summaries = s.summaries()
        origin = s.origin_ns
        rec = s.get(first_id)
    assert origin is not None
    status, timeline = server.json("api/timeline")
    assert status == 200 and timeline["id"] == [x.id for x in summaries]
    assert timeline["origin_ns"] == str(origin)
    assert timeline["t"] == pytest.approx([(x.stamp_ns - origin) / S for x in summaries])
    assert timeline["x"] == pytest.approx([x.position[0] for x in summaries], abs=5e-4)
    status, ep = server.json(f"api/episodes/{first_id}")
    assert status == 200 and ep["stamp_ns"] == str(rec.stamp_ns) and len(ep["frames"]) == 4
    assert ep["threshold"] == pytest.approx(rec.threshold)
    assert ep["why"][0].startswith(f"Surprise s = {rec.surprise:.3f} was above the threshold")
    status, curve = server.json("api/curve")
    run = load_run_record(store)
    scores = read_scores(store / "scores.csv")
    assert status == 200 and curve["available"] and curve["frames"] == len(scores["stamp_ns"])
    assert curve["events"] == pytest.approx([(e["stamp_ns"] - origin) / S for e in run["events"]])
    status, info = server.json("api/store")
    assert info["episodes"] == len(summaries) and info["untrained"] is True
    assert info["search"]["text"]["ok"] is False and info["search"]["image"]["ok"] is True


def test_the_live_stream_tells_of_episodes_added_and_evicted(
    server: Server, store: Path, first_id: str
) -> None:
    stream = EventStream(server.url)
    try:
        name, data = stream.next()
        assert name == "hello"
        count = data["count"]
        with EpisodeStore(store) as writer:
            copy_episode(writer, first_id, "live-http-1", shift_s=1.0)
            name, data = stream.next()
            assert name == "episodes" and data["added"]["id"] == ["live-http-1"]
            assert data["removed"] == [] and data["count"] == count + 1
            status, ep = server.json("api/episodes/live-http-1")
            assert status == 200 and ep["id"] == "live-http-1"
            writer.delete(["live-http-1"])
            name, data = stream.next()
            assert name == "episodes" and data["removed"] == ["live-http-1"]
        assert server.get("api/episodes/live-http-1")[0] == 404
    finally:
        stream.close()


def test_live_streams_are_capped(server: Server) -> None:
    """At most max_live_streams pages hold the stream; one more is told to come back (503)."""

    def opened() -> EventStream | None:
        try:
            return EventStream(server.url)
        except AssertionError:  # 503 until the server saw an earlier page go
            return None

    streams: list[EventStream] = []
    try:
        for _ in range(LIVE_STREAMS):
            streams.append(wait_for(opened, 30.0, "a free live stream"))
            assert streams[-1].next()[0] == "hello"
        status, body, headers = server.get("api/live")
        assert status == 503 and "max_live_streams" in json.loads(body)["error"]
        assert headers["retry-after"] == "10"
        streams.pop().close()  # a page leaves: its place is free again
        streams.append(wait_for(opened, 30.0, "the place the page left"))
        assert streams[-1].next()[0] == "hello"
    finally:
        for s in streams:
            s.close()


@pytest.mark.parametrize("case", ["missing store", "busy port"])
def test_serve_says_in_one_line_why_it_cannot_start(
    server: Server, store: Path, tmp_path: Path, case: str
) -> None:
    if case == "missing store":
        args, needle = [str(tmp_path / "nowhere")], "does not exist"
    else:
        args, needle = [str(store), "--port", str(urlsplit(server.url).port)], "cannot listen on"
    proc = subprocess.run(
        [sys.executable, "-m", "surprise_memory", "serve", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("surprise-memory: error: ") and needle in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_ctrl_c_stops_a_server_that_a_page_listens_to(store: Path, tmp_path: Path) -> None:
    with serve(str(store), tmp_path) as server:
        stream = EventStream(server.url)
        assert stream.next()[0] == "hello"
        t0 = time.monotonic()
    # serve() sent SIGINT and checked the exit; the open stream did not hold it
    assert time.monotonic() - t0 < 5.0
    with pytest.raises(EOFError):
        stream.next()
    stream.close()


def test_the_page_runs_on_a_postgresql_store(
    store: Path, pg_url: str, tmp_path: Path, first_id: str
) -> None:
    migrate_store(str(store), pg_url)
    with EpisodeStore(store, read_only=True) as folder:
        ids = folder.episode_ids()
        jpeg = folder.frame_jpeg(first_id, 2)
        origin = folder.origin_ns
    assert origin is not None
    with serve(pg_url, tmp_path, "--live-poll-seconds", "0.2") as server:
        status, info = server.json("api/store")
        assert status == 200 and info["backend"] == "postgresql" and info["episodes"] == len(ids)
        assert info["location"] == describe_location(pg_url)
        assert server.json("api/timeline")[1]["id"] == ids
        status, body, _ = server.get(f"api/episodes/{first_id}/frames/2")
        assert status == 200 and body == jpeg  # the bytes migrate copied, as stored
        status, found = server.json("api/search?start=0&end=100000")
        assert status == 200 and sorted(h["id"] for h in found["hits"]) == sorted(ids)
        status, found = server.json("api/search", data=jpeg, headers={"Content-Type": "image/jpeg"})
        assert status == 200 and found["ranked_by"] == "image"
        with open_store(pg_url, read_only=True) as pg:
            assert [h["id"] for h in found["hits"]] == image_search_ids(pg, jpeg)
        assert found["hits"][0]["score"] > 0.99
        status, curve = server.json("api/curve")
        assert curve == {"available": False, "reason": "a database store keeps no per-frame scores"}
        stream = EventStream(server.url)
        try:
            assert stream.next()[0] == "hello"
            with open_store(pg_url) as writer:
                copy_episode(writer, first_id, "live-pg-1", shift_s=1.0)
            name, data = stream.next()
            assert name == "episodes" and data["added"]["id"] == ["live-pg-1"]
        finally:
            stream.close()
        assert server.json("api/episodes/live-pg-1")[1]["robot_id"] == data["added"]["robot"][0]
