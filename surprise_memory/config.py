"""One configuration schema for the whole package.

Each component has one frozen dataclass. Every field is declared with :func:`setting`,
which records its description and its allowed range once; from that single declaration

* ``__post_init__`` validates a value and names the rule it broke,
* the ROS nodes declare a parameter with a ``ParameterDescriptor`` (description, range,
  read-only flag),
* ``config/surprise_memory.yaml`` lists it with the same default (a test checks this),
* the offline command line builds its ``--option`` with the same name and default.

Field names are unique across all component configs, so one flat namespace serves the
node parameters, the YAML and the command line.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from surprise_memory.errors import ConfigError

__all__ = [
    "ALL_CONFIGS",
    "NODE_CONFIGS",
    "ROBOT_ID_PATTERN",
    "CameraConfig",
    "ComponentConfig",
    "ConfigError",
    "EmbedderConfig",
    "EncoderConfig",
    "EpisodeConfig",
    "GateConfig",
    "PoseConfig",
    "ScorerConfig",
    "Setting",
    "StoreConfig",
    "iter_settings",
    "setting",
    "settings_of",
]

_META_KEY = "surprise_memory"

ROBOT_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
"""What a robot id may be (host names fit); queries and the store check it too."""
_ROBOT_ID_RE = re.compile(ROBOT_ID_PATTERN)


@dataclass(frozen=True)
class Setting:
    """The declaration of one setting: what it means and which values are allowed."""

    name: str
    type: type
    default: Any
    description: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | None = None
    read_only: bool = False

    def check(self, value: Any) -> Any:
        """Return ``value`` converted to the setting's type, or raise :class:`ConfigError`."""
        value = _coerce(self, value)
        if self.type in (int, float):
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{self.name}={value!r}: must be a finite number")
            if self.low is not None and value < self.low:
                raise ConfigError(f"{self.name}={value!r}: must be >= {self.low}")
            if self.high is not None and value > self.high:
                raise ConfigError(f"{self.name}={value!r}: must be <= {self.high}")
        if self.choices is not None and value not in self.choices:
            raise ConfigError(f"{self.name}={value!r}: must be one of {', '.join(self.choices)}")
        return value


def _coerce(spec: Setting, value: Any) -> Any:
    if spec.type is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{spec.name}={value!r}: must be true or false")
    if spec.type is int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{spec.name}={value!r}: must be an integer")
        if isinstance(value, float) and not value.is_integer():
            raise ConfigError(f"{spec.name}={value!r}: must be an integer")
        return int(value)
    if spec.type is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{spec.name}={value!r}: must be a number")
        return float(value)
    if spec.type is str:
        if not isinstance(value, str):
            raise ConfigError(f"{spec.name}={value!r}: must be a string")
        return value
    raise ConfigError(f"{spec.name}: unsupported setting type {spec.type.__name__}")


def setting(
    default: Any,
    description: str,
    *,
    low: float | None = None,
    high: float | None = None,
    choices: Sequence[str] | None = None,
    read_only: bool = False,
) -> Any:
    """Declare a config field with its description and allowed range.

    Args:
        default: The one default of the setting.
        description: What it means, with units; shown by ``ros2 param describe`` and ``--help``.
        low: Smallest allowed value (numbers), inclusive.
        high: Largest allowed value (numbers), inclusive.
        choices: Allowed values (strings).
        read_only: True where a change at runtime would be wrong (model, window sizes).

    """
    meta = {
        "description": description,
        "low": low,
        "high": high,
        "choices": tuple(choices) if choices is not None else None,
        "read_only": read_only,
    }
    return field(default=default, metadata={_META_KEY: meta})


T = TypeVar("T", bound="ComponentConfig")


def settings_of(config_type: type[ComponentConfig]) -> list[Setting]:
    """Return the declared settings of a config class, in field order."""
    result = []
    for f in dataclasses.fields(config_type):
        meta = f.metadata.get(_META_KEY)
        if meta is None:
            raise ConfigError(f"{config_type.__name__}.{f.name} is not declared with setting()")
        type_ = {"int": int, "float": float, "bool": bool, "str": str}[str(f.type)]
        result.append(Setting(name=f.name, type=type_, default=f.default, **meta))
    return result


@dataclass(frozen=True)
class ComponentConfig:
    """Base of the component configs: validation from the declared settings."""

    component: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for spec in settings_of(type(self)):
            # frozen: write the coerced value (e.g. int 2 -> float 2.0) past __setattr__
            object.__setattr__(self, spec.name, spec.check(getattr(self, spec.name)))
        self.validate()

    def validate(self) -> None:
        """Check rules between fields; a subclass overrides it where it has such rules."""

    @classmethod
    def from_mapping(cls: type[T], values: Mapping[str, Any], *, strict: bool = False) -> T:
        """Build a config from a mapping, taking only this component's keys.

        Args:
            values: Setting names to values (node parameters, parsed YAML, CLI options).
            strict: Raise on keys that belong to no field of this config.

        Raises:
            ConfigError: A value is invalid, or (strict) a key is unknown.

        """
        names = {f.name for f in dataclasses.fields(cls)}
        if strict:
            unknown = sorted(set(values) - names)
            if unknown:
                raise ConfigError(f"unknown {cls.component} settings: {', '.join(unknown)}")
        return cls(**{k: v for k, v in values.items() if k in names})

    def as_dict(self) -> dict[str, Any]:
        """The settings as a plain dict (for reports and the store's run record)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ScorerConfig(ComponentConfig):
    """Settings of :class:`surprise_memory.surprise.scorer.SurpriseScorer` (s(t) and KL(t))."""

    component: ClassVar[str] = "scorer"

    window: int = setting(
        64,
        "W: number of earlier embeddings whose per-dimension mean and standard deviation "
        "form the predictive Gaussian (paper: 64).",
        low=2,
        high=100_000,
        read_only=True,
    )
    eps: float = setting(
        1e-6,
        "Floor of the per-dimension standard deviation, so constant dimensions do not "
        "divide by zero.",
        low=1e-12,
        high=1.0,
        read_only=True,
    )


@dataclass(frozen=True)
class GateConfig(ComponentConfig):
    """Settings of the :class:`~surprise_memory.surprise.gate.SurpriseGate` (τ, peaks, NMS)."""

    component: ClassVar[str] = "gate"

    gamma: float = setting(
        1.0,
        "gamma: robust threshold tau = median(s) + gamma * 1.4826 * MAD(s) (paper: 1.0; higher "
        "= fewer events).",
        low=0.0,
        high=100.0,
    )
    history: int = setting(
        3000,
        "Scores kept for the running median and MAD (oldest out first); 3000 = 5 min at 10 Hz.",
        low=3,
        high=1_000_000,
        read_only=True,
    )
    warmup: int = setting(
        32,
        "Scores needed in the history before the gate may trigger (tau is NaN before).",
        low=3,
        high=1_000_000,
    )
    nms_seconds: float = setting(
        1.0,
        "Non-maximum suppression radius in seconds: a peak is kept only if no score within "
        "this time before or after it is higher. It is also the gate's decision delay.",
        low=0.0,
        high=3600.0,
    )

    def validate(self) -> None:
        """Warm-up must fit in the history."""
        if self.warmup > self.history:
            raise ConfigError(
                f"warmup={self.warmup}: must be <= history={self.history} "
                "(the gate could never leave warm-up)"
            )


@dataclass(frozen=True)
class EncoderConfig(ComponentConfig):
    """Settings of the :class:`~surprise_memory.perception.encoders.VideoEncoder` and sampler."""

    component: ClassVar[str] = "encoder"

    encoder_weights: str = setting(
        "facebook/vjepa2-vitl-fpc64-256",
        "V-JEPA-2 weights: a hub id, a local folder in save_pretrained layout, or 'random' "
        "(seeded random init of ViT-L; 'random:tiny' for the tiny test preset). Random "
        "weights are untrained: every output that depends on them says so.",
        read_only=True,
    )
    encoder_device: str = setting(
        "auto",
        "Device of the video encoder: auto (cuda when available, else cpu), cuda, cuda:N, cpu.",
        read_only=True,
    )
    encoder_dtype: str = setting(
        "auto",
        "Compute dtype of the video encoder: auto = bfloat16 on CUDA, float32 on CPU (bf16 "
        "is several times slower on CPUs).",
        choices=("auto", "bfloat16", "float16", "float32"),
        read_only=True,
    )
    clip_frames: int = setting(
        64,
        "M: number of most recent frames in one encoder window (paper: 64); a multiple of "
        "the model's tubelet size (2).",
        low=2,
        high=1024,
        read_only=True,
    )
    clip_stride: int = setting(
        1,
        "Encode a window every k-th sampled frame (1 = every frame).",
        low=1,
        high=10_000,
    )
    input_fps: float = setting(
        0.0,
        "Sample the camera down to this rate in Hz before windowing (0 = keep every frame).",
        low=0.0,
        high=1000.0,
    )
    clip_warmup: str = setting(
        "pad",
        "Before M frames exist: 'pad' encodes windows padded by repeating the first frame; "
        "'wait' encodes nothing until the window is full.",
        choices=("pad", "wait"),
    )
    encoder_batch: int = setting(
        8,
        "Most windows in one forward pass when many are encoded at once (offline replay).",
        low=1,
        high=1024,
    )
    encoder_compile: bool = setting(
        False,
        "Wrap the encoder in torch.compile (slow first call, faster afterwards on GPUs).",
        read_only=True,
    )

    def validate(self) -> None:
        """The window must hold whole tubelets."""
        if self.clip_frames % 2:
            raise ConfigError(
                f"clip_frames={self.clip_frames}: must be even (V-JEPA-2 tubelets are 2 frames)"
            )


@dataclass(frozen=True)
class EmbedderConfig(ComponentConfig):
    """Settings of the :class:`~surprise_memory.perception.encoders.ImageTextEmbedder`."""

    component: ClassVar[str] = "embedder"

    embedder_model: str = setting(
        "PE-Core-L-14-336",
        "open_clip architecture name of the frame/text embedder (paper: PE-Core-L-14-336).",
        read_only=True,
    )
    embedder_weights: str = setting(
        "meta",
        "Embedder weights: an open_clip pretrained tag ('meta' = hub timm/PE-Core-L-14-336), "
        "a checkpoint file, a folder holding one, or 'random' (untrained).",
        read_only=True,
    )
    embedder_device: str = setting(
        "auto",
        "Device of the embedder: auto (cuda when available, else cpu), cuda, cuda:N, cpu.",
        read_only=True,
    )
    embedder_dtype: str = setting(
        "auto",
        "Compute dtype of the embedder: auto = bfloat16 on CUDA, float32 on CPU.",
        choices=("auto", "bfloat16", "float16", "float32"),
        read_only=True,
    )
    embedder_batch: int = setting(
        16,
        "Most images or texts in one forward pass of the embedder.",
        low=1,
        high=4096,
    )


@dataclass(frozen=True)
class StoreConfig(ComponentConfig):
    """Settings of the episode store and its retrieval queries.

    One setting, ``store_path``, picks the backend
    (:func:`~surprise_memory.memory.store.open_store`): a folder (SQLite) or a PostgreSQL
    connection string.
    """

    component: ClassVar[str] = "store"

    store_path: str = setting(
        "~/.ros/surprise_memory/store",
        "Where the episode store is: a folder (SQLite database and JPEG frames, created if "
        "missing) or a PostgreSQL connection string postgresql://user@host/db?sslmode=... "
        "(pgvector; a fleet's shared memory). Never put a password here: it comes from "
        "PGPASSWORD or PGPASSFILE.",
        read_only=True,
    )
    robot_id: str = setting(
        "",
        "Id of the robot whose episodes this process adds (1-64 letters, digits, _ . -); the "
        "disk budget applies per robot and queries may filter by it. Empty = the host name.",
        read_only=True,
    )
    max_episodes: int = setting(
        0,
        "Disk budget per robot: most episodes kept; when exceeded the lowest-surprise "
        "episode (oldest first among equal surprise) of that robot is evicted, never the one "
        "just added. 0 = no limit.",
        low=0,
        high=1_000_000_000,
    )
    max_store_bytes: int = setting(
        0,
        "Disk budget per robot in bytes of JPEG frames plus embeddings (database page "
        "overhead not counted); evicts like max_episodes. 0 = no limit.",
        low=0,
        high=1e15,
    )
    jpeg_quality: int = setting(
        90, "JPEG quality (1-100) of the stored episode frames.", low=1, high=100
    )
    embedding_dtype: str = setting(
        "float16",
        "On-disk type of the frame embeddings (float16 halves the size; queries always run "
        "in float32).",
        choices=("float16", "float32"),
    )
    default_max_results: int = setting(
        10,
        "Episodes returned by a retrieval query that does not say how many it wants.",
        low=1,
        high=100_000,
    )
    max_results_cap: int = setting(
        100,
        "Largest max_results a retrieval query may ask for; larger requests are refused.",
        low=1,
        high=100_000,
    )
    ann_min_frames: int = setting(
        8_000,
        "PostgreSQL only: above this many stored frames a similarity query uses the HNSW "
        "index over frame embeddings (then re-ranks exactly); below it, an exact scan.",
        low=0,
        high=1e12,
    )
    ann_ef_search: int = setting(
        200,
        "PostgreSQL only: HNSW search breadth (hnsw.ef_search); higher = better recall, "
        "slower queries.",
        low=10,
        high=1000,
    )

    def validate(self) -> None:
        """The default number of results must be allowed by the cap; a robot id its rule."""
        if self.robot_id and not _ROBOT_ID_RE.fullmatch(self.robot_id):
            raise ConfigError(
                f"robot_id={self.robot_id!r}: use 1-64 letters, digits, '_', '.', '-' "
                "starting with a letter or digit (empty = the host name)"
            )
        if self.default_max_results > self.max_results_cap:
            raise ConfigError(
                f"default_max_results={self.default_max_results}: must be <= "
                f"max_results_cap={self.max_results_cap}"
            )


@dataclass(frozen=True)
class PoseConfig(ComponentConfig):
    """Where the scorer node finds the robot pose of an event (tf first, then odometry)."""

    component: ClassVar[str] = "pose"

    map_frame: str = setting("map", "Fixed frame of event poses (tf target frame).", read_only=True)
    robot_frame: str = setting(
        "base_link", "Robot body frame whose pose is recorded (tf source frame).", read_only=True
    )
    odom_topic: str = setting(
        "/odom",
        "nav_msgs/Odometry topic used when tf has no transform for the stamp (or tf2_ros is "
        "not installed); empty = no odometry fallback.",
        read_only=True,
    )
    pose_tolerance_seconds: float = setting(
        0.5,
        "Largest gap between an event stamp and the nearest odometry message for the pose "
        "to count as valid.",
        low=0.0,
        high=60.0,
    )
    tf_timeout_seconds: float = setting(
        0.05,
        "How long the tf lookup may wait for the transform at the event stamp.",
        low=0.0,
        high=5.0,
    )


@dataclass(frozen=True)
class CameraConfig(ComponentConfig):
    """How the nodes read the camera."""

    component: ClassVar[str] = "camera"

    image_transport: str = setting(
        "raw",
        "raw: subscribe sensor_msgs/Image; compressed: sensor_msgs/CompressedImage (jpeg/png). "
        "Remap the node's `image` input onto the camera topic (e.g. .../image_raw/compressed).",
        choices=("raw", "compressed"),
        read_only=True,
    )


@dataclass(frozen=True)
class EpisodeConfig(ComponentConfig):
    """Which frames make an episode (paper: 8 frames around the trigger)."""

    component: ClassVar[str] = "episode"

    episode_frames: int = setting(
        8, "Frames stored per episode (paper: 8), evenly spread in time.", low=1, high=256
    )
    episode_before_seconds: float = setting(
        2.0, "Seconds before the trigger that the episode covers.", low=0.0, high=60.0
    )
    episode_after_seconds: float = setting(
        2.0, "Seconds after the trigger that the episode covers.", low=0.0, high=60.0
    )
    episode_timeout_seconds: float = setting(
        5.0,
        "If no frame arrives after the episode window (camera stopped), build the episode "
        "from what is held this long after the window's end.",
        low=0.0,
        high=600.0,
    )
    frame_history_seconds: float = setting(
        10.0,
        "Seconds of camera frames the memory node keeps; must cover episode_before_seconds "
        "plus the gate's delay (nms_seconds) plus episode_after_seconds.",
        low=0.1,
        high=600.0,
        read_only=True,
    )
    frame_history_max: int = setting(
        600,
        "Most frames the memory node keeps (bounds memory at high frame rates).",
        low=1,
        high=100_000,
        read_only=True,
    )

    def validate(self) -> None:
        """The history must hold a whole episode window."""
        window = self.episode_before_seconds + self.episode_after_seconds
        if self.frame_history_seconds < window:
            raise ConfigError(
                f"frame_history_seconds={self.frame_history_seconds}: must be >= "
                f"episode_before_seconds + episode_after_seconds = {window}"
            )


ALL_CONFIGS: tuple[type[ComponentConfig], ...] = (
    ScorerConfig,
    GateConfig,
    EncoderConfig,
    EmbedderConfig,
    StoreConfig,
    PoseConfig,
    CameraConfig,
    EpisodeConfig,
)
"""Every component config; their field names form one flat namespace."""

NODE_CONFIGS: dict[str, tuple[type[ComponentConfig], ...]] = {
    "encoder_node": (CameraConfig, EncoderConfig),
    "scorer_node": (ScorerConfig, GateConfig, PoseConfig),
    "memory_node": (CameraConfig, EpisodeConfig, EmbedderConfig, StoreConfig),
}
"""The component configs whose settings each ROS node declares as parameters."""


def iter_settings() -> Iterator[tuple[type[ComponentConfig], Setting]]:
    """Yield every (config class, setting) pair of the package."""
    for cls in ALL_CONFIGS:
        for spec in settings_of(cls):
            yield cls, spec
