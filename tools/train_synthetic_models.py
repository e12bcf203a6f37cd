#!/usr/bin/env python3
"""Train the project's own small models on synthetic scenes (``synthetic-trained-tiny``).

Writes the weights folder the package ships (by default
``surprise_memory/perception/encoders/synthetic-trained-tiny``): the tiny V-JEPA-2 and the
small PE-Core, trained with a fixed seed on synthetic scenes (about 11 min with one torch
thread on a shared 2-core CPU); see :mod:`surprise_memory.offline.synthetic.training`.
These are not the paper's models. Usage::

    python tools/train_synthetic_models.py [--out DIR] [--scenes N] [--video-steps N] ...
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, train, print the model card's checksums."""
    from surprise_memory.offline.synthetic.training import TrainingSettings, train
    from surprise_memory.perception.encoders.presets import SYNTHETIC_WEIGHTS

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=SYNTHETIC_WEIGHTS, help="weights folder")
    for field in dataclasses.fields(TrainingSettings):
        flag = "--" + field.name.replace("_", "-")
        if isinstance(field.default, bool):  # type=bool would read "False" as true
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=field.default)
        else:
            parser.add_argument(flag, type=type(field.default), default=field.default)
    parser.add_argument(
        "--parts",
        default="video,embedder,gamma",
        help=(
            "parts to redo, comma-separated (video, embedder: train them; gamma: calibrate "
            "the gate on the video model); the others are kept"
        ),
    )
    args = parser.parse_args(argv)
    settings = TrainingSettings(
        **{f.name: getattr(args, f.name) for f in dataclasses.fields(TrainingSettings)}
    )
    t0 = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - t0:7.1f} s] {message}", flush=True)

    card = train(args.out, settings, log, tuple(args.parts.split(",")))
    for name, digest in card["sha256"].items():
        print(f"{digest}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
