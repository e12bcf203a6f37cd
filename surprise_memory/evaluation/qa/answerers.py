"""What an answerer is, the memory it is given, and the ``retrieval`` answerer (no LLM).

An answerer (:class:`Answerer`) answers one question at a time from a :class:`Memory`:
one sequence's episodes (a store in this process, or a memory node's service through
:class:`~surprise_memory.agents.ros_client.RosEpisodeRetriever`) and how to embed text
for them. It reaches them only through the package's agent tool,
:class:`~surprise_memory.agents.tool.EpisodicMemoryTool`, built per question with the
question's time origin and current time (:meth:`Memory.tool`), so no answerer sees an
episode after the moment the question is asked, and every call lands in the transcript.

:class:`RetrievalAnswerer` is the CI baseline: deterministic, no LLM.

* The question's words go to the store's text search (``query``), less the words that
  only frame a question (:data:`QUESTION_WORDS`: when, where, did, you, last, ...); the
  best ``qa_max_results`` episodes come back, best first.
* *time* / *position*: the chosen episode's trigger time / the robot's position there.
  The chosen episode is the best one; but where the question says *last*, *latest* or
  *most recent* (*first*, *earliest*), it is the latest (earliest) of those whose
  similarity reaches ``qa_yes_threshold`` (the best one if none does). The memory is cut
  at the question's current time, so "the last one" is the latest before it. *Time* and
  *duration* questions search the surprise episodes first (an event's time is its
  episode's; a place keyframe's is when the robot passed), every kind when no episode
  reaches the threshold; *position* questions search both kinds.
* *binary*: yes when a record's similarity reaches ``qa_yes_threshold``, a threshold to
  calibrate on held-out questions (:mod:`.thresholds`); an empty memory is a no. A place
  keyframe must reach it plus ``place_margin``: the keyframes view every place
  whatever happens, so a memory holds many of them, and the best of many ordinary views
  matches a question's words better by chance than the best of a few surprise episodes
  (the QA world's validation questions whose answer is no: best place view median 0.43,
  best episode 0.27). The margin applies wherever a record must match: also to the first
  or the last of something.
  With ``generic_threshold``, also no when the question's words tell the embedder nothing
  to look for: their text vector lies within that cosine of :data:`GENERIC_CAPTION`'s.
  A small embedder maps words it never learnt ("a fire hydrant") to nearly the vector of
  an empty caption, which matches every frame about as well as a real thing does (the QA
  world's lures: cosine 0.98-1.00 to "a photo", best similarity as high as a landmark's).
* *duration*: a question "... between A and B?" searches A and B apart (each chosen as
  above); the answer is the minutes between the two episodes. Other phrasings stay
  unanswered.
* *places* (the QA world's second round, :mod:`.place_questions`): a question that names
  a place as ``x=.. m, y=.. m`` searches only within ``place_radius_m`` of it. "Is the X
  you passed at ... still there?" is yes when the robot's *latest pass* by the place (its
  views there within ``still_pass_s`` before the latest one) has a view that matches X by
  ``still_threshold``: the memory's last pass by the place decides, not its best view
  ever. A pass, not its last view: driving by, the robot looks at the place, then past it (the
  thing behind it, out of the camera's view, yet still within the radius). With
  ``still_drop``, it is also yes when the latest pass matches X nearly as well as the
  earlier views of the place did (at most ``still_drop`` less than the best of them): a
  thing the embedder sees only faintly ("a parked ball", 0.2-0.4 in every view of it) is
  still there when it looks as it looked before, and gone when its views lose it. "What
  stood ... at ...: A or B?" answers the choice that matches the place's views best.
* *text*: otherwise unanswered (a sentence needs a language model).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from surprise_memory.agents.tool import EpisodicMemoryTool, TextEmbedder
from surprise_memory.errors import InputError, SurpriseMemoryError
from surprise_memory.evaluation.qa.questions import Answer, Question
from surprise_memory.memory.places import EPISODE, PLACE
from surprise_memory.memory.store import EpisodeRetriever

__all__ = [
    "GENERIC_CAPTION",
    "QUESTION_WORDS",
    "AnswerResult",
    "Answerer",
    "Memory",
    "QuestionError",
    "RetrievalAnswerer",
    "search_memory",
    "search_words",
    "split_between",
]

QUESTION_WORDS = frozenset({
    "when", "where", "what", "which", "who", "how", "long", "many", "minutes", "time",
    "did", "do", "does", "was", "were", "is", "are", "has", "have", "had",
    "you", "your", "i", "me", "my", "we", "at",
    "first", "last", "latest", "earliest", "most", "recent", "recently",
    "ever", "any", "all", "point", "see", "saw", "seen",
})  # fmt: skip
"""Words that frame a question rather than say what to look for: left out of the search."""

GENERIC_CAPTION = "a photo"
"""A caption that names nothing: CLIP's prompt "a photo of {}" left empty."""

_WORD_RE = re.compile(r"[A-Za-z0-9'-]+")
_LATEST_RE = re.compile(r"\b(last|latest|most recent(ly)?)\b", re.IGNORECASE)
_EARLIEST_RE = re.compile(r"\b(first|earliest)\b", re.IGNORECASE)
_BETWEEN_RE = re.compile(r"\bbetween\s+(.+?)\s+and\s+(.+?)[\s?.!]*$", re.IGNORECASE)
_EVENT_KINDS = [EPISODE]  # time and duration questions: the surprise episodes first
_PLACE_RE = re.compile(r"\bx=(-?\d+(?:\.\d+)?) m, y=(-?\d+(?:\.\d+)?) m")
_STILL_RE = re.compile(r"\bstill (there|standing)\b", re.IGNORECASE)
_CHOICE_RE = re.compile(r":\s*(.+?)\s+or\s+(.+?)[\s?.!]*$")
_PLACE_WORDS = frozenset({"still", "there", "standing", "passed", "stood", "by", "street", "the"})


class QuestionError(SurpriseMemoryError):
    """An answerer could not answer one question (the run goes on; ``--resume`` retries)."""


@dataclass
class AnswerResult:
    """What an answerer gave for one question.

    Attributes:
        answer: The answer (None, or the type's field unset: unanswered).
        transcript: Every step: requests, tool calls and their results, replies.
        error: Why it failed (None: it did not).
        judged: A text question: whether a judge found the answer right (None: no judge).
        details: Figures of the answerer worth keeping (e.g. the best similarity).

    """

    answer: Answer | None
    transcript: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    judged: bool | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Memory:
    """One sequence's memory, as a question is asked of it.

    Attributes:
        retriever: The episodes: a store, or ``RosEpisodeRetriever`` (a memory node).
        embed_text: Text -> vector of the store's embedder; None = the retriever embeds
            text itself (a memory node does).
        embedder_model: Name of ``embed_text``'s model.
        embedder_pretrained: Whether it has trained weights.

    """

    retriever: EpisodeRetriever
    embed_text: TextEmbedder | None = None
    embedder_model: str | None = None
    embedder_pretrained: bool | None = None

    @classmethod
    def searched_by(cls, retriever: EpisodeRetriever, embedder: Any) -> Memory:
        """The memory searched by ``embedder``'s text vectors.

        Args:
            retriever: The episodes.
            embedder: An ``ImageTextEmbedder`` (``embed_text``, ``model_name``,
                ``pretrained``): the store's own embedder.

        """
        return cls(
            retriever,
            embed_text=lambda text: embedder.embed_text([text])[0],
            embedder_model=embedder.model_name,
            embedder_pretrained=embedder.pretrained,
        )

    def tool(
        self,
        question: Question,
        *,
        max_results_cap: int = 20,
        image_episodes: int = 3,
        frames_per_episode: int = 3,
    ) -> EpisodicMemoryTool:
        """The agent tool for ``question``: its origin, and the memory cut at its asking."""
        return EpisodicMemoryTool(
            self.retriever,
            embed_text=self.embed_text,
            embedder_model=self.embedder_model,
            embedder_pretrained=self.embedder_pretrained,
            origin=question.origin_ns,
            now=question.asked_at_s,
            max_results_cap=max_results_cap,
            image_episodes=image_episodes,
            frames_per_episode=frames_per_episode,
        )


class Answerer(Protocol):
    """Answers questions from a memory."""

    @property
    def name(self) -> str:
        """Its name (``retrieval``, ``openai``)."""
        ...

    def settings(self) -> dict[str, Any]:
        """What decides its answers, for the run's record (never a secret)."""
        ...

    def answer(self, question: Question, memory: Memory) -> AnswerResult:
        """Answer one question; a failure comes back as ``error``, never raised."""
        ...


def search_words(text: str) -> str:
    """``text`` less :data:`QUESTION_WORDS` and punctuation (the text itself if nothing is left)."""
    kept = [w for w in _WORD_RE.findall(text) if w.lower() not in QUESTION_WORDS]
    return " ".join(kept) or text


def split_between(text: str) -> tuple[str, str] | None:
    """``"How long between A and B?"`` -> ``(A, B)``; None for other phrasings."""
    found = _BETWEEN_RE.search(text)
    return None if found is None else (found.group(1), found.group(2))


def search_memory(
    tool: EpisodicMemoryTool, transcript: list[dict[str, Any]], **arguments: Any
) -> Any:
    """Call ``tool`` with ``arguments`` (missing ones null), note the call in ``transcript``.

    Raises:
        QuestionError: The tool answered an error.

    """
    args: dict[str, Any] = {
        "query": None,
        "start_time": None,
        "end_time": None,
        "position": None,
        "radius": None,
        "max_results": None,
        "include_images": False,
        "kinds": None,
        **arguments,
    }
    result = tool.execute(**args)
    transcript.append({"tool": tool.name, "arguments": args, "result": result})
    if "error" in result:
        raise QuestionError(f"the memory tool answered: {result['error']}")
    return result


class RetrievalAnswerer:
    """The ``retrieval`` answerer: the store's text search, no LLM (module docstring).

    Args:
        yes_threshold: Similarity from which a binary question is answered yes.
        max_results: Episodes read per search.
        still_threshold: Similarity of the best view of the latest pass by a place from
            which "still there?" is answered yes; None = ``yes_threshold``.
        place_radius_m: How far from a place named in a question its views are searched.
        still_pass_s: The latest pass by a place: its views within this many seconds
            before the latest one (a robot at walking pace crosses ``place_radius_m`` of
            5 m in about 10 s).
        generic_threshold: Cosine between a binary question's words and
            :data:`GENERIC_CAPTION` from which it is answered no (its words name nothing
            the embedder knows); None = not asked. Needs the memory's ``embed_text``.
        place_margin: What a place keyframe's similarity must reach above
            ``yes_threshold`` to match (module docstring); 0 = the same threshold.
        still_drop: "Still there?" is also yes when the latest pass's best view is at most
            this much less similar than the place's best earlier view; None = not asked.

    Raises:
        InputError: ``max_results`` below 1, or a radius or a pass not above 0.

    """

    name = "retrieval"

    def __init__(
        self,
        yes_threshold: float,
        max_results: int = 20,
        *,
        still_threshold: float | None = None,
        place_radius_m: float = 5.0,
        still_pass_s: float = 30.0,
        generic_threshold: float | None = None,
        place_margin: float = 0.0,
        still_drop: float | None = None,
    ) -> None:
        if max_results < 1:
            raise InputError(f"max_results={max_results}: must be >= 1")
        for name, value in (("place_radius_m", place_radius_m), ("still_pass_s", still_pass_s)):
            if not value > 0:
                raise InputError(f"{name}={value}: must be > 0")
        self._threshold = float(yes_threshold)
        self._still = self._threshold if still_threshold is None else float(still_threshold)
        self._radius = float(place_radius_m)
        self._pass_s = float(still_pass_s)
        self._generic = None if generic_threshold is None else float(generic_threshold)
        self._place_margin = float(place_margin)
        self._still_drop = None if still_drop is None else float(still_drop)
        self._k = max_results

    def settings(self) -> dict[str, Any]:
        """The thresholds, the episodes per search, the place radius and pass."""
        return {
            "qa_yes_threshold": self._threshold,
            "qa_place_margin": self._place_margin,
            "qa_max_results": self._k,
            "still_threshold": self._still,
            "place_radius_m": self._radius,
            "still_pass_s": self._pass_s,
            "still_drop": self._still_drop,
            "generic_threshold": self._generic,
        }

    def answer(self, question: Question, memory: Memory) -> AnswerResult:
        """Answer ``question`` from ``memory`` (see the module docstring); never raises."""
        transcript: list[dict[str, Any]] = []
        details: dict[str, Any] = {}
        try:
            answer = self._answer(question, memory, transcript, details)
        except SurpriseMemoryError as exc:
            return AnswerResult(None, transcript, error=str(exc), details=details)
        return AnswerResult(answer, transcript, details=details)

    def _answer(
        self,
        question: Question,
        memory: Memory,
        transcript: list[dict[str, Any]],
        details: dict[str, Any],
    ) -> Answer | None:
        kind = question.type
        place = _PLACE_RE.search(question.text)
        if place is not None and kind in ("binary", "text"):
            at = [float(place.group(1)), float(place.group(2)), 0.0]
            return self._at_place(question, memory, at, transcript, details)
        if kind == "text":
            details["note"] = "text questions stay unanswered without a language model"
            return None
        tool = memory.tool(question, max_results_cap=self._k)
        if kind == "duration":
            return self._duration(tool, question.text, transcript, details)
        if kind == "binary":
            episodes = self._search(tool, question.text, transcript)
            return self._yes(memory, search_words(question.text), episodes, details)
        # when something happened is an event's time: a place keyframe's is when the robot
        # passed (measured: with the route's places among the hits, the short world's
        # "when did the person cross?" was answered 0.49 min off instead of < 0.1)
        kinds = _EVENT_KINDS if kind == "time" else None
        chosen = self._choose(tool, question.text, transcript, kinds)
        if chosen is None or kind == "time":
            return None if chosen is None else Answer(time_s=float(chosen["time"]))
        return _position_of(chosen, details)

    def _at_place(
        self,
        question: Question,
        memory: Memory,
        at: list[float],
        transcript: list[dict[str, Any]],
        details: dict[str, Any],
    ) -> Answer | None:
        """A question about the place ``at``: still there (binary), or which choice (text)."""
        tool = memory.tool(question, max_results_cap=self._k)
        text = _PLACE_RE.sub(" ", question.text)
        choice = _CHOICE_RE.search(text) if question.type == "text" else None
        if question.type == "text" and choice is None:
            details["note"] = "a text question about a place is answered only as 'A or B?'"
            return None
        if choice is not None:
            best: dict[str, float] = {}
            for option in choice.groups():
                near = self._near(tool, option, at, transcript)
                best[option] = max((_similarity(e) or -1.0 for e in near), default=-1.0)
            details["choices"] = best
            if max(best.values()) == -1.0:
                details["note"] = "nothing of the place in memory"
                return None
            return Answer(text=max(best, key=lambda o: best[o]))
        near = self._near(tool, text, at, transcript)
        if not _STILL_RE.search(question.text):
            return self._yes(memory, search_words(text), near, details)
        if not near:
            details["note"] = "nothing of the place in memory"
            return Answer(yes=False)
        latest = max(float(e["time"]) for e in near)
        last_pass = [e for e in near if float(e["time"]) >= latest - self._pass_s]
        best = max(last_pass, key=lambda e: _similarity(e) or -1.0)
        now = _similarity(best) or -1.0
        before = max(
            (_similarity(e) or -1.0 for e in near if float(e["time"]) < latest - self._pass_s),
            default=None,
        )
        details["last_pass_similarity"] = _similarity(best)  # its best view
        details["last_pass_time"] = float(best["time"])
        details["earlier_similarity"] = before  # the best view of the place before that pass
        looks_as_before = (
            self._still_drop is not None and before is not None and now >= before - self._still_drop
        )
        return Answer(yes=now >= self._still or looks_as_before)

    def _matches(self, record: dict[str, Any]) -> bool:
        """Whether a record's similarity reaches the threshold of its kind."""
        similarity = _similarity(record)
        margin = self._place_margin if record.get("kind") == PLACE else 0.0
        return similarity is not None and similarity >= self._threshold + margin

    def _yes(
        self,
        memory: Memory,
        words: str,
        records: Sequence[dict[str, Any]],
        details: dict[str, Any],
    ) -> Answer:
        """Yes when one of ``records`` matches and ``words`` name something.

        The best similarity of each kind and the words' cosine to :data:`GENERIC_CAPTION`
        (``generic_cos``) go to ``details``, to fit the thresholds on.
        """
        sims = [s for s in map(_similarity, records) if s is not None]
        details["best_similarity"] = max(sims, default=None)
        for kind in (EPISODE, PLACE):
            details[f"best_{kind}_similarity"] = max(
                (s for r in records if r.get("kind") == kind and (s := _similarity(r)) is not None),
                default=None,
            )
        yes = any(map(self._matches, records))
        if memory.embed_text is None:  # a memory node embeds text itself
            if self._generic is not None:
                details["note"] = "the words were not checked: the memory embeds text itself"
            return Answer(yes=yes)
        words_vec, empty_vec = (
            np.asarray(memory.embed_text(t), np.float64) for t in (words, GENERIC_CAPTION)
        )
        norms = float(np.linalg.norm(words_vec) * np.linalg.norm(empty_vec)) or 1.0
        details["generic_cos"] = float(words_vec @ empty_vec) / norms
        if self._generic is not None and details["generic_cos"] >= self._generic:
            details["note"] = "the question's words name nothing the embedder tells apart"
            yes = False
        return Answer(yes=yes)

    def _near(
        self,
        tool: EpisodicMemoryTool,
        text: str,
        at: list[float],
        transcript: list[dict[str, Any]],
    ) -> list[dict[str, Any]]:
        words = [w for w in search_words(text).split() if w.lower() not in _PLACE_WORDS]
        result = search_memory(
            tool,
            transcript,
            query=" ".join(words) or text,
            position=at,
            radius=self._radius,
            max_results=self._k,
        )
        return list(result["episodes"])

    def _duration(
        self,
        tool: EpisodicMemoryTool,
        text: str,
        transcript: list[dict[str, Any]],
        details: dict[str, Any],
    ) -> Answer | None:
        parts = split_between(text)
        if parts is None:
            details["note"] = "a duration is answered only when asked 'between A and B'"
            return None
        chosen = [self._choose(tool, part, transcript, _EVENT_KINDS) for part in parts]
        times = [float(e["time"]) for e in chosen if e is not None]
        return Answer(minutes=abs(times[1] - times[0]) / 60.0) if len(times) == 2 else None

    def _search(
        self,
        tool: EpisodicMemoryTool,
        text: str,
        transcript: list[dict[str, Any]],
        kinds: list[str] | None = None,
    ) -> list[dict[str, Any]]:
        result = search_memory(
            tool, transcript, query=search_words(text), max_results=self._k, kinds=kinds
        )
        return list(result["episodes"])

    def _choose(
        self,
        tool: EpisodicMemoryTool,
        text: str,
        transcript: list[dict[str, Any]],
        kinds: list[str] | None = None,
    ) -> dict[str, Any] | None:
        """The record that answers ``text``: the best, or the latest/earliest that match.

        ``kinds`` are searched first; when none of them matches (no record at the yes
        threshold), every kind is. The order words are read in ``text`` itself: each part
        of a duration has its own.
        """
        episodes = self._search(tool, text, transcript, kinds)
        if kinds is not None and not any(map(self._matches, episodes)):
            episodes = self._search(tool, text, transcript) or episodes
        if not episodes:
            return None
        matching = [e for e in episodes if self._matches(e)] or episodes[:1]
        if _LATEST_RE.search(text):
            return max(matching, key=lambda e: float(e["time"]))
        if _EARLIEST_RE.search(text):
            return min(matching, key=lambda e: float(e["time"]))
        return episodes[0]


def _position_of(episode: dict[str, Any], details: dict[str, Any]) -> Answer | None:
    position = episode.get("position")
    if position is None:
        details["note"] = "the chosen episode has no pose"
        return None
    x, y, z = (float(v) for v in position)
    return Answer(position=(x, y, z))


def _similarity(episode: dict[str, Any]) -> float | None:
    value = episode.get("similarity")
    return None if value is None else float(value)
