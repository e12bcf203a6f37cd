"""The ``openai`` answerer against a real HTTP server speaking the chat-completions protocol.

The server (stdlib ``http.server`` in a thread) stands in for the LLM endpoint that cannot
run here; the client is the answerer's own, unpatched. Its replies are scripted per
question and per attempt, the way an agent would act: call the memory tool (with images),
read the tool's result from the next request and answer from it. Covered: a tool call
with images, a malformed reply, a timeout, a text answer and its judgement, an endpoint
that is down; each gives a clear error for its question only, the run goes on, and
``--resume`` completes it without losing the failed attempts.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from qa_helpers import QaWorldStore

from surprise_memory.cli import main as cli_main
from surprise_memory.evaluation.qa.answerers import Memory
from surprise_memory.evaluation.qa.question_files import write_questions
from surprise_memory.evaluation.qa.questions import Answer, Question
from surprise_memory.evaluation.qa.run import QaRun
from surprise_memory.memory.store import EpisodeStore

Reply = Callable[[dict[str, Any], int], Any]


class ChatServer(ThreadingHTTPServer):
    """A chat-completions endpoint whose replies a test scripts per question and attempt."""

    daemon_threads = True

    def __init__(self, script: dict[str, list[Reply]]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.attempts: Counter[str] = Counter()
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def reply(self, body: dict[str, Any]) -> Any:
        messages = body["messages"]
        with self.lock:
            self.requests.append(body)
            if messages[0]["content"].startswith("You grade"):
                return {"content": json.dumps({"correct": True})}
            question = messages[1]["content"]
            key = next(k for k in self.script if k in question)
            if len(messages) == 2:  # a new attempt at the question
                self.attempts[key] += 1
            replies = self.script[key]
            return replies[min(self.attempts[key], len(replies)) - 1](body, len(messages))


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        if self.path != "/v1/chat/completions":
            self.send_error(404)
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        message = self.server.reply(body)
        if isinstance(message, float):  # a model that takes too long
            time.sleep(message)
            message = {"content": "late"}
        data = json.dumps(
            {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", **message}}],
            }
        ).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
            pass


def _tool_call(query: str, images: bool) -> Reply:
    arguments = {
        "query": query,
        "start_time": None,
        "end_time": None,
        "position": None,
        "radius": None,
        "max_results": 3,
        "include_images": images,
    }

    def reply(body: dict[str, Any], n: int) -> Any:
        if n > 2:  # the tool's result is in: answer from its best episode
            return ANSWER_FROM_TOOL(body)
        call = {"name": "search_episodic_memory", "arguments": json.dumps(arguments)}
        return {
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": call}],
        }

    return reply


def _last_tool_result(body: dict[str, Any]) -> dict[str, Any]:
    tool = [m for m in body["messages"] if m["role"] == "tool"][-1]
    return dict(json.loads(tool["content"]))


def ANSWER_FROM_TOOL(body: dict[str, Any]) -> Any:
    best = _last_tool_result(body)["episodes"][0]
    question = body["messages"][1]["content"]
    value = best["position"] if "Where" in question else best["time"]
    return {
        "content": "```json\n"
        + json.dumps({"reasoning": "the best episode", "answer": value})
        + "\n```"
    }


def _image_urls(request: dict[str, Any]) -> list[str]:
    """The image URLs of a chat request's messages."""
    return [
        part["image_url"]["url"]
        for m in request["messages"]
        if isinstance(m["content"], list)
        for part in m["content"]
        if part["type"] == "image_url"
    ]


def _say(content: str) -> Reply:
    return lambda body, n: {"content": content}


def _wait(seconds: float) -> Reply:
    return lambda body, n: seconds


@pytest.fixture
def server(qa_world_store: QaWorldStore) -> Iterator[ChatServer]:
    time_q, binary_q, light_q, text_q = _questions(qa_world_store)
    script = {  # per question: the reply of the first attempt, of the second (resumed)
        time_q.text: [_tool_call("somebody walk past", images=True)],
        binary_q.text: [_say("I believe so."), _say('{"answer": "yes"}')],
        light_q.text: [_wait(3.0), _tool_call("lights go down", images=False)],
        text_q.text: [_say('{"reasoning": "saw it", "answer": "a green one"}')],
    }
    srv = ChatServer(script)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _questions(qa_world_store: QaWorldStore) -> list[Question]:
    """Four questions: the first crossing, a yes/no, the last dimming, and a text question."""
    asked = qa_world_store.questions

    def pick(kind: str, category: str, word: str) -> Question:
        return next(
            q
            for q in asked
            if q.type == kind
            and q.category == category
            and word in q.text
            and q.truth.yes is not False
        )

    chosen = [
        pick("time", "person", "first"),
        pick("binary", "person", ""),
        pick("time", "light", "last"),
    ]
    first = chosen[0]
    text = Question(
        "text-1",
        first.sequence,
        "What colour was the first ball?",
        "text",
        Answer(text="green"),
        asked_at_s=first.asked_at_s,
        origin_ns=first.origin_ns,
    )
    return [*chosen, text]


def _args(qa_world_store: QaWorldStore, questions: Path, out: Path, url: str) -> list[str]:
    store = f"{qa_world_store.sequence}={qa_world_store.store}"
    return [
        "eval-qa",
        str(questions),
        "--store",
        store,
        "--out",
        str(out),
        "--answerer",
        "openai",
        "--llm-base-url",
        url,
        "--llm-model",
        "scripted",
        "--llm-timeout-seconds",
        "1",
        "--llm-api-key-env",
        "SURPRISE_MEMORY_TEST_KEY",
    ]


def test_tool_calls_images_failures_and_resume(
    qa_world_store: QaWorldStore,
    server: ChatServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SURPRISE_MEMORY_TEST_KEY", "sk-test-secret")
    questions = _questions(qa_world_store)
    write_questions(tmp_path / "q.jsonl", questions)
    out = tmp_path / "run"
    assert cli_main(_args(qa_world_store, tmp_path / "q.jsonl", out, server.base_url)) == 3
    records = QaRun.open(out).records()
    time_q, binary_q, light_q, text_q = questions
    # 1. the tool call with images: the package's own tool definition, then the frames
    first = server.requests[0]
    with EpisodeStore(qa_world_store.store, read_only=True) as store:
        tool = Memory(store).tool(time_q)  # the schema does not depend on the embedder here
        assert first["tools"][0]["function"]["name"] == tool.schema["function"]["name"]
        assert first["tools"][0]["function"]["parameters"]["properties"].keys() == (
            tool.schema["function"]["parameters"]["properties"].keys()
        )
    second = server.requests[1]
    result = _last_tool_result(second)
    assert result["count"] >= 1 and "_images" not in result
    images = _image_urls(second)
    assert images and all(base64.b64decode(u.partition(",")[2])[:2] == b"\xff\xd8" for u in images)
    done = records[(time_q.id, 0)]
    assert done["error"] is None and done["score"]["status"] == "scored"
    assert done["answer"] == {"time_s": result["episodes"][0]["time"]}
    logged = [e for e in done["transcript"] if "request" in e][1]["request"]
    saved = _image_urls(logged)
    assert saved and all((out / name).read_bytes()[:2] == b"\xff\xd8" for name in saved)
    assert any("tool_call" in e for e in done["transcript"])
    # 2. a malformed reply and 3. a timeout: a clear error each, the run went on
    assert "malformed reply" in records[(binary_q.id, 0)]["error"]
    assert "did not answer within 1 s" in records[(light_q.id, 0)]["error"]
    # 4. a text answer, judged by the same endpoint
    judged = records[(text_q.id, 0)]
    assert judged["judged"] is True and judged["score"]["value"] == 1.0
    summary = json.loads((out / "summary.json").read_text())
    assert {e["id"] for e in summary["errors"]} == {binary_q.id, light_q.id}
    # the key went out as a bearer token, and nowhere into the run
    assert "sk-test-secret" not in "".join(p.read_text() for p in out.glob("*.json*"))
    # --resume asks the two failed questions again, and only them
    asked = len(server.requests)
    assert cli_main(["eval-qa", "--resume", str(out)]) == 0
    assert len(server.requests) == asked + 3  # binary: 1; light: a tool call, then the answer
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 6  # the failed attempts are kept
    assert [(x["id"], x["attempt"]) for x in lines[4:]] == [(binary_q.id, 2), (light_q.id, 2)]
    final = QaRun.open(out).records()
    assert final[(binary_q.id, 0)]["answer"] == {"yes": True}
    assert final[(light_q.id, 0)]["score"]["status"] == "scored"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["errors"] == [] and summary["all"]["counts"]["questions"] == 4


def test_an_endpoint_that_is_down_fails_each_question_and_resume_completes(
    qa_world_store: QaWorldStore,
    server: ChatServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    questions = _questions(qa_world_store)
    write_questions(tmp_path / "q.jsonl", questions)
    out = tmp_path / "run"
    assert cli_main(_args(qa_world_store, tmp_path / "q.jsonl", out, down)) == 3
    records = QaRun.open(out).records()
    assert len(records) == len(questions)
    for record in records.values():
        assert (
            "is down or unreachable" in record["error"] and "Connection refused" in record["error"]
        )
    assert "resume with --resume" in capsys.readouterr().out
    # the endpoint is back, at another address: the resume says so, and completes the run
    args = ["eval-qa", "--resume", str(out), "--llm-base-url", server.base_url]
    assert cli_main(args) == 3
    final = QaRun.open(out).records()
    failed = {qid for (qid, _), r in final.items() if r["error"]}
    assert failed <= {questions[1].id, questions[2].id}  # this server fails those once
    settings = json.loads((out / "settings.json").read_text())
    assert settings["resumes"][0]["changed"] == {"llm_base_url": server.base_url}
    assert cli_main(["eval-qa", "--resume", str(out)]) == 0
    assert all(r["error"] is None for r in QaRun.open(out).records().values())


def test_an_endpoint_not_given_is_refused_before_a_run_folder_is_written(
    qa_world_store: QaWorldStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"{qa_world_store.sequence}={qa_world_store.store}"
    out = tmp_path / "run"
    args = ["eval-qa", str(qa_world_store.questions_file), "--store", store, "--out", str(out)]
    assert cli_main([*args, "--answerer", "openai", "--llm-model", "m"]) == 1
    assert "llm_base_url=''" in capsys.readouterr().err
    assert not out.exists()
