"""The PostgreSQL + pgvector backend of the episode store: one memory for a robot fleet.

* :mod:`.store`: :class:`PostgresEpisodeStore`, the backend (transactions, budget per robot,
  threads, reconnection).
* :mod:`.schema`: tables in the ``surprise_memory`` schema, versions and migrations, the
  HNSW index.
* :mod:`.rows`: the SQL of inserting, counting, evicting, deleting and reading rows.
* :mod:`.search`: a retrieval query as SQL, exact or HNSW with exact re-ranking.
* :mod:`.url`: connection strings (checked for passwords, redacted).

Needs ``psycopg`` and ``pgvector`` (requirements/store.txt); the SQLite store does not.
"""

from surprise_memory.memory.store.postgres.schema import SCHEMA, SCHEMA_VERSION
from surprise_memory.memory.store.postgres.store import PostgresEpisodeStore
from surprise_memory.memory.store.postgres.url import check_url, redacted

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "PostgresEpisodeStore",
    "check_url",
    "redacted",
]
