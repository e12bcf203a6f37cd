"""A deterministic synthetic camera recording with scripted events, for demos and tests.

A robot drives along a path while its camera watches a wide scene; scripted events
(:data:`EVENT_KINDS`: an object appears, the light changes, the camera pans, a person
crosses, a recurring panel passes) change what the camera sees. Everything is a pure function of the
:class:`SyntheticScene` (seed included).

* :mod:`.scene`: the scene, its events, odometry, rendering and ground truth (in memory);
* :mod:`.recording`: the writers: a rosbag2 (sqlite3 or mcap) or ROS 1 bag, a video file,
  and the ground-truth JSON beside them;
* :mod:`.captions`: what a frame shows, in words (training captions, held-out paraphrases);
* :mod:`.training`: the project's own small models (``synthetic-trained-tiny``), trained
  on these scenes;
* :mod:`.evaluation`: scripted events found and sentences answered by a pipeline;
* :mod:`.calibration`: the gate's gamma for a video model, from quiet scenes.

The public names of the first two are re-exported here.
"""

from __future__ import annotations

from surprise_memory.offline.synthetic.recording import (
    SyntheticRecording,
    ground_truth_path,
    write_ground_truth,
    write_synthetic_bag,
    write_synthetic_video,
    write_video,
)
from surprise_memory.offline.synthetic.scene import (
    DIMMING_AFTER_S,
    EVENT_KINDS,
    GROUND_TRUTH_FORMAT,
    MODEL_SCENE,
    QUIET_SWAY_PX,
    RECURRING_KIND,
    OdometrySample,
    ScriptedEvent,
    SyntheticScene,
    default_events,
    frame_signature,
    ground_truth,
    model_events,
    model_scene,
    recurring_events,
    render_frame,
    synthetic_frames,
    synthetic_odometry,
)

__all__ = [
    "DIMMING_AFTER_S",
    "EVENT_KINDS",
    "GROUND_TRUTH_FORMAT",
    "MODEL_SCENE",
    "QUIET_SWAY_PX",
    "RECURRING_KIND",
    "OdometrySample",
    "ScriptedEvent",
    "SyntheticRecording",
    "SyntheticScene",
    "default_events",
    "frame_signature",
    "ground_truth",
    "ground_truth_path",
    "model_events",
    "model_scene",
    "recurring_events",
    "render_frame",
    "synthetic_frames",
    "synthetic_odometry",
    "write_ground_truth",
    "write_synthetic_bag",
    "write_synthetic_video",
    "write_video",
]
