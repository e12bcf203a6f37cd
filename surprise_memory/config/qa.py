"""Settings of the question-answering experiment (``surprise-memory eval-qa``).

Not a node's settings: ``eval-qa`` is a command, so these are its options only (built from
this dataclass like every other option) and the run folder's record of them, not ROS
parameters or YAML entries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from surprise_memory.config.schema import ComponentConfig, setting

__all__ = ["ANSWERERS", "QaConfig"]

ANSWERERS = ("retrieval", "openai")
"""The answerers ``eval-qa`` runs (:mod:`surprise_memory.evaluation.qa`)."""


@dataclass(frozen=True)
class QaConfig(ComponentConfig):
    """The answerer, its limits, and the LLM endpoint of the QA experiment."""

    component: ClassVar[str] = "eval_qa"

    answerer: str = setting(
        "retrieval",
        "retrieval: no LLM, deterministic (the question's words go to the store's text "
        "search; the best episode's time or place is the answer); openai: an LLM agent on "
        "an OpenAI-compatible chat-completions endpoint with the memory as its tool.",
        choices=ANSWERERS,
    )
    qa_max_results: int = setting(
        20,
        "Episodes the retrieval answerer reads per search: the best one answers; a question "
        "about the first or the last of something picks the earliest or latest of those "
        "that reach qa_yes_threshold.",
        low=1,
        high=100,
    )
    qa_yes_threshold: float = setting(
        0.58,
        "Retrieval answerer: a yes/no question is answered yes when its best episode's "
        "similarity reaches this. It depends on the embedder: calibrate it on held-out "
        "questions (a run's summary gives the best threshold for its own binary "
        "questions). The default was fitted on the synthetic QA world's validation seeds "
        "with the synthetic-trained-tiny embedder (benchmarks/RESULTS.md).",
        low=-1.0,
        high=1.0,
    )
    qa_generic_threshold: float = setting(
        1.0,
        "Retrieval answerer: a yes/no question whose words' text vector has at least this "
        "cosine with an empty caption ('a photo') is answered no: its words name nothing "
        "the embedder knows (a small embedder maps unknown words there, and that vector "
        "matches every frame about as well as a real thing). 1.0 = not asked. Needs the "
        "store's embedder: a --service memory embeds text itself and is not asked. Fit it "
        "on held-out questions (a run's summary has generic_threshold_fit); our synthetic "
        "QA world's validation seeds gave 0.956 for the synthetic-trained-tiny embedder "
        "(benchmarks/RESULTS.md).",
        low=-1.0,
        high=1.0,
    )
    qa_place_margin: float = setting(
        0.0,
        "Retrieval answerer: what a place keyframe's similarity must reach above "
        "qa_yes_threshold to match a question (a yes, or the first or last of something). "
        "A memory holds a keyframe of every place, and the best of many ordinary views "
        "matches a question's words better by chance than the best of a few surprise "
        "episodes. 0 = the same threshold for both. Fit it with qa_yes_threshold on "
        "held-out questions (a run's summary has yes_threshold_fit); our synthetic QA "
        "world's validation seeds gave 0.10 for the synthetic-trained-tiny embedder "
        "(benchmarks/RESULTS.md).",
        low=-1.0,
        high=1.0,
    )
    qa_repeats: int = setting(
        1,
        "Times each question is asked (runs); the summary gives the mean and spread over "
        "them (the paper averages three runs of its LLM agent).",
        low=1,
        high=100,
    )
    qa_device: str = setting(
        "cpu", "Device of the query embedder (auto, cpu, cuda, cuda:N), for text searches."
    )
    qa_service_timeout_seconds: float = setting(
        30.0,
        "Seconds a memory node's retrieve_episodes service may take per call (--service).",
        low=0.1,
        high=3600.0,
    )
    llm_base_url: str = setting(
        "",
        "Base URL of the OpenAI-compatible endpoint, up to /v1 (vLLM, Ollama, llama.cpp's "
        "server: http://localhost:8000/v1; OpenAI: https://api.openai.com/v1).",
    )
    llm_model: str = setting("", "Model name the endpoint serves (sent as 'model').")
    llm_api_key_env: str = setting(
        "OPENAI_API_KEY",
        "Name of the environment variable holding the API key (sent as a bearer token; "
        "unset = no key, as local servers need none). The key is never written to the run.",
    )
    llm_max_steps: int = setting(
        8,
        "Most chat requests per question (each may call tools); the question fails with "
        "'no answer within N steps' after that.",
        low=1,
        high=100,
    )
    llm_timeout_seconds: float = setting(
        120.0, "Seconds one chat request may take before the question fails.", low=1.0, high=3600.0
    )
    llm_temperature: float = setting(0.0, "Sampling temperature sent.", low=0.0, high=2.0)
    llm_images: bool = setting(
        True,
        "Send the frames the memory tool returns as images (a vision model); false = the "
        "episodes' text only.",
    )
    llm_judge_text: bool = setting(
        True,
        "Ask the endpoint whether each text answer matches the reference (else text "
        "questions are reported unscored).",
    )
