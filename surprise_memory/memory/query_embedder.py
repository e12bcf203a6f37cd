"""The embedder of a query: the one a store recorded, rebuilt to embed text or an image.

A store keeps the name of the model that embedded its frames (``PE-Core-L-14-336:meta``,
or ``...:random (untrained, seed N)``) and refuses query vectors from another one.
:func:`store_query_embedder` rebuilds that model: its trained weights, or, for an image
query on a store made with random weights (the demo's), the same random initialisation
(the seed is part of the name), so image queries still rank by the store's own features.
A text query on random weights is refused: its ranking would be noise. The command line
(``surprise-memory query``) and the memory browser (``surprise-memory serve``) use it.
:func:`canonical_model_name` is the rule by which a caller's model name is read (DAAAM's
``PE-Core-L14-336`` is open_clip's ``PE-Core-L-14-336``): the agent tool, its ROS client
and the memory node's ``retrieve_episodes`` all apply it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from surprise_memory.errors import InputError, ModelLoadError

if TYPE_CHECKING:
    from surprise_memory.memory.store.interface import EpisodeStoreBackend
    from surprise_memory.perception.encoders import ImageTextEmbedder

__all__ = ["canonical_model_name", "check_text_queries", "store_query_embedder"]

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
