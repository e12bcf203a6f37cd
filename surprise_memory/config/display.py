"""Settings of the robot's displays: episode markers (RViz, Foxglove) and the episode preview."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from surprise_memory.config.schema import ComponentConfig, setting

__all__ = ["DisplayConfig"]


@dataclass(frozen=True)
class DisplayConfig(ComponentConfig):
    """What the memory node shows on ``episode_markers`` and ``episode_preview/compressed``."""

    component: ClassVar[str] = "display"

    marker_max_episodes: int = setting(
        500,
        "Newest episodes of this robot shown on episode_markers (one arrow and one label "
        "each; episodes without a valid pose get none); bounds the message a display "
        "receives however large the store is. 0 = no markers.",
        low=0,
        high=100_000,
    )
    marker_size_m: float = setting(
        0.5,
        "Length in metres of an episode's arrow on episode_markers at its threshold; it "
        "grows to twice this (and from yellow to red) as the surprise reaches twice the "
        "threshold. Labels are 0.4 times this high.",
        low=0.01,
        high=100.0,
    )
    episode_preview_fps: float = setting(
        2.0,
        "Frames per second at which the newest episode's stored JPEGs are replayed on "
        "episode_preview/compressed while something subscribes to it; 0 = each episode's "
        "frames are published once, when it is stored.",
        low=0.0,
        high=30.0,
    )
