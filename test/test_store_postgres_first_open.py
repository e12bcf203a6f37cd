"""A new PostgreSQL store opened by several processes at the same instant (issue 20).

Robots booting together, or ``surprise-memory migrate`` run twice, open one empty database
at once: every opener must succeed, the pgvector extension, the schema and its tables
created once (under the store's advisory lock), and a role that truly may not create the
extension told so. Before the fix, 8 processes opening at once failed in 3 of 6 trials
with "this role cannot create it (duplicate key value violates unique constraint
pg_extension_name_index)", and a migration run twice at once failed on an episode the
other had copied. Processes meet at a barrier (a file) after their imports, memory nodes
at their lifecycle configure, so that they reach the database within milliseconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
import rclpy
import synthetic_frames as sf
import yaml
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState
from rclpy.node import Node
from ros_helpers import node_executable, peer_process, spin_until
from store_backends import new_database
from test_store_migrate import _fill

from surprise_memory.errors import StoreError
from surprise_memory.memory.store import open_store
from surprise_memory.memory.store.postgres.schema import SCHEMA_VERSION

# a child process: import everything, say ready, wait for "go", then do its part
_AT_ONCE = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path

    import numpy as np

    from surprise_memory.cli import main
    from surprise_memory.memory.store import open_store
    from surprise_memory.perception.frames import Frame

    barrier, me, what, url = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    (barrier / f"ready_{me}").touch()
    while not (barrier / "go").exists():
        time.sleep(0.001)
    if what == "open":  # open the store and add one episode of robot <me>
        rng = np.random.default_rng(int(me))
        frames = [Frame(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8), j) for j in range(8)]
        with open_store(url) as store:
            store.add(frames, rng.standard_normal((8, 16)), stamp_ns=4, surprise=1.0,
                      robot_id=f"r{me}",
                      embedder_model="m", embedder_pretrained=True)
        sys.exit(0)
    sys.exit(main(["migrate", sys.argv[5], url]))  # "migrate": the command's own entry
    """
)


def _at_once(tmp_path: Path, n: int, what: str, url: str, *extra: str) -> list[tuple[int, str]]:
    """Run ``n`` children that do ``what`` at the same instant; their (status, output)."""
    barrier = tmp_path / f"barrier_{what}"
    barrier.mkdir(parents=True)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _AT_ONCE, str(barrier), str(i), what, url, *extra],
            cwd=tmp_path,
            env=os.environ.copy(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(n)
    ]
    deadline = time.monotonic() + 120
    while len(list(barrier.glob("ready_*"))) < n and time.monotonic() < deadline:
        assert all(p.poll() is None for p in procs), [p.communicate()[0] for p in procs]
        time.sleep(0.01)
    (barrier / "go").touch()
    return [(p.wait(timeout=180), p.communicate()[0]) for p in procs]


def _extensions_and_versions(url: str) -> tuple[list[Any], list[Any]]:
    with psycopg.connect(url, autocommit=True) as conn:
        ext = conn.execute("SELECT extname FROM pg_extension WHERE extname = 'vector'")
        versions = conn.execute(
            "SELECT value FROM surprise_memory.meta WHERE key = 'schema_version'"
        )
        return ext.fetchall(), versions.fetchall()


def _has_schema(url: str) -> bool:
    try:
        return _extensions_and_versions(url)[1] != []
    except psycopg.errors.UndefinedTable:  # not created yet
        return False


def test_several_processes_open_a_new_store_at_the_same_instant(
    tmp_path: Path, pg_server: Any
) -> None:
    for trial in range(3):  # each a new database: the race is at its first open
        url = new_database(pg_server)
        results = _at_once(tmp_path / str(trial), 8, "open", url)
        assert all(code == 0 for code, _ in results), [out for code, out in results if code]
        assert _extensions_and_versions(url) == ([("vector",)], [(str(SCHEMA_VERSION),)])
        with open_store(url, read_only=True) as store:
            assert len(store) == 8
            assert set(store.robot_counts()) == {f"r{i}" for i in range(8)}  # type: ignore[attr-defined]


def test_the_same_migration_run_several_times_at_once_succeeds_every_time(
    tmp_path: Path, pg_url: str
) -> None:
    src = str(tmp_path / "robot")
    _fill(src, 12)
    results = _at_once(tmp_path, 4, "migrate", pg_url, src)
    assert all(code == 0 for code, _ in results), [out for code, out in results if code]
    copied = [out for _, out in results if "verified" in out]
    assert len(copied) == 4, [out for _, out in results]
    with open_store(src, read_only=True) as a, open_store(pg_url, read_only=True) as b:
        assert sorted(a.episode_ids()) == sorted(b.episode_ids())  # each once


def test_a_role_that_may_not_create_pgvector_is_told_so(pg_server: Any) -> None:
    url = new_database(pg_server)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS sm_weak")
        conn.execute("CREATE ROLE sm_weak LOGIN")
    weak = url.replace("postgres:@", "sm_weak:@", 1)
    assert weak != url
    with pytest.raises(StoreError, match="this role cannot create it") as err:
        open_store(weak)
    assert "permission denied" in str(err.value)
    assert "duplicate key" not in str(err.value)


def test_memory_nodes_configured_together_share_one_new_store(tmp_path: Path, pg_url: str) -> None:
    """Three memory nodes (three robots), unconfigured, then configured at the same instant
    through ``<node>/change_state``, as a robot's lifecycle manager does: the configure
    starts each fleet sender, so they meet at the database within milliseconds. (Three
    openers hit the race less often than eight: before the fix this test passed in two
    runs of two; the eight processes of the test above are the regression test.) The
    configure itself does not wait for the server (a robot starts with its link down):
    the test waits for the senders to have created the store."""
    params = sf.node_params(pg_url, None, autostart=False)
    names = [f"/boot_{i}" for i in range(3)]
    for i, ns in enumerate(names):
        section = dict(
            params["/**/memory_node"]["ros__parameters"],
            robot_id=f"robot{i}",
            fleet_local_store=str(tmp_path / f"robot{i}"),  # each robot's own copy
        )
        params[f"{ns}/memory_node"] = {"ros__parameters": section}
    del params["/**/memory_node"]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    rclpy.init()
    node = Node("first_open_test")
    clients = [node.create_client(ChangeState, f"{ns}/memory_node/change_state") for ns in names]
    args = ["--ros-args", "--params-file", str(path)]
    try:
        peers = [
            peer_process(
                [node_executable("memory_node"), *args, "-r", f"__ns:={ns}"],
                tmp_path,
                f"memory_node{i}",
            )
            for i, ns in enumerate(names)
        ]
        with peers[0] as a, peers[1] as b, peers[2] as c:
            ready = spin_until(node, lambda: all(c.service_is_ready() for c in clients), 120.0)
            assert ready, [p.poll() for p in (a, b, c)]
            request = ChangeState.Request()
            request.transition.id = Transition.TRANSITION_CONFIGURE
            futures = [client.call_async(request) for client in clients]
            assert spin_until(node, lambda: all(f.done() for f in futures), 150.0)
            assert [f.result().success for f in futures] == [True] * 3  # type: ignore[union-attr]
            assert spin_until(node, lambda: _has_schema(pg_url), 60.0)
    finally:
        node.destroy_node()
        rclpy.shutdown()
    assert _extensions_and_versions(pg_url) == ([("vector",)], [(str(SCHEMA_VERSION),)])
