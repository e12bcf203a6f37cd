"""The habituation evaluation on the recurring-event scene, printed (run with ``-s`` to see it).

The scene: the same panel passes N = 5 times among M = 4 novel events (an object
appearing, a person crossing, a camera pan, a light change), 88 s at 10 Hz. Two embedding
streams: the tiny random V-JEPA-2 preset (the real architecture, untrained) and the
generator's colour-thumbnail signature (model-free). On both, the deviation z - mu at a
peak separates the panel's passes from the novel events (cosine 0.5-0.97 against at most
about 0.45), so the goals are asserted for both: with habituation at most 2 of the 5
passes are stored and no novel event is lost against the paper's gate, which stores every
pass. With random weights this is a property of this seeded scene and preset, not evidence
about trained V-JEPA-2 latents; run the module with trained weights for that.
"""

from __future__ import annotations

import pytest

from surprise_memory.config import EncoderConfig, GateConfig, ScorerConfig
from surprise_memory.evaluation.habituation import (
    HabituationEvaluation,
    encoder_embeddings,
    evaluate_habituation,
    signature_embeddings,
)
from surprise_memory.offline.synthetic import SyntheticScene, recurring_events, synthetic_frames
from surprise_memory.perception.encoders import TINY_VIDEO_WEIGHTS, VideoEncoder

SCENE = SyntheticScene(
    seed=3, duration_s=88.0, fps=10.0, width=64, height=48, events=recurring_events(5, 4)
)
SCORER = ScorerConfig(window=16)
GATE = GateConfig(warmup=8, nms_seconds=1.0)


def _signature() -> HabituationEvaluation:
    emb = signature_embeddings(synthetic_frames(SCENE))
    return evaluate_habituation(
        SCENE, emb, signal="frame signature (model-free)", scorer=SCORER, gate=GATE
    )


def _tiny_vjepa() -> HabituationEvaluation:
    cfg = EncoderConfig(
        encoder_weights=TINY_VIDEO_WEIGHTS, encoder_device="cpu", clip_frames=8, encoder_batch=16
    )
    emb = encoder_embeddings(synthetic_frames(SCENE), VideoEncoder.from_config(cfg), cfg)
    return evaluate_habituation(
        SCENE, emb, signal="V-JEPA-2 random:tiny (UNTRAINED)", scorer=SCORER, gate=GATE
    )


@pytest.mark.parametrize("run", [_signature, _tiny_vjepa], ids=["signature", "tiny-vjepa"])
def test_habituation_meets_its_goals(run: object) -> None:
    assert callable(run)
    result: HabituationEvaluation = run()
    print("\n" + result.format())
    paper, hab = result.paper, result.habituation
    assert (paper.repeats, paper.novel) == (5, 4)
    assert paper.repeats_stored >= 4  # the problem: the paper's gate stores the repeats
    assert hab.repeats_stored <= 2  # goal: at most 2 of N
    assert hab.novel_found == paper.novel_found  # goal: no loss against the paper's gate
    assert hab.found_novel == paper.found_novel
    assert hab.events + hab.suppressed == paper.events
    assert hab.per_minute < paper.per_minute
