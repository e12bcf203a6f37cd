"""A short QA world, processed once per test session, for the question-answering tests.

A 3-minute :func:`~surprise_memory.offline.synthetic.qa_world.qa_world` (two streets; a
ball, a left turn, a second ball, somebody walking past, the lights going down) through
the offline pipeline with the ``synthetic-trained-tiny`` models at their card's settings,
and its questions as a JSON Lines file. Seed 4005 is none of the benchmark's world seeds
(0-4 reported, 900-902 validation).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # the models are imported by the fixture only: conftest loads this
    from surprise_memory.evaluation.qa.questions import Question
    from surprise_memory.offline.synthetic.qa_world import QaWorld

QA_SEED = 4005
QA_SECONDS = 180


def model_settings() -> dict[str, Any]:
    """The offline pipeline's settings: the shipped small models at their card's settings."""
    from surprise_memory.perception.encoders import (
        SYNTHETIC_EMBEDDER_MODEL,
        SYNTHETIC_MODEL_NAME,
        SYNTHETIC_WEIGHTS,
    )

    card = json.loads((SYNTHETIC_WEIGHTS / "MODEL_CARD.json").read_text(encoding="utf-8"))
    return {
        # the paper's memory, the surprise episodes only (the place keyframes' questions
        # have their own world: test_qa_places.py)
        "place_keyframes": False,
        "encoder_weights": SYNTHETIC_MODEL_NAME,
        "embedder_model": SYNTHETIC_EMBEDDER_MODEL,
        "embedder_weights": SYNTHETIC_MODEL_NAME,
        "encoder_device": "cpu",
        "embedder_device": "cpu",
        "encoder_batch": 8,
        **card["recommended"],
    }


@dataclass(frozen=True)
class QaWorldStore:
    """The short world, its store, its questions and their file."""

    world: QaWorld
    truth: dict[str, Any]
    store: Path
    questions: list[Question]
    questions_file: Path

    @property
    def sequence(self) -> str:
        """The sequence name its questions use."""
        return self.questions[0].sequence


@pytest.fixture(scope="session")
def qa_world_store(tmp_path_factory: pytest.TempPathFactory) -> QaWorldStore:
    """The short QA world processed into a store, with its questions written beside it."""
    from surprise_memory.evaluation.qa.question_files import write_questions
    from surprise_memory.evaluation.qa.world_questions import world_questions
    from surprise_memory.offline.pipeline import OfflinePipeline, PipelineSettings
    from surprise_memory.offline.synthetic.qa_world import qa_world
    from surprise_memory.sources.pose_lookup import SampledPoseLookup

    root = tmp_path_factory.mktemp("qa_world")
    world = qa_world(QA_SEED, QA_SECONDS)
    truth = world.ground_truth()
    poses = SampledPoseLookup(list(world.odometry()), frame_id="odom", child_frame_id="base_link")
    pipeline = OfflinePipeline(PipelineSettings.from_mapping(model_settings()))
    pipeline.run(world.frames(), root / "store", pose_lookup=poses)
    questions = world_questions(truth, QA_SEED)
    path = write_questions(root / "questions.jsonl", questions)
    return QaWorldStore(world, truth, root / "store", questions, path)
