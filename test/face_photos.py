"""Packaged photographs of faces and measures of a face region, for the redaction tests."""

from __future__ import annotations

import matplotlib.cbook
import numpy as np
import numpy.typing as npt
from PIL import Image

from surprise_memory.memory.redaction import FaceBox

FAINT = 0.1  # re-detection on the stored frames at a third of the redaction threshold


def grace_hopper() -> npt.NDArray[np.uint8]:
    """matplotlib's sample photograph of Grace Hopper (600 x 512, one face)."""
    path = matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


def region(rgb: npt.NDArray[np.uint8], box: FaceBox) -> npt.NDArray[np.float64]:
    """A face box's pixels as floats, to compare."""
    return rgb[box.y0 : box.y1, box.x0 : box.x1].astype(np.float64)


def detail(pixels: npt.NDArray[np.float64]) -> float:
    """Mean absolute difference of neighbouring pixels: a face's edges, gone when blurred."""
    grey = pixels.mean(axis=2)
    return float(np.abs(np.diff(grey, axis=0)).mean() + np.abs(np.diff(grey, axis=1)).mean())
