"""A client of an OpenAI-compatible chat-completions endpoint, with the standard library.

``POST {base_url}/chat/completions`` with a JSON body; the answer's JSON comes back as a
dict. vLLM, Ollama (``/v1``), llama.cpp's server, LM Studio and OpenAI speak this. The API
key is read from the environment variable named in the settings at each request (sent as
``Authorization: Bearer``), never stored. Every way a request can fail becomes one
:class:`~surprise_memory.evaluation.qa.answerers.QuestionError` whose message says what
happened and where (down, timed out, an HTTP error with the start of its body, a reply
that is not chat-completions JSON), so the run records it against the question and goes
on.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request
from typing import Any

from surprise_memory.errors import ConfigError
from surprise_memory.evaluation.qa.answerers import QuestionError

__all__ = ["ChatEndpoint"]

_BODY_EXCERPT = 300


class ChatEndpoint:
    """One chat-completions endpoint.

    Args:
        base_url: Up to ``/v1`` (``http://localhost:8000/v1``).
        model: The ``model`` sent.
        api_key_env: Name of the environment variable holding the key ("" = none).
        timeout_s: Seconds one request may take.

    Raises:
        ConfigError: No base URL or model, or a URL that is not http(s).

    """

    def __init__(self, base_url: str, model: str, api_key_env: str, timeout_s: float) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"llm_base_url={base_url!r}: give the endpoint's http(s) URL up to /v1 "
                "(e.g. http://localhost:8000/v1)"
            )
        if not model:
            raise ConfigError("llm_model is empty: give the model name the endpoint serves")
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._key_env = api_key_env
        self._timeout = timeout_s

    @property
    def url(self) -> str:
        """Where requests go."""
        return self._url

    @property
    def model(self) -> str:
        """The model asked for."""
        return self._model

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """Send ``body`` (``model`` is set here) and return the reply's JSON.

        Raises:
            QuestionError: The endpoint is down, timed out, answered an HTTP error, or
                answered something that is not a chat completion.

        """
        data = json.dumps({**body, "model": self._model}).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self._key_env, "") if self._key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self._url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            excerpt = exc.read()[:_BODY_EXCERPT].decode("utf-8", "replace")
            raise QuestionError(
                f"endpoint {self._url} answered HTTP {exc.code} {exc.reason}: {excerpt}"
            ) from None
        except TimeoutError:
            raise QuestionError(
                f"endpoint {self._url} did not answer within {self._timeout:g} s "
                "(llm_timeout_seconds)"
            ) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError | socket.timeout):
                raise QuestionError(
                    f"endpoint {self._url} did not answer within {self._timeout:g} s "
                    "(llm_timeout_seconds)"
                ) from None
            raise QuestionError(
                f"endpoint {self._url} is down or unreachable ({exc.reason})"
            ) from None
        except (ConnectionError, OSError) as exc:
            raise QuestionError(f"endpoint {self._url}: the connection failed ({exc})") from None
        try:
            reply = json.loads(raw)
            message = reply["choices"][0]["message"]
        except (json.JSONDecodeError, KeyError, IndexError, TypeError):
            excerpt = raw[:_BODY_EXCERPT].decode("utf-8", "replace")
            raise QuestionError(
                f"endpoint {self._url}: the reply is not a chat completion: {excerpt!r}"
            ) from None
        if not isinstance(message, dict):
            raise QuestionError(f"endpoint {self._url}: choices[0].message is not an object")
        return dict(reply)
