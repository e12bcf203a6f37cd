"""Connection strings of the PostgreSQL store: check, show without secrets."""

from __future__ import annotations

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from surprise_memory.errors import StoreError

__all__ = ["check_url", "redacted"]


def check_url(url: str) -> None:
    """Refuse a connection string that cannot be parsed or that carries a password.

    A password in the store setting would end up in launch files, process lists and logs;
    libpq reads it from ``PGPASSWORD`` or the password file (``PGPASSFILE``, default
    ``~/.pgpass``) instead.

    Raises:
        StoreError: The string is malformed or holds a password.

    """
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise StoreError(f"store_path is not a valid PostgreSQL connection string: {exc}") from None
    if params.get("password"):
        raise StoreError(
            f"{redacted(url)}: the connection string holds a password; remove it and put it "
            "in PGPASSFILE (~/.pgpass, mode 0600) or PGPASSWORD instead"
        )


def redacted(url: str) -> str:
    """The connection string without its password, for messages and logs."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://<unparsable connection string>"
    params.pop("password", None)
    return make_conninfo("", **{k: str(v) for k, v in params.items()})
