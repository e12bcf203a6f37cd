"""Writers opening a new PostgreSQL store at once all get it (found by the many-recordings job).

Several workers of a job open the fleet's store together; on a new database they all
create the pgvector extension and the schema. ``CREATE EXTENSION IF NOT EXISTS`` is not
safe against a concurrent one (the loser fails on pg_extension's unique index), so it
must run under the openers' advisory lock like the rest of the schema.
"""

from __future__ import annotations

import threading
from typing import Any

from store_backends import new_database

from surprise_memory.memory.store import open_store


def test_writers_opening_a_new_store_together_all_succeed(pg_server: Any) -> None:
    for _ in range(4):  # a fresh database each round: the race is at creation only
        url = new_database(pg_server)
        start = threading.Barrier(4)
        errors: list[BaseException] = []

        def opener(
            url: str = url, start: threading.Barrier = start, errors: list[Any] = errors
        ) -> None:
            start.wait()
            try:
                open_store(url).close()
            except Exception as exc:  # collected: the assertion below names it
                errors.append(exc)

        threads = [threading.Thread(target=opener) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors, errors
        with open_store(url, read_only=True) as store:
            assert len(store) == 0
