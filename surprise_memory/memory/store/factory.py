"""Open the episode store that a ``store_path`` names: a folder (SQLite) or PostgreSQL.

Nodes, the command line and agent code call :func:`open_store` and get an
:class:`~surprise_memory.memory.store.interface.EpisodeStoreBackend`; nothing outside the
store package knows which backend it talks to. The PostgreSQL backend (and its
dependencies, ``psycopg`` and ``pgvector``) is imported only when a connection string is
given, so a robot that keeps its store in a folder does not need them.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from surprise_memory.config import FleetConfig, StoreConfig
from surprise_memory.errors import StoreError
from surprise_memory.memory.store.interface import EpisodeStoreBackend

__all__ = ["URL_SCHEMES", "describe_location", "is_postgres_url", "open_robot_store", "open_store"]

URL_SCHEMES = ("postgresql://", "postgres://")
"""A ``store_path`` starting with one of these names a PostgreSQL store; else a folder."""


def is_postgres_url(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` is a PostgreSQL connection URI (not a folder)."""
    return str(location).strip().lower().startswith(URL_SCHEMES)


def describe_location(location: str | os.PathLike[str]) -> str:
    """The location for a log line: the folder, or the connection string without password."""
    if is_postgres_url(location):
        from surprise_memory.memory.store.postgres.url import redacted

        return redacted(str(location))
    return os.path.abspath(os.path.expanduser(str(location)))


def open_store(
    location: str | os.PathLike[str] | None = None,
    config: StoreConfig | None = None,
    *,
    read_only: bool = False,
) -> EpisodeStoreBackend:
    """Open the store at ``location`` with the backend its form names.

    Args:
        location: A folder (``~`` expanded; the SQLite store) or a connection URI
            ``postgresql://user@host:port/db?sslmode=verify-full`` (PostgreSQL + pgvector,
            the password from ``PGPASSWORD`` / ``PGPASSFILE``); None = ``config.store_path``.
        config: The store's settings; None = defaults.
        read_only: Open for queries only.

    Returns:
        The open store (a context manager; close it when done).

    Raises:
        StoreError: The store cannot be opened (see each backend), the URI holds a
            password, or the PostgreSQL client libraries are not installed.

    """
    cfg = config or StoreConfig()
    where = str(location if location is not None else cfg.store_path)
    if not is_postgres_url(where):
        from surprise_memory.memory.store.sqlite import EpisodeStore

        return EpisodeStore(os.path.expanduser(where), cfg, read_only=read_only)
    return _postgres_opener(where)(cfg, read_only)


def _postgres_opener(url: str) -> Callable[[StoreConfig, bool], EpisodeStoreBackend]:
    """What opens the PostgreSQL store at ``url`` (settings, read-only), the URL checked.

    Raises:
        StoreError: The URI holds a password, or the client libraries are missing.

    """
    try:
        from surprise_memory.memory.store.postgres import PostgresEpisodeStore, check_url
    except ImportError as exc:
        raise StoreError(
            f"store_path is a PostgreSQL URI but its client is missing ({exc}); "
            "pip install -r requirements/store.txt"
        ) from exc
    check_url(url)

    def open_postgres(config: StoreConfig, read_only: bool) -> EpisodeStoreBackend:
        return PostgresEpisodeStore(url, config, read_only=read_only)

    return open_postgres


def open_robot_store(
    config: StoreConfig,
    fleet: FleetConfig,
    *,
    on_not_sent: Callable[[str, str], None],
    on_sent: Callable[[str], None] = lambda _id: None,
) -> EpisodeStoreBackend:
    """Open the store a live node writes to: ``config.store_path``, local first for a fleet.

    A folder is opened as :func:`open_store` opens it. A PostgreSQL URI gives a
    :class:`~surprise_memory.memory.store.fleet.FleetStore`: episodes are committed to the
    folder ``fleet.fleet_local_store`` on the robot, then delivered to the server in the
    background, so the camera path never waits for the network and a robot starts with
    its link down.

    Args:
        config: The store's settings (``store_path`` picks the backend).
        fleet: The local copy and the link's settings (unused for a folder).
        on_not_sent: Called with each episode id that will never reach the server, and why.
        on_sent: Called with each episode id delivered to the server.

    Raises:
        StoreError: The folder (or the robot's local copy) cannot be opened, the URI holds
            a password, or the PostgreSQL client libraries are not installed.

    """
    where = config.store_path
    if not is_postgres_url(where):
        return open_store(where, config)
    from surprise_memory.memory.store.fleet import FleetStore

    return FleetStore(
        describe_location(where),
        _postgres_opener(where),
        config,
        fleet,
        on_not_sent=on_not_sent,
        on_sent=on_sent,
    )
