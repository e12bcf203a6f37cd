"""How a command stops early (issue 30): a closed pipe, SIGTERM, and ``serve`` under Ctrl-C.

``query --json | head`` ends quietly (status 141, nothing on stderr); SIGTERM stops a
command as Ctrl-C does (``interrupted``, 143); ``serve`` exits 130 after SIGINT and 143
after SIGTERM whether it was started with SIGINT ignored (as ``cmd &`` in a script starts
it) or not, so neither the tests nor a user depend on the caller's signal dispositions.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from browser_helpers import processed_store

from surprise_memory.cli.stopping import Terminated, exit_status, install_sigterm
from surprise_memory.memory.snapshot import SnapshotNote
from surprise_memory.memory.store import EpisodeStore

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return processed_store(tmp_path_factory.mktemp("stopping"), seconds=10.0, episode_frames=2)


def test_a_closed_pipe_ends_query_quietly(store: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "surprise_memory", "query", str(store), "--json", "-k", "50"],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first write, as `| head -0`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert err == ""


def test_query_json_shows_each_episodes_snapshots(store: Path, tmp_path: Path) -> None:
    with EpisodeStore(store) as s:
        first, *rest = s.episode_ids()
        note = SnapshotNote("event", 5, 6, True)
        s.note_snapshot([first], note)
    out = subprocess.run(
        [sys.executable, "-m", "surprise_memory", "query", str(store), "--json", "-k", "50"],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    hits = {h["id"]: h for h in json.loads(out.stdout)["hits"]}
    assert hits[first]["snapshots"] == [note.as_dict()]
    assert all(hits[i]["snapshots"] == [] for i in rest)


def test_sigterm_is_an_interrupt_with_status_143() -> None:
    before = signal.getsignal(signal.SIGTERM)
    try:
        install_sigterm()
        with pytest.raises(Terminated) as stopped:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs between bytecodes
                pass
        assert isinstance(stopped.value, KeyboardInterrupt)  # the same cleanup as Ctrl-C
        assert exit_status(stopped.value) == 143
        assert exit_status(KeyboardInterrupt()) == 130
    finally:
        signal.signal(signal.SIGTERM, before)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.mark.parametrize(
    ("start", "sig", "status"),
    [
        (_ignore_sigint, signal.SIGINT, 130),  # was 0: Python installs no handler then
        (_default_sigint, signal.SIGINT, 130),
        (_ignore_sigint, signal.SIGTERM, 143),
    ],
    ids=["sigint-ignored-at-start", "sigint", "sigterm"],
)
def test_serve_stops_the_same_whatever_the_callers_dispositions(
    store: Path, tmp_path: Path, start: Callable[[], None], sig: int, status: int
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "surprise_memory", "serve", str(store), "--port", "0"],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=start,  # noqa: PLW1509  # the disposition the child starts with
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert "read-only at http://" in proc.stdout.readline()
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == status
        err = proc.stderr.read()
        assert "interrupted" in err and "Traceback" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
