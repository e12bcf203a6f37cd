"""The embedder of a query: the one a store recorded, rebuilt to embed text or an image.

A store keeps the name of the model that embedded its frames (``PE-Core-L-14-336:meta``,
or ``...:random (untrained, seed N)``) and refuses query vectors from another one.
:func:`store_query_embedder` rebuilds that model: its trained weights, or, for an image
query on a store made with random weights (the demo's), the same random initialisation
(the seed is part of the name), so image queries still rank by the store's own features.
A text query on random weights is refused: its ranking would be noise. The command line
(``surprise-memory query``) uses it; the memory browser (``surprise-memory serve``) and the
MCP server (``surprise-memory mcp``) hold one through :class:`StoreQueryEmbedder` (built on
the first query, shared by their threads), and read a query image with
:func:`decode_query_image`.
:func:`canonical_model_name` is the rule by which a caller's model name is read (DAAAM's
``PE-Core-L14-336`` is open_clip's ``PE-Core-L-14-336``): the agent tool, its ROS client
and the memory node's ``retrieve_episodes`` all apply it.
"""

from __future__ import annotations

import io
import re
import threading
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from surprise_memory.errors import InputError, ModelLoadError

if TYPE_CHECKING:
    from surprise_memory.memory.store.interface import EpisodeStoreBackend
    from surprise_memory.perception.encoders import ImageTextEmbedder

__all__ = [
    "StoreQueryEmbedder",
    "canonical_model_name",
    "check_text_queries",
    "decode_query_image",
    "store_query_embedder",
]

_SEED_RE = re.compile(r"seed (\d+)")
# open_clip spells PE-Core "PE-Core-L-14-336"; DAAAM's configs (and Meta's PE repository)
# "PE-Core-L14-336": the same model, so one is accepted for the other
_PE_ALIAS = re.compile(r"^PE-Core-([A-Za-z]+)(\d+)-(\d+)$")


def canonical_model_name(name: str) -> str:
    """The open_clip spelling of a model name: ``PE-Core-L14-336`` -> ``PE-Core-L-14-336``.

    Any suffix after ``:`` (the weights, as the store records them) is kept as it is.
    """
    model, sep, rest = name.partition(":")
    model = _PE_ALIAS.sub(r"PE-Core-\1-\2-\3", model)
    return model + sep + rest


def check_text_queries(store: EpisodeStoreBackend) -> None:
    """Refuse text queries on a store whose embeddings cannot be compared with a text.

    Raises:
        InputError: The store has no episode yet, or its embedder had random weights.

    """
    name = store.embedder_model
    if name is None:
        raise InputError("the store has no episode, nothing to compare with")
    if not store.embedder_pretrained:
        raise InputError(
            f"the store's embeddings come from {name!r}: random, untrained weights, so a "
            "text query would rank at random. Process the input again with trained "
            "embedder weights (--embedder-weights meta, or a local folder)."
        )


def store_query_embedder(
    store: EpisodeStoreBackend, device: str = "auto", *, text: bool
) -> ImageTextEmbedder:
    """Rebuild the store's recorded embedder for a text or an image query.

    Args:
        store: The open store (either backend).
        device: Where the model runs (``auto``, ``cpu``, ``cuda``, ``cuda:N``).
        text: The query is a text (needs trained weights); else an image.

    Returns:
        The embedder; its ``model_name`` equals the store's ``embedder_model``.

    Raises:
        InputError: The store has no episode, a text query meets random weights, or the
            rebuilt model's name differs from the store's.
        ModelLoadError: The model or its weights cannot be loaded (e.g. offline with no
            local copy).

    """
    if text:
        check_text_queries(store)
    name = store.embedder_model
    if name is None:
        raise InputError("the store has no episode, nothing to compare with")
    model, _, weights = str(name).partition(":")
    seed = 0
    if not store.embedder_pretrained:
        found = _SEED_RE.search(weights)
        seed = int(found.group(1)) if found else 0
        weights = "random"
    from surprise_memory.perception.encoders import ImageTextEmbedder

    try:
        emb = ImageTextEmbedder(model, weights, device=device, seed=seed)
    except ModelLoadError as exc:
        raise ModelLoadError(f"cannot load the store's embedder {name!r}: {exc}") from None
    if emb.model_name != name:
        raise InputError(
            f"the embedder rebuilt for the query is {emb.model_name!r}, the store's is {name!r}"
        )
    return emb


def decode_query_image(data: bytes) -> npt.NDArray[np.uint8]:
    """A query image (JPEG, PNG, ... bytes) as (H, W, 3) uint8 RGB.

    Raises:
        InputError: Not an image Pillow can read, or one over Pillow's pixel limit.

    """
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as img:
            return np.array(img.convert("RGB"), dtype=np.uint8)  # writable, as torch wants
    except Image.DecompressionBombError:
        raise InputError(f"the image has over {Image.MAX_IMAGE_PIXELS} pixels") from None
    except (OSError, ValueError):
        raise InputError("the query is not an image that can be read (JPEG, PNG, ...)") from None


class StoreQueryEmbedder:
    """The store's recorded embedder for queries, built on first use, shared by threads.

    A server over a store (the browser, the MCP server) answers from several threads; the
    model is built once (again only when the store's embedder changes: a store that had
    no episode when the server started) and its forwards run one at a time.

    Args:
        store: The open store (either backend).
        device: Where the model runs (``auto``, ``cpu``, ``cuda``, ``cuda:N``).

    """

    def __init__(self, store: EpisodeStoreBackend, device: str = "cpu") -> None:
        self._store = store
        self._device = device
        self._lock = threading.Lock()
        self._model: ImageTextEmbedder | None = None

    @property
    def model_name(self) -> str | None:
        """The store's embedder model name (None before its first episode)."""
        return self._store.embedder_model

    @property
    def pretrained(self) -> bool | None:
        """Whether the store's embedder had trained weights (None before its first episode)."""
        return self._store.embedder_pretrained

    def embed_text(self, text: str) -> npt.NDArray[np.float32]:
        """One text query's vector.

        Raises:
            InputError: The store has no episode, or its embedder had random weights.
            ModelLoadError: The model cannot be loaded.

        """
        check_text_queries(self._store)  # refused before a model is loaded
        with self._lock:
            vector: npt.NDArray[np.float32] = self._built(text=True).embed_text([text])[0]
        return vector

    def embed_image(self, rgb: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
        """One query image's vector ((H, W, 3) uint8 RGB).

        Raises:
            InputError: The store has no episode.
            ModelLoadError: The model cannot be loaded.

        """
        with self._lock:
            vector: npt.NDArray[np.float32] = self._built(text=False).embed_images([rgb])[0]
        return vector

    def _built(self, *, text: bool) -> ImageTextEmbedder:
        if self._model is None or self._model.model_name != self._store.embedder_model:
            self._model = store_query_embedder(self._store, self._device, text=text)
        return self._model
