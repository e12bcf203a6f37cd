"""Where weights come from, and where the model runs: shared by both encoders.

A ``weights`` string is one of

* ``random`` or ``random:<preset>``: a seeded random init of the architecture (untrained);
* a local folder (or, for the embedder, a checkpoint file): loaded without any network;
* ``synthetic-trained-tiny``: the project's own small models, trained on synthetic scenes
  and shipped in the package (:data:`~.presets.SYNTHETIC_WEIGHTS`), loaded as a local
  folder; outputs name them so (:func:`synthetic_part`), never as the paper's models;
* a hub id (``org/name``): the local Hugging Face cache first; when it is not cached and the
  hub is offline (``HF_HUB_OFFLINE=1``) or unreachable, one :class:`ModelLoadError` at once,
  naming the model and how to provide a local folder, instead of retries and a trace.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from surprise_memory.errors import ConfigError, ModelLoadError

__all__ = [
    "WeightsSource",
    "check_hub_reachable",
    "hub_offline",
    "parse_weights",
    "resolve_device",
    "resolve_dtype",
    "seeded",
    "synthetic_part",
]

_log = logging.getLogger(__name__)

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class WeightsSource:
    """A parsed ``weights`` string.

    Attributes:
        kind: ``random``, ``local`` (folder or file) or ``hub``.
        value: The preset name (random), the resolved path (local) or the hub id (hub).

    """

    kind: str
    value: str


def parse_weights(weights: str, *, default_preset: str) -> WeightsSource:
    """Classify a weights string.

    Args:
        weights: ``random[:preset]``, a path, or a hub id.
        default_preset: Preset of a bare ``random``.

    Returns:
        The source.

    Raises:
        ModelLoadError: The string looks like a path (absolute, ``./``, ``~``) but nothing
            is there, or it is empty.

    """
    text = weights.strip()
    if not text:
        raise ModelLoadError("empty weights: give a hub id, a local folder, or 'random'")
    if text == "random":
        return WeightsSource("random", default_preset)
    if text.startswith("random:"):
        return WeightsSource("random", text.split(":", 1)[1])
    path = Path(text).expanduser()
    if path.exists():
        return WeightsSource("local", str(path.resolve()))
    if text.startswith(("/", ".", "~")) or text.count("/") != 1:
        raise ModelLoadError(
            f"weights {weights!r}: no such file or folder (and not a hub id 'org/name')"
        )
    return WeightsSource("hub", text)


def synthetic_part(weights: str, part: str) -> Path | None:
    """The shipped synthetic weights' ``part`` folder when ``weights`` names them, else None.

    ``weights`` names them as ``synthetic-trained-tiny`` or as a path to the shipped folder
    (or its ``part`` subfolder, or a file in it).

    Args:
        weights: A weights string.
        part: ``video`` or ``embedder``.

    """
    from surprise_memory.perception.encoders.presets import SYNTHETIC_MODEL_NAME, SYNTHETIC_WEIGHTS

    text = weights.strip()
    if text == SYNTHETIC_MODEL_NAME:
        return SYNTHETIC_WEIGHTS / part
    path = Path(text).expanduser()
    if not text or not path.exists():
        return None
    path = path.resolve()
    root = SYNTHETIC_WEIGHTS.resolve()
    if path == root or path.is_relative_to(root / part):
        return SYNTHETIC_WEIGHTS / part
    return None


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` is set (read now, per call)."""
    return any(
        os.environ.get(name, "").strip().lower() in _TRUE
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def local_folder_hint(model: str, setting_name: str) -> str:
    """How to provide a local copy of a hub model, for error messages."""
    name = model.rsplit("/", maxsplit=1)[-1]
    return (
        f"Provide a local copy: on a machine with internet run "
        f"`hf download {model} --local-dir /path/to/{name}`, copy the folder "
        f"to this machine and set {setting_name}:=/path/to/{name}."
    )


def check_hub_reachable(repo_id: str, *, what: str, setting_name: str, timeout_s: float) -> None:
    """Fail fast when the hub is offline or does not answer for ``repo_id``.

    Args:
        repo_id: Hub repository (``org/name``).
        what: What the weights are for (message).
        setting_name: The setting that takes a local folder instead (message).
        timeout_s: Seconds to wait for the hub.

    Raises:
        ModelLoadError: Offline mode, no answer, or no such repository.

    """
    hint = local_folder_hint(repo_id, setting_name)
    if hub_offline():
        raise ModelLoadError(
            f"{what} {repo_id!r} is not in the local Hugging Face cache and the hub is offline "
            f"(HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE set). {hint}"
        )
    from huggingface_hub import HfApi

    try:
        HfApi().model_info(repo_id, timeout=timeout_s)
    except Exception as err:
        raise ModelLoadError(
            f"{what} {repo_id!r} is not in the local Hugging Face cache and the hub did not "
            f"answer within {timeout_s:.0f} s ({type(err).__name__}: {err}). {hint}"
        ) from None


def resolve_device(spec: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu; ``cuda[:N]`` or ``cpu`` as given.

    Raises:
        ConfigError: Unknown spec, or CUDA asked for and not available.

    """
    name = spec.strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError) as err:
        raise ConfigError(f"device={spec!r}: must be auto, cpu, cuda or cuda:N") from err
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"device={spec!r}: must be auto, cpu, cuda or cuda:N")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device={spec!r}: CUDA is not available on this machine")
    return device


def resolve_dtype(spec: str, device: torch.device) -> torch.dtype:
    """``auto`` -> bfloat16 on CUDA, float32 on CPU (bf16 is slower on CPUs).

    Raises:
        ConfigError: Unknown spec.

    """
    if spec == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if spec not in _DTYPES:
        raise ConfigError(f"dtype={spec!r}: must be auto, bfloat16, float16 or float32")
    return _DTYPES[spec]


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run a block with torch's CPU generator seeded, restoring the caller's RNG state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield
