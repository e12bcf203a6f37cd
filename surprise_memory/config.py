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

Long module: every setting of the package is declared here on purpose (one place per fact);
the declarations are data, not several jobs.
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
    "BaselineConfig",
    "BudgetConfig",
    "CameraConfig",
    "ComponentConfig",
    "ConfigError",
    "EmbedderConfig",
    "EncoderConfig",
    "EpisodeConfig",
    "GateConfig",
    "HabituationConfig",
    "NodeConfig",
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
        read_only=True,
    )
    nms_seconds: float = setting(
        1.0,
        "Non-maximum suppression radius in seconds: a peak is kept only if no score within "
        "this time before or after it is higher. It is also the gate's decision delay.",
        low=0.0,
        high=3600.0,
        read_only=True,
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
        read_only=True,
    )
    input_fps: float = setting(
        0.0,
        "Sample the camera down to this rate in Hz before windowing (0 = keep every frame).",
        low=0.0,
        high=1000.0,
        read_only=True,
    )
    clip_warmup: str = setting(
        "wait",
        "Before M frames exist: 'wait' encodes nothing until the window is full; 'pad' also "
        "encodes windows padded by repeating the first frame (published on `embedding` with "
        "their padded_frames count, never scored: the paper's s(t) assumes real windows).",
        choices=("pad", "wait"),
        read_only=True,
    )
    encoder_batch: int = setting(
        8,
        "Most windows in one forward pass: offline, windows per batch; live, the most "
        "pending windows encoded together when the encoder falls behind the camera "
        "(catch-up batching).",
        low=1,
        high=1024,
        read_only=True,
    )
    encoder_queue: int = setting(
        16,
        "Live: most windows waiting for the encoder; when full, the oldest is dropped and "
        "counted (windows_dropped). The frame ring holds clip_frames + (encoder_queue + "
        "encoder_batch) * clip_stride frames, plus clip_frames - 1 mirrored slots (151 at "
        "the defaults: 30 MB at 256 px).",
        low=1,
        high=4096,
        read_only=True,
    )
    encoder_batch_interval_s: float = setting(
        0.0,
        "Live: shortest time in seconds between two forward passes; windows arriving "
        "meanwhile are encoded together (more windows per forward, more latency). 0 = "
        "encode as soon as a window waits.",
        low=0.0,
        high=60.0,
    )
    encoder_compile: bool = setting(
        False,
        "Wrap the encoder in torch.compile (slow first call, faster afterwards on GPUs).",
        read_only=True,
    )
    encoder_compile_mode: str = setting(
        "default",
        "torch.compile mode when encoder_compile is true; reduce-overhead and max-autotune "
        "also capture CUDA graphs (batches are then padded to power-of-two sizes).",
        choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
        read_only=True,
    )
    encoder_cuda_graphs: bool = setting(
        False,
        "Capture the eager forward as CUDA graphs, one per batch size (1, 2, 4, ... up to "
        "encoder_batch; batches are padded up to the next): CUDA only, not with "
        "encoder_compile.",
        read_only=True,
    )
    encoder_sdpa_backend: str = setting(
        "auto",
        "Attention kernel of the encoder: auto (PyTorch picks), flash, efficient "
        "(memory-efficient), cudnn, math. efficient and cudnn need CUDA; on CUDA, flash "
        "needs bf16/fp16. A kernel that does not run here stops the node at start.",
        choices=("auto", "flash", "efficient", "cudnn", "math"),
        read_only=True,
    )
    encoder_fp8: bool = setting(
        False,
        "FP8 matmuls in the encoder's linear layers (torchao dynamic float8 activations "
        "and weights): CUDA cards with FP8 (compute capability >= 8.9) and torchao installed.",
        read_only=True,
    )
    encoder_pinned_upload: bool = setting(
        True,
        "Copy live windows' frames to the GPU from pinned host memory (asynchronous "
        "upload); ignored on the CPU.",
        read_only=True,
    )
    encoder_warmup: bool = setting(
        True,
        "Live: at start, encode dummy windows at every batch size the node may use, so "
        "that compilation, CUDA-graph capture and kernel set-up do not fall on the first "
        "frames.",
        read_only=True,
    )

    def validate(self) -> None:
        """The window must hold whole tubelets; CUDA graphs are captured by one path only."""
        if self.clip_frames % 2:
            raise ConfigError(
                f"clip_frames={self.clip_frames}: must be even (V-JEPA-2 tubelets are 2 frames)"
            )
        if self.encoder_cuda_graphs and self.encoder_compile:
            raise ConfigError(
                "encoder_cuda_graphs=true with encoder_compile=true: choose one (for compiled "
                "CUDA graphs use encoder_compile_mode: reduce-overhead)"
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
        read_only=True,
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
        "index over one pooled vector per episode (then re-ranks its candidates exactly "
        "by max-over-frames); below it, an exact scan of every frame.",
        low=0,
        high=1e12,
    )
    ann_candidates: int = setting(
        200,
        "PostgreSQL only: episodes the HNSW index names (nearest by their pooled vector) "
        "whose frames are then scored exactly by max-over-frames; higher = better recall, "
        "slower queries (at least max_results are asked for).",
        low=10,
        high=1000,
    )
    ann_ef_search: int = setting(
        200,
        "PostgreSQL only: HNSW search breadth (hnsw.ef_search, raised to ann_candidates "
        "when lower); higher = better recall, slower queries.",
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
    frame_history_bytes: int = setting(
        256 * 1024 * 1024,
        "Most bytes of frames the memory node keeps (downscaled pixels, or the bytes of "
        "compressed images); the oldest frames leave first.",
        low=1024 * 1024,
        high=1e12,
        read_only=True,
    )
    frame_history_max_side: int = setting(
        640,
        "Raw camera frames are downscaled on arrival to this longest side in pixels before "
        "they are held and stored with episodes (0 = full resolution; compressed images are "
        "held as they came).",
        low=0,
        high=16384,
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


@dataclass(frozen=True)
class HabituationConfig(ComponentConfig):
    """Habituation: gate candidates that resemble recently kept ones are suppressed (off: paper)."""

    component: ClassVar[str] = "habituation"

    habituation: bool = setting(
        False,
        "Suppress gate candidates whose latent change z - mu resembles that of recently kept "
        "events (beyond the paper; off = the paper's gate exactly).",
    )
    habituation_similarity: float = setting(
        0.5,
        "theta: a candidate is suppressed when max over remembered events of cos(d, d_k) * "
        "exp(-dt/T) * exp(-dist/R) reaches it (d = z - mu at the peak; 1 = only identical "
        "changes).",
        low=0.0,
        high=1.0,
    )
    habituation_recovery_seconds: float = setting(
        600.0,
        "T: time constant in seconds over which habituation to a remembered event fades.",
        low=1.0,
        high=1e7,
    )
    habituation_radius_m: float = setting(
        0.0,
        "R: distance in metres over which habituation fades with the robot's displacement "
        "between the two events (0 = place ignored; also ignored when either pose is unknown).",
        low=0.0,
        high=1e6,
    )
    habituation_memory: int = setting(
        32,
        "Most recent kept events remembered for habituation (cost per candidate: this many "
        "dot products of size D).",
        low=1,
        high=100_000,
        read_only=True,
    )


@dataclass(frozen=True)
class BudgetConfig(ComponentConfig):
    """Episode-rate budget: at most so many events per sliding window, the most surprising kept."""

    component: ClassVar[str] = "budget"

    max_episodes_per_minute: float = setting(
        0.0,
        "Rate cap: at most max_episodes_per_minute * budget_window_seconds / 60 events in any "
        "budget window; over it, the least surprising candidates are dropped. 0 = no cap.",
        low=0.0,
        high=6000.0,
    )
    budget_window_seconds: float = setting(
        60.0,
        "Length in seconds of the sliding window the rate cap counts events in.",
        low=1.0,
        high=86_400.0,
    )
    budget_delay_seconds: float = setting(
        5.0,
        "How long after its peak a candidate waits, when the cap is on, so that a more "
        "surprising later one can take its place; adds to the gate's delay (the memory "
        "node's frame_history_seconds must cover it).",
        low=0.0,
        high=600.0,
    )

    def validate(self) -> None:
        """A window must allow at least one event."""
        rate = self.max_episodes_per_minute
        if rate > 0 and rate * self.budget_window_seconds / 60.0 < 1.0:
            raise ConfigError(
                f"max_episodes_per_minute={rate} with budget_window_seconds="
                f"{self.budget_window_seconds}: the window must allow at least one event "
                "(raise either)"
            )


@dataclass(frozen=True)
class BaselineConfig(ComponentConfig):
    """Which gate decides events offline: the paper's surprise gate or an equal-budget baseline."""

    component: ClassVar[str] = "baseline"

    gate_mode: str = setting(
        "surprise",
        "surprise: the paper's gate; uniform: one event per interval of 60 / "
        "baseline_episodes_per_minute seconds, at its middle; random: one at a seeded random "
        "time in each such interval (the paper's baselines at equal budget).",
        choices=("surprise", "uniform", "random"),
        read_only=True,
    )
    baseline_episodes_per_minute: float = setting(
        0.0,
        "Event rate of the uniform and random gates (set by --budget-from STORE to that "
        "run's episodes per minute).",
        low=0.0,
        high=6000.0,
        read_only=True,
    )
    baseline_seed: int = setting(
        0, "Seed of the random gate's event times.", low=0, high=2**31 - 1, read_only=True
    )

    def validate(self) -> None:
        """The baselines need a rate."""
        if self.gate_mode != "surprise" and self.baseline_episodes_per_minute <= 0:
            raise ConfigError(
                f"gate_mode={self.gate_mode!r} needs baseline_episodes_per_minute > 0 "
                "(or --budget-from STORE to copy a surprise run's rate)"
            )


@dataclass(frozen=True)
class NodeConfig(ComponentConfig):
    """Settings every live node has: its diagnostics (``/diagnostics``)."""

    component: ClassVar[str] = "node"

    autostart: bool = setting(
        True,
        "Configure and activate the managed (lifecycle) node at start; false leaves the "
        "transitions to a lifecycle manager (<node>/change_state).",
        read_only=True,
    )
    diagnostics_period_seconds: float = setting(
        5.0,
        "Seconds between two /diagnostics messages of the node (wall time); the WARN/ERROR "
        "levels judge what happened in the last period.",
        low=0.1,
        high=3600.0,
        read_only=True,
    )
    input_silent_seconds: float = setting(
        10.0,
        "Diagnostics WARN when a streaming input (camera, embeddings) delivered nothing for "
        "this many seconds (wall time): its publisher is gone or stalled.",
        low=0.1,
        high=86400.0,
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
    HabituationConfig,
    BudgetConfig,
    BaselineConfig,
    NodeConfig,
)
"""Every component config; their field names form one flat namespace."""

SPLIT_NODE_CONFIGS: dict[str, tuple[type[ComponentConfig], ...]] = {
    "encoder_node": (NodeConfig, CameraConfig, EncoderConfig),
    "scorer_node": (
        NodeConfig,
        ScorerConfig,
        GateConfig,
        HabituationConfig,
        BudgetConfig,
        PoseConfig,
    ),
    "memory_node": (NodeConfig, CameraConfig, EpisodeConfig, EmbedderConfig, StoreConfig),
}
"""The configs of the three nodes of the split pipeline."""

NODE_CONFIGS: dict[str, tuple[type[ComponentConfig], ...]] = {
    **SPLIT_NODE_CONFIGS,
    # the one-process pipeline: the union, each config once
    "pipeline_node": tuple(dict.fromkeys(c for cs in SPLIT_NODE_CONFIGS.values() for c in cs)),
}
"""The component configs whose settings each ROS node declares as parameters."""


def iter_settings() -> Iterator[tuple[type[ComponentConfig], Setting]]:
    """Yield every (config class, setting) pair of the package."""
    for cls in ALL_CONFIGS:
        for spec in settings_of(cls):
            yield cls, spec
