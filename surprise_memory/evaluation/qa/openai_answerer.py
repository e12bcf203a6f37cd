"""The ``openai`` answerer: an LLM agent on any OpenAI-compatible chat-completions endpoint.

The agent gets the question and the robot's current time, and one tool: the package's
own :class:`~surprise_memory.agents.tool.EpisodicMemoryTool`, as its chat-completions
function (:attr:`~surprise_memory.agents.function_tool.FunctionTool.schema`; the
definition DAAAM's agent gets too, not written again here): search by
text, time and place, with the episodes' frames when asked. Each reply either calls the
tool (the results go back as ``tool`` messages; the frames, which a tool message cannot
carry, as ``image_url`` parts of a user message, for a vision model) or answers. At most
``llm_max_steps`` requests are made per question.

**The answer** is JSON ``{"reasoning": "...", "answer": ...}`` in the shape DAAAM's
prompt templates ask for (``config/prompt_templates/*_response.txt``): ``"yes"``/``"no"``;
``[x, y, z]`` in metres; a time as seconds since the start of the recording; a duration in
seconds (turned into minutes for scoring); a sentence. A reply with no such JSON, or one
of the wrong shape, fails the question as a *malformed reply* (ReMEmbR's ``eval.py``
retried until a reply parsed; here the failure is recorded and ``--resume`` retries).

**Text answers** are judged by the same endpoint (``llm_judge_text``): asked whether the
answer matches the reference, it replies ``{"correct": true|false}``.

**The transcript** holds every request as sent and every reply, tool call and tool result,
so a run can be replayed and audited; the frames sent are written once to the run's
``images/`` folder, named by their SHA-256, and the transcript names them there instead of
repeating their base64.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from surprise_memory.config.qa import QaConfig
from surprise_memory.errors import InputError
from surprise_memory.evaluation.qa.answerers import AnswerResult, Memory, QuestionError
from surprise_memory.evaluation.qa.chat import ChatEndpoint
from surprise_memory.evaluation.qa.questions import Answer, Question, answer_of

__all__ = ["ANSWER_FORMATS", "OpenAIAnswerer", "parse_answer"]

ANSWER_FORMATS = {
    "binary": '"answer": "yes" or "no"',
    "position": '"answer": [x, y, z], the place in metres, in the frame of the episodes\' '
    "positions",
    "time": '"answer": the time it happened, in seconds since the start of the recording',
    "duration": '"answer": the length of time asked for, in seconds',
    "text": '"answer": a short sentence',
}
"""What the ``answer`` field holds, per question type (DAAAM's conventions)."""

_SYSTEM = (
    "You are a mobile robot answering questions about what you saw while driving, from "
    "your episodic memory: short clips (8 frames) stored when something surprising "
    "happened, each with its time and your position. Search it with the tool, as often "
    "as you need. Times are seconds since the start of the recording (t = 0); positions "
    "are [x, y, z] in metres. If the memory does not show the answer, give your best "
    "guess; never refuse. When you know the answer, reply with JSON only, no tool call: "
    '{"reasoning": "<one or two sentences>", <ANSWER>}.'
)
_JUDGE = (
    "You grade a robot's answer against the reference answer of a question. Reply with "
    'JSON only: {"correct": true} when the answer says the same as the reference in '
    'substance, else {"correct": false}.'
)
_JSON_RE = re.compile(r"\{.*\}", re.DOTALL)


def parse_answer(content: Any, kind: str) -> Answer:
    """The answer in a final reply's ``content`` (see the module docstring).

    Raises:
        QuestionError: No JSON object with an ``answer`` of the type's shape.

    """
    if not isinstance(content, str) or not content.strip():
        raise QuestionError("malformed reply: no content and no tool call")
    text = content.strip()
    found = _JSON_RE.search(text)
    try:
        item = json.loads(found.group(0) if found else text)
        value = item["answer"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise QuestionError(
            f"malformed reply: expected JSON with an 'answer' field, got {text[:200]!r}"
        ) from None
    if kind == "binary" and isinstance(value, str) and value.strip().lower() in ("yes", "no"):
        value = value.strip().lower() == "yes"
    if kind == "duration" and isinstance(value, int | float) and not isinstance(value, bool):
        value = value / 60.0  # DAAAM's agent answers durations in seconds
    try:
        return answer_of(kind, value)
    except InputError as exc:
        raise QuestionError(f"malformed reply: the {kind} answer {value!r}: {exc}") from None


class OpenAIAnswerer:
    """The ``openai`` answerer (see the module docstring).

    Args:
        config: The ``llm_*`` settings.
        images_folder: Where the frames sent are written (the run's ``images/``); None =
            not written (the transcript still names them by SHA-256).
        endpoint: The endpoint (default: from ``config``).

    Raises:
        ConfigError: No usable endpoint in ``config``.

    """

    name = "openai"

    def __init__(
        self,
        config: QaConfig,
        *,
        images_folder: Path | None = None,
        endpoint: ChatEndpoint | None = None,
    ) -> None:
        self._config = config
        self._endpoint = endpoint or ChatEndpoint(
            config.llm_base_url,
            config.llm_model,
            config.llm_api_key_env,
            config.llm_timeout_seconds,
        )
        self._images = images_folder

    def settings(self) -> dict[str, Any]:
        """The endpoint, the model and the limits (the key's variable name, not the key)."""
        c = self._config
        return {
            "llm_base_url": c.llm_base_url,
            "llm_model": c.llm_model,
            "llm_api_key_env": c.llm_api_key_env,
            "llm_max_steps": c.llm_max_steps,
            "llm_timeout_seconds": c.llm_timeout_seconds,
            "llm_temperature": c.llm_temperature,
            "llm_images": c.llm_images,
            "llm_judge_text": c.llm_judge_text,
        }

    def answer(self, question: Question, memory: Memory) -> AnswerResult:
        """Run the agent on ``question``; a failure comes back as ``error``, never raised."""
        transcript: list[dict[str, Any]] = []
        try:
            answer = self._run(question, memory, transcript)
        except QuestionError as exc:
            return AnswerResult(None, transcript, error=str(exc))
        result = AnswerResult(answer, transcript)
        if question.type == "text" and self._config.llm_judge_text:
            try:
                result.judged = self._judge(question, answer, transcript)
            except QuestionError as exc:  # the answer stands, unscored
                result.details["judge_error"] = str(exc)
        return result

    def _messages(self, question: Question) -> list[dict[str, Any]]:
        now = (
            "after the end of the recording"
            if question.asked_at_s is None
            else f"t = {question.asked_at_s:.1f} s"
        )
        system = _SYSTEM.replace("<ANSWER>", ANSWER_FORMATS[question.type])
        user = f"The current time is {now}. {question.text}"
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _run(self, question: Question, memory: Memory, transcript: list[dict[str, Any]]) -> Answer:
        tool = memory.tool(question)
        messages = self._messages(question)
        for step in range(self._config.llm_max_steps):
            body = {
                "messages": messages,
                "tools": [tool.schema],
                "tool_choice": "auto",
                "temperature": self._config.llm_temperature,
            }
            entry: dict[str, Any] = {"step": step, "request": self._loggable(body)}
            transcript.append(entry)
            reply = self._endpoint.complete(body)
            entry["reply"] = reply
            message = reply["choices"][0]["message"]
            calls = message.get("tool_calls") or []
            messages = [*messages, _assistant(message)]
            if not calls:
                return parse_answer(message.get("content"), question.type)
            images: list[dict[str, str]] = []
            for call in calls:
                result = _call(tool, call)
                images += result.pop("_images", [])
                transcript.append({"step": step, "tool_call": call, "result": result})
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.get("id", ""),
                        "content": json.dumps(result),
                    }
                )
            if images and self._config.llm_images:
                messages.append(_image_message(tool.name, images))
        raise QuestionError(f"no answer within {self._config.llm_max_steps} steps (llm_max_steps)")

    def _judge(self, question: Question, answer: Answer, transcript: list[dict[str, Any]]) -> bool:
        body = {
            "messages": [
                {"role": "system", "content": _JUDGE},
                {
                    "role": "user",
                    "content": f"Question: {question.text}\nReference answer: "
                    f"{question.truth.text}\nAnswer: {answer.text}",
                },
            ],
            "temperature": 0.0,
        }
        entry: dict[str, Any] = {"judge": True, "request": copy.deepcopy(body)}
        transcript.append(entry)
        reply = self._endpoint.complete(body)
        entry["reply"] = reply
        content = reply["choices"][0]["message"].get("content")
        try:
            found = _JSON_RE.search(str(content))
            verdict = json.loads(found.group(0) if found else str(content))["correct"]
        except (json.JSONDecodeError, KeyError, TypeError):
            verdict = None
        if not isinstance(verdict, bool):
            raise QuestionError(f"malformed judgement: {str(content)[:200]!r}")
        return verdict

    def _loggable(self, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` with each image's base64 replaced by its file under ``images/``."""
        logged = copy.deepcopy(body)
        logged["model"] = self._endpoint.model
        for message in logged["messages"]:
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for part in content:
                url = part.get("image_url", {}).get("url", "")
                if url.startswith("data:image/jpeg;base64,"):
                    part["image_url"]["url"] = self._keep(url.partition(",")[2])
        return logged

    def _keep(self, b64: str) -> str:
        data = base64.b64decode(b64)
        name = f"images/{hashlib.sha256(data).hexdigest()}.jpg"
        if self._images is not None:
            path = self._images.parent / name
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
        return name


def _assistant(message: dict[str, Any]) -> dict[str, Any]:
    """The reply as the next request's assistant message (only the fields the API takes)."""
    out: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    return out


def _call(tool: Any, call: Any) -> dict[str, Any]:
    """Run one tool call of the reply; a bad call becomes an error result, never a raise."""
    try:
        function = call["function"]
        name = function["name"]
        arguments = json.loads(function.get("arguments") or "{}")
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        return {"error": f"the tool call cannot be read ({exc}): {call!r}"[:500], "episodes": []}
    if name != tool.name:
        return {"error": f"no tool {name!r}; the tool is {tool.name!r}", "episodes": []}
    if not isinstance(arguments, dict):
        return {"error": "the arguments must be a JSON object", "episodes": []}
    result: dict[str, Any] = tool.execute(**arguments)
    return result


def _image_message(tool: str, images: list[dict[str, str]]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": f"Frames returned by {tool}:"}]
    for image in images:
        parts.append({"type": "text", "text": image.get("label", "")})
        url = "data:image/jpeg;base64," + image["base64"]
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return {"role": "user", "content": parts}
