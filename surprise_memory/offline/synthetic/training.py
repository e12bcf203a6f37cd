"""Training the project's own small models on synthetic scenes (``synthetic-trained-tiny``).

No machine of ours reaches the hub that serves V-JEPA-2 and PE-Core weights, so the demo,
the browser's text search and the retrieval tests would otherwise run on random weights.
This module trains the *same architectures* at tiny sizes on the synthetic world of
:mod:`.scene`, whose ground truth is known, with a fixed seed, in minutes on a 2-core CPU:

* **video** (transformers ``VJEPA2Model``, the ``tiny`` preset): self-supervised, in the
  spirit of V-JEPA: the encoder sees the first half of an 8-frame clip (the context), the
  model's own predictor predicts the latents of the second half (the future) as an
  exponential-moving-average copy of the encoder computes them from the whole clip; L1
  loss on layer-normed targets. A small variance term on the context tokens (VICReg's
  hinge on each dimension's standard deviation over the batch) keeps so short a run from
  collapsing to a constant, which V-JEPA avoids with far longer schedules. Event labels are
  never a target: clips are drawn at random times of scenes with random event times.
* **embedder** (open_clip, :data:`~surprise_memory.perception.encoders.SYNTHETIC_EMBEDDER_MODEL`):
  contrastive (CLIP's symmetric cross-entropy, with every caption of a fact the image
  shows counted as a positive) on (frame, caption) pairs, captions from
  :mod:`.captions` (ground-truth facts, several phrasings each; held-out paraphrases
  never used). A pan or a dimming is captioned only where its cue (blur, flicker) shows,
  and each such frame also comes cue-free, captioned without it, so the image tower learns
  the cue and not the view it happened on; every image is shifted by a few pixels at each
  step. Half the captions get one random vocabulary token inserted, so the text
  tower learns to pass over words it never saw (a paraphrase's other words); a long
  warm-up to a moderate rate and a warmer initial temperature left the chance-loss
  plateau within 300 steps on each seed tried (a 20-step warm-up to 1e-3 at CLIP's 0.07
  had kept seed 0 there for over 1200 steps).

Training scenes use seeds ``TRAIN_SEED_BASE + i``; every seed below ``TRAIN_SEED_BASE`` or
at and above ``HELD_OUT_SEED_BASE`` is never trained on (the demo's seed 0, the tests' and
the benchmark's seeds). :func:`train` writes the weights folder (``video/``,
``embedder/``, ``MODEL_CARD.json`` with the settings and SHA-256 of each file), which the
encoders load as any local checkpoint. ``tools/train_synthetic_models.py`` is its command
line.

Long module: both trainers, the embedder's data and the card that ties them together stay
in one place, so a training run reads top to bottom.

**The gate's gamma** (the ``gamma`` part of :func:`train`): the card recommends the
smallest gamma at which the video model's gate stores no more than the paper's 1.28
episodes per minute on quiet validation scenes (:mod:`.calibration`); at the paper's
gamma = 1 this small model stored 6.7 per minute there.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from surprise_memory.offline.synthetic.calibration import calibrate_video_model
from surprise_memory.offline.synthetic.captions import (
    FACTS,
    fact_key,
    frame_facts,
    phrase,
)
from surprise_memory.offline.synthetic.scene import (
    EVENT_KINDS,
    MODEL_SCENE,
    ScriptedEvent,
    SyntheticScene,
    render_frame,
)

__all__ = [
    "CUE_FACTS",
    "HELD_OUT_SEED_BASE",
    "MODEL_CARD",
    "TRAINING_PERSON_FROM",
    "TRAIN_SEED_BASE",
    "ShiftedImages",
    "TrainingSettings",
    "cue_rms",
    "random_event_scene",
    "train",
    "train_embedder",
    "train_video",
]

TRAIN_SEED_BASE = 100
"""Training scenes use seeds ``TRAIN_SEED_BASE .. TRAIN_SEED_BASE + n - 1`` (n: ``scenes`` or
``embedder_scenes``)."""

HELD_OUT_SEED_BASE = 1000
"""Seeds from here on are never trained on (tests and benchmarks use them; so does 0)."""

MODEL_CARD = "MODEL_CARD.json"
"""File name of the weights folder's card: name, what it is, settings, checksums."""

_CLIP = 8  # frames per training clip (and the card's recommended clip_frames)

TRAINING_PERSON_FROM = 0.25
"""``person_from`` of the training scenes: a crossing person steps out a quarter of the
frame from its left edge, near the edge of V-JEPA-2's centre crop. The scenes the models
are measured on (:data:`~.scene.MODEL_SCENE`) step out at 0.45, near the crop's middle, a
place training never showed: there the video model decides the person in 18 of 20
validation scenes, at 0.25 in 15 (issue 28, benchmarks/RESULTS.md, sixth pass). Kept
here so the shipped weights stay what this script makes."""


@dataclass(frozen=True)
class TrainingSettings:
    """Everything that determines the trained weights (recorded in the model card).

    Attributes:
        seed: Seed of the initialisation, the scenes' event times and the batches.
        scenes: Training scenes of the video model (seeds ``TRAIN_SEED_BASE + i``).
        seconds: Length of each training scene.
        video_steps: Optimiser steps of the video model.
        video_batch: Clips per step.
        video_lr: AdamW learning rate of the video model.
        embedder_scenes: Training scenes of the embedder (the same seeds, more of them:
            more worlds for the image tower to generalise from; the video model keeps
            ``scenes``, so its weights do not change with this).
        embedder_steps: Optimiser steps of the embedder.
        embedder_batch: (frame, caption) pairs per step.
        embedder_lr: AdamW peak learning rate of the embedder.
        embedder_warmup: Steps of the embedder's linear warm-up to ``embedder_lr`` (then a
            cosine decay): a short warm-up at a high rate left some seeds at the chance
            loss (ln of the batch) for over a thousand steps.
        embedder_temperature: Initial softmax temperature of the contrastive loss (learnt
            afterwards; CLIP's is 0.07).
        embedder_unknown_words: Probability that a training caption gets one random
            vocabulary token inserted (robustness to words training never saw).
        embedder_cue_min_rms: A frame's pan or dimming is in its captions only where the
            cue shows: where the frame differs from its cue-free twin
            (``render_frame(cues=False)``: no motion blur, no flicker) by at least this RMS,
            in grey levels (the sensor noise is 2). The end of a pan over a smooth view and
            the edges of a flicker show nothing; captioned, they taught the image tower
            that a smooth view is a pan.
        embedder_counterfactuals: Also train each frame whose cue shows as its cue-free
            twin, captioned without the cue, so the view a pan or a dimming happened on is
            no evidence of either (the demo's pan frames had ranked first for "when the
            lights went down").
        embedder_shift_px: Shift every training image by up to this many pixels (reflect
            padding), a fresh offset at each step, so the image tower does not key on
            where an edge falls (with the twins alone, two nearly equal pan frames of the
            demo scored 0.83 and -0.08 for "when the lights went down").
        threads: torch CPU threads (1: on a loaded machine two threads wait on each other
            and run ten times slower).

    """

    seed: int = 0
    scenes: int = 12
    seconds: float = 60.0
    video_steps: int = 300
    video_batch: int = 24
    video_lr: float = 1e-3
    embedder_scenes: int = 72
    embedder_steps: int = 3000
    embedder_batch: int = 32
    embedder_lr: float = 5e-4
    embedder_warmup: int = 200
    embedder_temperature: float = 0.1
    embedder_unknown_words: float = 0.5
    embedder_cue_min_rms: float = 6.0
    embedder_counterfactuals: bool = True
    embedder_shift_px: int = 4
    threads: int = 1


def random_event_scene(seed: int, seconds: float = 60.0) -> SyntheticScene:
    """A scene with each event kind once (the panel too), at random times.

    The scene options are those of the scenes the models are measured on
    (:data:`~.scene.MODEL_SCENE`) but for :data:`TRAINING_PERSON_FROM`. Events start in
    shuffled order, ``seconds / 6`` apart on average with a random jitter, so training
    sees events at any phase of its clips and never learns "an event every 12 s".
    """
    rng = np.random.default_rng([seed, 7])
    kinds = list(EVENT_KINDS)
    rng.shuffle(kinds)
    spans = {
        "object_appears": 0.0,
        "light_change": float(rng.uniform(0.3, 1.0)),
        "camera_pan": float(rng.uniform(1.5, 3.0)),
        "person_crosses": float(rng.uniform(2.5, 4.0)),
        "panel_passes": float(rng.uniform(1.5, 2.5)),
    }
    slot = seconds / (len(kinds) + 1)
    events = []
    for i, kind in enumerate(kinds):
        start = slot * (i + 0.5) + float(rng.uniform(0.0, 0.5 * slot))
        end = min(seconds, start + spans[kind])
        events.append(ScriptedEvent(kind, round(start, 2), round(end, 2)))
    options = {**MODEL_SCENE, "person_from": TRAINING_PERSON_FROM}
    return SyntheticScene(seed=seed, duration_s=seconds, events=tuple(events), **options)


def _log_to(log: Callable[[str], None] | None) -> Callable[[str], None]:
    return log or (lambda _msg: None)


# --- video --------------------------------------------------------------------------------


def _scene_clips(scene: SyntheticScene, crop: int) -> npt.NDArray[np.uint8]:
    """All frames of a scene, prepared for the encoder: (N, crop, crop, 3) uint8."""
    from surprise_memory.perception.encoders.video import resize_shortest_edge_and_crop

    frames = np.stack([render_frame(scene, i).rgb for i in range(scene.frame_count)])
    video = torch.from_numpy(frames).permute(0, 3, 1, 2)
    return resize_shortest_edge_and_crop(video, crop).permute(0, 2, 3, 1).contiguous().numpy()


def _normalise_clips(clips: npt.NDArray[np.uint8]) -> torch.Tensor:
    """(B, T, H, W, 3) uint8 -> (B, T, 3, H, W) float32, ImageNet mean/std (the encoder's)."""
    from surprise_memory.perception.encoders.video import IMAGENET_MEAN, IMAGENET_STD

    x = torch.from_numpy(clips).permute(0, 1, 4, 2, 3).float().div_(255.0)
    mean = torch.tensor(IMAGENET_MEAN).view(1, 1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 1, 3, 1, 1)
    return (x - mean) / std


def train_video(
    settings: TrainingSettings, log: Callable[[str], None] | None = None
) -> tuple[Any, list[float]]:
    """Train the tiny ``VJEPA2Model`` (see the module docstring); returns (model, losses)."""
    from transformers import VJEPA2Config, VJEPA2Model

    from surprise_memory.perception.encoders.presets import vjepa2_preset

    say = _log_to(log)
    torch.manual_seed(settings.seed)
    config = VJEPA2Config(**vjepa2_preset("tiny"))
    config._attn_implementation = "sdpa"
    model = VJEPA2Model(config)
    target = copy.deepcopy(model.encoder).eval()
    for p in target.parameters():
        p.requires_grad_(False)
    sizes: Any = (config.crop_size, config.patch_size, config.tubelet_size)
    crop, patch, tubelet = (int(v) for v in sizes)
    per_step = (crop // patch) ** 2
    n_ctx = (_CLIP // 2 // tubelet) * per_step
    n_all = (_CLIP // tubelet) * per_step
    scenes = [
        _scene_clips(random_event_scene(TRAIN_SEED_BASE + i, settings.seconds), crop)
        for i in range(settings.scenes)
    ]
    say(f"video: {len(scenes)} scenes rendered, {n_ctx} context and {n_all - n_ctx} target tokens")
    rng = np.random.default_rng([settings.seed, 11])
    opt = torch.optim.AdamW(
        [p for n, p in model.named_parameters() if "pooler" not in n],
        lr=settings.video_lr,
        weight_decay=0.04,
    )
    losses: list[float] = []
    model.train()
    for step in range(settings.video_steps):
        lr = (
            settings.video_lr
            * min(1.0, (step + 1) / 20)
            * 0.5
            * (1 + math.cos(math.pi * step / max(1, settings.video_steps)))
        )
        for group in opt.param_groups:
            group["lr"] = lr
        batch = []
        for _ in range(settings.video_batch):
            frames = scenes[int(rng.integers(len(scenes)))]
            start = int(rng.integers(0, len(frames) - _CLIP))
            batch.append(frames[start : start + _CLIP])
        x = _normalise_clips(np.stack(batch))
        with torch.no_grad():
            tgt = target(pixel_values_videos=x).last_hidden_state[:, n_ctx:]
            tgt = torch.nn.functional.layer_norm(tgt, tgt.shape[-1:])
        ctx = model.encoder(pixel_values_videos=x[:, : _CLIP // 2]).last_hidden_state
        b = x.shape[0]
        ctx_mask = [torch.arange(n_ctx).unsqueeze(0).repeat(b, 1)]
        tgt_mask = [torch.arange(n_ctx, n_all).unsqueeze(0).repeat(b, 1)]
        pred = model.predictor(ctx, ctx_mask, tgt_mask).last_hidden_state
        loss_pred = (pred - tgt).abs().mean()
        pooled = ctx.mean(dim=1)
        std = torch.sqrt(pooled.var(dim=0) + 1e-4)
        loss_var = torch.relu(1.0 - std).mean()
        loss = loss_pred + loss_var
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        momentum = 0.99 + 0.009 * step / max(1, settings.video_steps)
        with torch.no_grad():
            for p_t, p_s in zip(target.parameters(), model.encoder.parameters(), strict=True):
                p_t.mul_(momentum).add_(p_s.detach(), alpha=1 - momentum)
        losses.append(loss_pred.item())
        if step % 50 == 0 or step == settings.video_steps - 1:
            say(f"video step {step}: prediction loss {loss_pred:.4f}, variance {loss_var:.4f}")
    # the encoder the pipeline runs is the EMA one (V-JEPA evaluates its target encoder)
    model.encoder.load_state_dict(target.state_dict())
    model.train(False)
    return model, losses


# --- embedder -----------------------------------------------------------------------------


CUE_FACTS = ("pan", "dimming")
"""Facts that a frame shows only by a cue drawn over its view (the pan's motion blur, the
lamps' flicker), not by an object in it."""


def cue_rms(frame: npt.NDArray[np.uint8], twin: npt.NDArray[np.uint8]) -> float:
    """RMS difference, in grey levels, of a frame and its cue-free twin: how much the cue shows."""
    diff = frame.astype(np.float32) - twin.astype(np.float32)
    return float(np.sqrt(np.mean(diff * diff)))


def _embedder_data(
    settings: TrainingSettings, size: tuple[int, int]
) -> tuple[torch.Tensor, list[list[str]]]:
    """Frames (preprocessed, float32) and their facts, from the training scenes.

    A pan or dimming is captioned only where its cue shows (``embedder_cue_min_rms``), and
    each such frame also comes as its cue-free twin, captioned without it
    (``embedder_counterfactuals``).
    """
    from torchvision.transforms.v2 import functional as tvf

    from surprise_memory.perception.encoders.image_text import PE_MEAN, PE_STD

    rng = np.random.default_rng([settings.seed, 13])
    images, facts = [], []

    def add(rgb: npt.NDArray[np.uint8], f: list[str], dimming: bool) -> None:
        if not dimming:  # any light level: objects are facts, brightness is not
            gain = rng.uniform(0.45, 1.1)
            rgb = np.clip(rgb.astype(np.float32) * gain, 0, 255).astype(np.uint8)
        x = torch.from_numpy(rgb).permute(2, 0, 1)
        images.append(
            tvf.resize(x, list(size), interpolation=tvf.InterpolationMode.BILINEAR, antialias=True)
        )
        facts.append(f)

    for i in range(settings.embedder_scenes):
        scene = random_event_scene(TRAIN_SEED_BASE + i, settings.seconds)
        for index in range(scene.frame_count):
            f = frame_facts(scene, index)
            if f == ["street"] and rng.uniform() > 0.15:
                continue  # most frames show nothing: keep a sample of them
            rgb = render_frame(scene, index).rgb
            if any(k in CUE_FACTS for k in f):
                twin = render_frame(scene, index, cues=False).rgb
                rest = [k for k in f if k not in CUE_FACTS] or ["street"]
                if cue_rms(rgb, twin) < settings.embedder_cue_min_rms:
                    f = rest  # the cue does not show: caption what does
                elif settings.embedder_counterfactuals:
                    add(twin, rest, "dimming" in f)  # a dimming's twin keeps its light level
            add(rgb, f, "dimming" in f)
    x = torch.stack(images).float().div_(255.0)
    return (x - PE_MEAN[0]) / PE_STD[0], facts


class ShiftedImages:
    """``images[idx]``: those frames, each shifted by up to ``px`` pixels (reflect padding).

    A fresh offset per frame at every access, from its own seeded generator (so a training
    run stays reproducible); ``px = 0`` returns the frames as they are.
    """

    def __init__(self, images: torch.Tensor, px: int, seed: int) -> None:
        self.images = images
        self.px = px
        self.generator = torch.Generator().manual_seed(seed)

    def __getitem__(self, idx: list[int]) -> torch.Tensor:
        batch = self.images[idx]
        if self.px == 0:
            return batch
        padded = torch.nn.functional.pad(batch, (self.px,) * 4, mode="reflect")
        h, w = batch.shape[-2:]
        out = torch.empty_like(batch)
        for i in range(batch.shape[0]):
            dy, dx = torch.randint(0, 2 * self.px + 1, (2,), generator=self.generator).tolist()
            out[i] = padded[i, :, dy : dy + h, dx : dx + w]
        return out


def _unknown_words(
    tokens: torch.Tensor, rng: np.random.Generator, p: float, eot: int
) -> torch.Tensor:
    """Insert, with probability ``p`` per caption, one random vocabulary token.

    The captions use a few dozen words of a 49k-token vocabulary; a query's other words keep
    their random initial embeddings. Training with random tokens among the known ones
    teaches the text tower to read the words it knows and pass over those it does not (the
    held-out paraphrases have such words: "when", "went", "became").
    """
    out = tokens.clone()
    for row in range(out.shape[0]):
        end = int(torch.argmax((out[row] == eot).int()))
        if rng.uniform() >= p or end + 1 >= out.shape[1]:
            continue
        at = int(rng.integers(1, end + 1))
        word = int(rng.integers(1, eot - 1))  # below start- and end-of-text (eot - 1, eot)
        out[row, at + 1 :] = tokens[row, at:-1].clone()
        out[row, at] = word
    return out


def train_embedder(
    settings: TrainingSettings, log: Callable[[str], None] | None = None
) -> tuple[Any, list[float], tuple[float, float]]:
    """Train the small PE-Core contrastively (see the module docstring).

    Returns:
        The model, the loss of each step, and the loss of one fixed batch (drawn with its
        own seed) before and after training.

    """
    import open_clip

    from surprise_memory.perception.encoders.presets import (
        SYNTHETIC_EMBEDDER_MODEL,
        register_open_clip_configs,
    )

    say = _log_to(log)
    register_open_clip_configs()
    torch.manual_seed(settings.seed)
    model = open_clip.create_model(SYNTHETIC_EMBEDDER_MODEL, pretrained=None)
    with torch.no_grad():
        model.logit_scale.fill_(math.log(1.0 / settings.embedder_temperature))
    tokenizer = open_clip.get_tokenizer(SYNTHETIC_EMBEDDER_MODEL)
    size = model.visual.image_size
    frames, facts = _embedder_data(settings, (int(size[0]), int(size[1])))
    # a stream of its own (torch takes one int seed, not numpy's [seed, k] sequences)
    shifted = ShiftedImages(frames, settings.embedder_shift_px, settings.seed + 99)
    by_key: dict[str, list[int]] = {k: [] for k in FACTS}
    for i, f in enumerate(facts):
        for fact in f:
            by_key[fact_key(fact)].append(i)
    keys = [k for k in FACTS if by_key[k]]
    say(
        f"embedder: {len(facts)} frames; per fact "
        + ", ".join(f"{k} {len(by_key[k])}" for k in keys)
    )
    rng = np.random.default_rng([settings.seed, 17])
    opt = torch.optim.AdamW(model.parameters(), lr=settings.embedder_lr, weight_decay=0.05)

    def draw(generator: np.random.Generator) -> tuple[list[int], list[str], list[str]]:
        idx, texts, caption_keys = [], [], []
        for _ in range(settings.embedder_batch):
            key = keys[int(generator.integers(len(keys)))]
            i = by_key[key][int(generator.integers(len(by_key[key])))]
            fact = next(f for f in facts[i] if fact_key(f) == key)
            idx.append(i)
            texts.append(phrase(fact, generator))
            caption_keys.append(key)
        return idx, texts, caption_keys

    def batch_loss(
        idx: list[int],
        texts: list[str],
        caption_keys: list[str],
        noise: np.random.Generator | None = None,
    ) -> torch.Tensor:
        # training steps (noise given) see shifted frames; the fixed batch stays fixed
        img = model.encode_image(frames[idx] if noise is None else shifted[idx], normalize=True)
        tokens = tokenizer(texts)
        if noise is not None:
            tokens = _unknown_words(
                tokens, noise, settings.embedder_unknown_words, tokenizer.eot_token_id
            )
        txt = model.encode_text(tokens, normalize=True)
        logits = model.logit_scale.exp().clamp(max=100.0) * img @ txt.T
        positive = torch.tensor(
            [[k in {fact_key(f) for f in facts[i]} for k in caption_keys] for i in idx],
            dtype=torch.float32,
        )
        target_i = positive / positive.sum(dim=1, keepdim=True)
        target_t = positive.T / positive.T.sum(dim=1, keepdim=True)
        return 0.5 * (
            torch.sum(-target_i * logits.log_softmax(dim=1), dim=1).mean()
            + torch.sum(-target_t * logits.T.log_softmax(dim=1), dim=1).mean()
        )

    probe = draw(np.random.default_rng([settings.seed, 19]))  # a fixed batch, for the record
    with torch.no_grad():
        before = float(batch_loss(*probe))
    losses: list[float] = []
    model.train()
    for step in range(settings.embedder_steps):
        lr = (
            settings.embedder_lr
            * min(1.0, (step + 1) / max(1, settings.embedder_warmup))
            * 0.5
            * (1 + math.cos(math.pi * step / max(1, settings.embedder_steps)))
        )
        for group in opt.param_groups:
            group["lr"] = lr
        loss = batch_loss(*draw(rng), noise=rng)
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0 or step == settings.embedder_steps - 1:
            say(f"embedder step {step}: contrastive loss {loss:.4f}")
    with torch.no_grad():
        after = float(batch_loss(*probe))
    say(f"embedder: loss on a fixed batch {before:.4f} before, {after:.4f} after")
    model.train(False)
    return model, losses, (before, after)


# --- the whole run ------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def train(
    out: str | Path,
    settings: TrainingSettings | None = None,
    log: Callable[[str], None] | None = None,
    parts: tuple[str, ...] = ("video", "embedder", "gamma"),
) -> dict[str, Any]:
    """Train both models, calibrate the gate, write the weights folder ``out``; return its card.

    ``parts`` retrains only some of them (each part is seeded on its own, so the result
    equals that part of a full run); the others' files and card entries are kept. The
    ``gamma`` part (:func:`~.calibration.calibrate_video_model`) chooses the gate's gamma
    for the video model.

    ``out/video`` is a ``save_pretrained`` folder (config.json, model.safetensors) and
    ``out/embedder/open_clip_model.safetensors`` an open_clip checkpoint (float16, so the
    two fit in a few MB); ``out/MODEL_CARD.json`` records the name, what the models are
    and are not, the settings, the final losses, the library versions and each file's
    SHA-256.
    """
    from safetensors.torch import save_file

    from surprise_memory.perception.encoders.presets import (
        SYNTHETIC_EMBEDDER_MODEL,
        SYNTHETIC_MODEL_NAME,
        SYNTHETIC_TRUNK,
    )

    settings = settings or TrainingSettings()
    say = _log_to(log)
    torch.set_num_threads(settings.threads)
    out = Path(out)
    (out / "video").mkdir(parents=True, exist_ok=True)
    (out / "embedder").mkdir(parents=True, exist_ok=True)
    old_card = out / MODEL_CARD
    old: dict[str, Any] = (
        json.loads(old_card.read_text(encoding="utf-8")) if old_card.is_file() else {}
    )
    t0 = time.perf_counter()
    video_entry, embedder_entry = old.get("video", {}), old.get("embedder", {})
    if "video" in parts:
        video, video_losses = train_video(settings, say)
        video.save_pretrained(out / "video")
        video_entry = {
            "final_loss": round(float(np.mean(video_losses[-20:])), 5),
            "seconds": round(time.perf_counter() - t0, 1),
        }
    if "embedder" in parts:
        t1 = time.perf_counter()
        embedder, embedder_losses, fixed = train_embedder(settings, say)
        state = {
            k: v.detach().to(torch.float16).contiguous() for k, v in embedder.state_dict().items()
        }
        save_file(state, str(out / "embedder" / "open_clip_model.safetensors"))
        embedder_entry = {
            "final_loss": round(float(np.mean(embedder_losses[-20:])), 5),
            "fixed_batch_loss": [round(v, 5) for v in fixed],
            "seconds": round(time.perf_counter() - t1, 1),
        }
    import open_clip
    import transformers

    files = sorted(p for p in out.rglob("*") if p.is_file() and p.name != MODEL_CARD)
    card: dict[str, Any] = {
        "name": SYNTHETIC_MODEL_NAME,
        "what": (
            "tiny V-JEPA-2 (transformers VJEPA2Model, 'tiny' preset) and a small PE-Core "
            f"({SYNTHETIC_EMBEDDER_MODEL}) trained on synthetic scenes, not the paper's models"
        ),
        "video": {
            "folder": "video",
            "objective": "V-JEPA-style future-latent prediction (EMA target, L1) + variance term",
            "clip_frames": _CLIP,
            "final_loss": video_entry.get("final_loss"),
            "seconds": video_entry.get("seconds"),
        },
        "embedder": {
            "folder": "embedder",
            "model": SYNTHETIC_EMBEDDER_MODEL,
            "trunk": SYNTHETIC_TRUNK,
            "objective": "contrastive (frame, caption) pairs from the scenes' ground truth",
            "final_loss": embedder_entry.get("final_loss"),
            "fixed_batch_loss": embedder_entry.get("fixed_batch_loss"),
            "seconds": embedder_entry.get("seconds"),
        },
        "recommended": {"clip_frames": _CLIP},
        "train_seeds": [
            TRAIN_SEED_BASE,
            TRAIN_SEED_BASE + max(settings.scenes, settings.embedder_scenes) - 1,
        ],
        "held_out_seeds": f"< {TRAIN_SEED_BASE} and >= {HELD_OUT_SEED_BASE}",
        "settings": asdict(settings),
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "open_clip": open_clip.__version__,
        },
        "sha256": {str(p.relative_to(out)): _sha256(p) for p in files},
    }
    if "gamma" in parts:
        gamma, card["calibration"] = calibrate_video_model(str(out / "video"), _CLIP, say)
        card["recommended"]["gamma"] = gamma
        say(f"recommended gamma {gamma}")
    elif "video" not in parts and "calibration" in old:  # kept with its video model
        card["recommended"]["gamma"] = old["recommended"]["gamma"]
        card["calibration"] = old["calibration"]
    (out / MODEL_CARD).write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    say(f"wrote {out} in {time.perf_counter() - t0:.0f} s")
    return card
