"""What every store class shares, written once: :class:`StoreFront`, :class:`EpisodeCopy`.

The folder store, the PostgreSQL store and a robot's fleet store answer the same
questions about themselves (their settings, the embedder and time origin their ``meta``
records), take a query in keyword form (``search``), cap the results a query may ask for,
and close in a ``with`` block; each says where its ``meta`` is, the rest is here.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any, NamedTuple, TypeVar

import numpy.typing as npt

from surprise_memory.config import StoreConfig
from surprise_memory.errors import InputError
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store.catalog import StoreMeta
from surprise_memory.memory.store.records import EpisodeRecord, RetrievalHit

__all__ = ["EpisodeCopy", "StoreFront"]

S = TypeVar("S", bound="StoreFront")


class EpisodeCopy(NamedTuple):
    """One episode as another store holds it, to be copied (:meth:`StoreFront.import_episodes`).

    Attributes:
        record: The episode as the source returned it.
        jpegs: Its frames' JPEG bytes.
        embeddings: Its stored unit-norm embeddings, (frames, D).

    """

    record: EpisodeRecord
    jpegs: Sequence[bytes]
    embeddings: npt.ArrayLike


class StoreFront:
    """The part of a store's public face that every backend has alike.

    A subclass sets ``_config`` and ``_read_only``, and implements :meth:`_current_meta`,
    ``retrieve`` and ``close``.
    """

    _config: StoreConfig
    _read_only: bool

    def _current_meta(self) -> StoreMeta:
        """The store's ``meta`` entries as they are now."""
        raise NotImplementedError

    def retrieve(
        self, query: RetrievalQuery, *, include_images: bool = False
    ) -> list[RetrievalHit]:
        """Answer a query (each backend)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the store (each backend)."""
        raise NotImplementedError

    def import_episode(
        self,
        record: EpisodeRecord,
        jpegs: Sequence[bytes],
        embeddings: npt.ArrayLike,
        *,
        origin_ns: int | None = None,
        budget: bool = False,
    ) -> EpisodeRecord:
        """Store an episode copied from another store (each backend)."""
        raise NotImplementedError

    def import_episodes(
        self,
        copies: Sequence[EpisodeCopy],
        *,
        origin_ns: int | None = None,
        defer_index: bool = False,
    ) -> None:
        """Store episodes copied from another store, no budget applied (``migrate``).

        Here one :meth:`import_episode` each, in turn; a backend whose transactions cost a
        round trip and a flush each (PostgreSQL) writes them in one. ``defer_index``: a
        store whose approximate index does not exist yet leaves it to
        :meth:`build_deferred_index` (PostgreSQL: a bulk load is faster without it).

        Raises:
            InputError: Counts differ, or an id is invalid.
            EmbedderMismatchError: The embedder differs from the store's.
            StoreError: Read-only, an id exists, or a write failed (the episodes before it
                are stored, here; none of them in a store that writes them at once).

        """
        for copy in copies:
            self.import_episode(copy.record, copy.jpegs, copy.embeddings, origin_ns=origin_ns)

    def build_deferred_index(self) -> None:
        """Build the approximate index that imports with ``defer_index`` left (if missing).

        Nothing here: a folder's index grows with every episode.
        """

    @property
    def config(self) -> StoreConfig:
        """The store's settings."""
        return self._config

    @property
    def read_only(self) -> bool:
        """Whether the store was opened read-only (adds and deletes are refused)."""
        return self._read_only

    @property
    def embedder_model(self) -> str | None:
        """Model name of the frame embeddings (None before the first episode)."""
        return self._current_meta().embedder_model

    @property
    def embedder_pretrained(self) -> bool | None:
        """Whether the frame embedder had trained weights (None before the first episode)."""
        return self._current_meta().embedder_pretrained

    @property
    def embedding_dim(self) -> int | None:
        """Dimension of the frame embeddings (None before the first episode)."""
        return self._current_meta().embedding_dim

    @property
    def origin_ns(self) -> int | None:
        """The store's time origin, int ns: the first frame seen; None when not known."""
        return self._current_meta().origin_ns

    def result_count(self, query: RetrievalQuery) -> int:
        """How many hits ``query`` gets: its ``max_results``, else the store's default.

        Raises:
            InputError: ``query`` is no :class:`RetrievalQuery`, or asks for more than
                ``max_results_cap``.

        """
        if not isinstance(query, RetrievalQuery):
            raise InputError(f"query is a {type(query).__name__}: expected RetrievalQuery")
        cap = self._config.max_results_cap
        k = query.max_results or self._config.default_max_results
        if k > cap:
            raise InputError(f"max_results={k}: at most max_results_cap={cap}")
        return k

    def search(self, *, include_images: bool = False, **query: Any) -> list[RetrievalHit]:
        """Shorthand: ``retrieve(RetrievalQuery(**query), include_images=...)``.

        Raises:
            InputError: Invalid or unknown query fields.
            EmbedderMismatchError: See ``retrieve``.
            StoreError: See ``retrieve``.

        """
        try:
            q = RetrievalQuery(**query)
        except TypeError as exc:
            raise InputError(f"invalid query fields: {exc}") from exc
        return self.retrieve(q, include_images=include_images)

    def __enter__(self: S) -> S:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
