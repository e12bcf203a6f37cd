"""The memory browser's web application (Starlette): one page and the JSON it reads.

Routes (all ``GET`` but the image search; nothing writes to the store, which is open
read-only):

* ``/``: the page (``static/index.html``; its script and style under ``/static``, shipped
  with the package: nothing is fetched from elsewhere, so it works on a robot offline);
* ``/api/store``: what the store is (backend, episodes, models; whether text and image
  search can work, and why not);
* ``/api/timeline``: every episode in brief, as columns (``?robot_id=`` for one robot);
* ``/api/curve``: the per-frame surprise curve with tau, where ``process`` left ``scores.csv``;
* ``/api/episodes/{id}``: one episode, with why it was kept;
* ``/api/episodes/{id}/frames/{n}``: its frame n, the JPEG bytes as stored;
* ``/api/episodes/{id}/thumbnail``: its picture, the trigger's frame
  (:func:`~surprise_memory.memory.episodes.trigger_frame_index`, as in every view);
* ``/api/episodes/{id}/place``: whether a surprise episode's place was seen since and
  still looks the same (:func:`~surprise_memory.memory.place_status.place_status`);
* ``/api/search``: ``GET`` with ``text`` and/or filters (``start``, ``end``, ``near``,
  ``near_frame``, ``radius``, ``robot_id``, ``k``, ``kind``), or ``POST`` with an image as the body
  and the filters in the query string: the same retrieval as the CLI and the service;
* ``/api/live``: server-sent events when episodes are added or evicted
  (:mod:`~surprise_memory.browser.live`);
* ``/login``: with a token, the sign-in form and its check
  (:mod:`~surprise_memory.browser.sign_in`).

With a token (:mod:`surprise_memory.access`: required off the loopback, and once set,
required on it too), every route but the sign-in form and its two files answers 401 unless
the request carries the token (``Authorization: Bearer``) or the sign-in's session cookie;
``GET /`` without either is sent to the form.

A request the store cannot answer gets a JSON ``{"error": "..."}`` with a 4xx status
(400 malformed, 404 unknown episode or frame, 413 upload too large; 503 when a fleet store
cannot be reached), never a stack trace; an answer from part of the memory says so in
``partial``; a frame is read only by the store from the path it recorded, so no request can
name a file. Responses forbid loading anything from another origin (Content Security
Policy), and a server bound to the loopback answers only requests addressed to it (a
web page elsewhere cannot reach it through a rebound DNS name).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from surprise_memory.access import is_loopback, token_gate
from surprise_memory.browser.live import ChangeFeed, watch
from surprise_memory.browser.run_notes import RunFiles, why_kept
from surprise_memory.browser.sign_in import (
    OPEN_PATHS,
    SESSION_COOKIE,
    SIGN_IN_PATH,
    sign_in_routes,
)
from surprise_memory.browser.views import (
    episode_view,
    hit_views,
    parse_count,
    place_status_view,
    search_query,
    timeline_columns,
)
from surprise_memory.config.browser import BrowserConfig
from surprise_memory.config.places import PlacesConfig
from surprise_memory.errors import InputError, ModelLoadError, StoreError, StoreUnreachableError
from surprise_memory.memory.episodes import trigger_frame_index
from surprise_memory.memory.place_status import place_status, places_as_stored
from surprise_memory.memory.places import EPISODE
from surprise_memory.memory.query_embedder import (
    StoreQueryEmbedder,
    check_text_queries,
    decode_query_image,
)
from surprise_memory.memory.retrieval import EmbedderMismatchError
from surprise_memory.memory.store import describe_location, is_postgres_url, partial_of
from surprise_memory.memory.store.interface import EpisodeStoreBackend
from surprise_memory.memory.store.records import is_episode_id
from surprise_memory.memory.store.summary import EpisodeSummary
from surprise_memory.offline.report import time_origin_ns

__all__ = ["STATIC_DIR", "Browser", "create_app"]

STATIC_DIR = Path(__file__).resolve().parent / "static"
"""The page's HTML, script and style, installed with the package."""

_LOG = logging.getLogger(__name__)

_SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' blob: data:; object-src 'none'; "
        b"frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class _SecurityHeaders:
    """ASGI middleware adding :data:`_SECURITY_HEADERS` to every HTTP response."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_SECURITY_HEADERS]
            await send(message)

        await self._app(scope, receive, with_headers if scope["type"] == "http" else send)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": " ".join(message.split())}, status_code=status)


class Browser:
    """What the routes share: the store, its query model, its run files, the live feed.

    Args:
        store: The store, opened read-only.
        location: Where it is (a folder or a ``postgresql://`` URI), for the page.
        config: The server's settings.
        places: The places' settings of "is it still there?" (None: the defaults).

    """

    def __init__(
        self,
        store: EpisodeStoreBackend,
        location: str,
        config: BrowserConfig,
        places: PlacesConfig | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.places = places or PlacesConfig()
        self.location = describe_location(location)
        self.backend = "postgresql" if is_postgres_url(location) else "folder"
        folder = getattr(store, "path", None)
        self.run_files = RunFiles(Path(folder) if folder is not None else None)
        self.feed = ChangeFeed()
        self._model = StoreQueryEmbedder(store, config.query_device)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timeline_cache: tuple[int, bytes] | None = None

    # ----------------------------------------------------------------- helpers
    def close_streams(self) -> None:
        """End the pages' live streams; callable from any thread (e.g. a signal handler)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.feed.close)

    def origin(self) -> int | None:
        """The store's time origin (as the CLI and the report count from it)."""
        return time_origin_ns(self.store)

    def _embed(self, text: str | None, image: bytes | None) -> npt.NDArray[np.float32] | None:
        """The query vector of a text or an image, by the store's own embedder (built once)."""
        if text is None and image is None:
            return None
        if image is not None:
            return self._model.embed_image(decode_query_image(image))
        return self._model.embed_text(str(text))

    def _held(self, episode_id: str) -> None:
        """A 404 unless the store holds this episode (an id is never a path)."""
        if not is_episode_id(episode_id) or episode_id not in self.store:
            raise HTTPException(404, f"no episode {episode_id!r} in this store")

    def _gone(self, episode_id: str) -> None:
        """After a store error reading an episode: a 404 if it was evicted meanwhile."""
        if episode_id not in self.store:
            raise HTTPException(404, f"episode {episode_id!r} was evicted") from None

    def search_capabilities(self) -> dict[str, Any]:
        """Whether text and image queries can run on this store, and why not."""
        text_reason = None
        try:
            check_text_queries(self.store)
        except InputError as exc:
            text_reason = str(exc)
        has_episodes = self.store.embedder_model is not None
        return {
            "text": {"ok": text_reason is None, "reason": text_reason},
            "image": {
                "ok": has_episodes,
                "reason": None if has_episodes else "the store has no episode yet",
                "untrained": self.store.embedder_pretrained is False,
            },
        }

    # ----------------------------------------------------------------- routes
    def index(self, request: Request) -> Response:
        """The page."""
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    def store_info(self, request: Request) -> Response:
        """What the store is, for the page's header."""
        run = self.run_files.run()
        origin = self.origin()
        return JSONResponse(
            {
                "location": self.location,
                "backend": self.backend,
                "read_only": True,
                "episodes": len(self.store),
                "origin_ns": None if origin is None else str(origin),
                "embedder": {
                    "model": self.store.embedder_model,
                    "pretrained": self.store.embedder_pretrained,
                },
                "search": self.search_capabilities(),
                "untrained": bool(run and run.get("untrained"))
                or self.store.embedder_pretrained is False,
                "synthetic": _synthetic_models(self.store.embedder_model, run),
                "run": None if run is None else {"summary": run.get("summary") or {}},
                "max_results_cap": self.store.config.max_results_cap,
                "live_poll_seconds": self.config.live_poll_seconds,
            }
        )

    def timeline(self, request: Request) -> Response:
        """Every episode in brief, as columns (``?robot_id=``: one robot's, read now).

        Every robot's, as the live feed last took them from the store, encoded once per
        change: a page's first load does not wait for 10,000 episodes to be read and
        encoded, and what changed since reaches it over the live stream.
        """
        robot = request.query_params.get("robot_id") or None
        if robot is not None:
            return JSONResponse(_timeline(self.store.summaries(robot), self.origin()))
        version, summaries, origin = self.feed.snapshot()
        cached = self._timeline_cache
        if cached is None or cached[0] != version:
            cached = (version, bytes(JSONResponse(_timeline(summaries, origin)).body))
            self._timeline_cache = cached
        return Response(cached[1], media_type="application/json")

    def curve(self, request: Request) -> Response:
        """The surprise curve of ``scores.csv`` (``{"available": false}`` without one)."""
        curve = self.run_files.curve(self.origin())
        if curve is None:
            reason = (
                "a database store keeps no per-frame scores"
                if self.backend == "postgresql"
                else "no scores.csv in the store folder (written by `surprise-memory process`)"
            )
            return JSONResponse({"available": False, "reason": reason})
        return JSONResponse({"available": True, **curve})

    def episode_info(self, request: Request) -> Response:
        """One episode, with why it was kept."""
        episode_id = request.path_params["episode_id"]
        self._held(episode_id)
        try:
            rec = self.store.get(episode_id)
        except StoreError:
            self._gone(episode_id)
            raise
        origin = self.origin()
        why = why_kept(rec, self.run_files.run(), origin)
        snapshots = self.store.snapshot_notes([episode_id]).get(episode_id, [])
        return JSONResponse(episode_view(rec, origin, why, snapshots))

    async def place_info(self, request: Request) -> Response:
        """Whether an episode's place was seen since, and still looks the same.

        A few indexed reads and two embeddings, in a worker thread; a place keyframe, an
        episode without a pose, or a store without place keyframes answer why not.
        """
        episode_id = request.path_params["episode_id"]
        self._held(episode_id)

        def run() -> dict[str, Any]:
            try:
                rec = self.store.get(episode_id)
                grid = places_as_stored(self.store, self.places) if rec.kind == EPISODE else None
                status = place_status(self.store, rec, grid) if grid is not None else None
            except StoreError:
                self._gone(episode_id)
                raise
            return place_status_view(rec, status, self.origin(), kept=grid is not None)

        return JSONResponse(await run_in_threadpool(run))

    def frame(self, request: Request) -> Response:
        """One frame's JPEG, the bytes as stored."""
        episode_id, index = request.path_params["episode_id"], request.path_params["index"]

        def number() -> int:
            found = parse_count(index)
            if found is None:
                raise InputError(f"frame {index!r} of episode {episode_id}: not a frame number")
            return found

        return self._jpeg(episode_id, number)

    def thumbnail(self, request: Request) -> Response:
        """An episode's picture: its trigger frame's JPEG (the rule of every view)."""
        episode_id = request.path_params["episode_id"]

        def trigger() -> int:
            rec = self.store.get(episode_id)
            return trigger_frame_index(rec.frame_stamps_ns, rec.stamp_ns)

        return self._jpeg(episode_id, trigger)

    def _jpeg(self, episode_id: str, index: Callable[[], int]) -> Response:
        """The JPEG of one frame of a held episode; 404 for no such frame (or episode)."""
        self._held(episode_id)
        try:
            data = self.store.frame_jpeg(episode_id, index())
        except InputError as exc:  # not one of its frames
            raise HTTPException(404, str(exc)) from None
        except StoreError:
            self._gone(episode_id)
            raise
        # an episode's frames never change: the browser may keep them
        return Response(
            data, media_type="image/jpeg", headers={"Cache-Control": "private, max-age=86400"}
        )

    async def search(self, request: Request) -> Response:
        """Retrieval by text, an uploaded image (POST body), time, place and robot."""
        params = dict(request.query_params)
        image = await self._upload(request) if request.method == "POST" else None
        text = (params.get("text") or "").strip() or None
        if text is not None and image is not None:
            raise InputError("search by text or by image, not both at once")

        def run() -> dict[str, Any]:
            embedding = self._embed(text, image)
            origin = self.origin()
            query = search_query(
                params,
                origin,
                max_results_cap=self.store.config.max_results_cap,
                embedding=embedding,
                embedder_model=None if embedding is None else self.store.embedder_model,
            )
            hits = self.store.retrieve(query)
            if embedding is not None:
                ranked = "image" if image is not None else "text"
            else:
                ranked = "distance" if query.near is not None else "time"
            answer: dict[str, Any] = {"ranked_by": ranked, "hits": hit_views(hits, origin)}
            if partial_of(hits):  # the answer of part of the memory (a fleet unreachable)
                answer["partial"] = partial_of(hits)
            return answer

        return JSONResponse(await run_in_threadpool(run))

    async def _upload(self, request: Request) -> bytes:
        """The request body, refused (413) beyond ``max_upload_bytes``, or empty (400)."""
        limit = self.config.max_upload_bytes
        declared = parse_count(request.headers.get("content-length", ""))
        if declared is not None and declared > limit:
            raise HTTPException(413, f"the image is {declared} bytes; at most {limit} accepted")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise HTTPException(413, f"the image is over {limit} bytes")
            chunks.append(chunk)
        if size == 0:
            raise InputError("an image search needs the image as the request body")
        return b"".join(chunks)

    async def live(self, request: Request) -> Response:
        """Server-sent events: episodes added and evicted (:mod:`~surprise_memory.browser.live`).

        At most ``max_live_streams`` at once: each holds a connection and a queue for as long
        as its page is open; past the cap a page is told to come back later (503).
        """
        cap = self.config.max_live_streams
        if self.feed.pages >= cap:
            return JSONResponse(
                {"error": f"{cap} live streams are open (max_live_streams); try again later"},
                status_code=503,
                headers={"Retry-After": "10"},
            )
        queue = self.feed.subscribe()
        return StreamingResponse(
            self.feed.stream(queue),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Start from the store's episodes, watch it while serving, end the streams after."""
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self.store.refresh)
        summaries = await asyncio.to_thread(self.store.summaries)
        self.feed.reset(summaries, await asyncio.to_thread(self.origin))
        task = asyncio.create_task(
            watch(self.store, self.feed, self.config.live_poll_seconds, self.origin)
        )
        # a long recording's scores.csv takes seconds to read: not on the first page's time
        warm = asyncio.create_task(asyncio.to_thread(self._warm_curve))
        try:
            yield
        finally:
            self.feed.close()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await warm

    def _warm_curve(self) -> None:
        """Read the store's per-frame scores once, so the first page finds them ready."""
        try:
            self.run_files.curve(self.origin())
        except StoreError as exc:  # the page's request will say it again
            _LOG.warning("cannot read the surprise curve: %s", exc)


def _timeline(summaries: Sequence[EpisodeSummary], origin_ns: int | None) -> dict[str, Any]:
    return {
        "origin_ns": None if origin_ns is None else str(origin_ns),
        "count": len(summaries),
        **timeline_columns(summaries, origin_ns),
    }


def create_app(
    store: EpisodeStoreBackend,
    location: str,
    config: BrowserConfig,
    token: str | None = None,
    *,
    places: PlacesConfig | None = None,
) -> Starlette:
    """The browser's application over an open (read-only) store.

    Args:
        store: The store, opened with ``read_only=True``.
        location: Its folder or URI (shown on the page, password-free).
        config: Host, live period, upload limit, query device.
        token: The token every request must carry (or its sign-in cookie); None: none
            (only on the loopback: :func:`surprise_memory.access.check_exposure`).
        places: The "is it still there?" settings (None: the defaults).

    Returns:
        The ASGI application (``app.state.browser`` is its :class:`Browser`).

    """
    b = Browser(store, location, config, places)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        detail = exc.detail if exc.status_code != 404 or exc.detail != "Not Found" else None
        return _error(exc.status_code, detail or f"nothing at {request.url.path}")

    def handler(status: int) -> Callable[[Request, Exception], Awaitable[Response]]:
        async def handle(request: Request, exc: Exception) -> Response:
            return _error(status, str(exc))

        return handle

    async def internal(request: Request, exc: Exception) -> Response:
        return _error(500, f"internal error ({type(exc).__name__}); see the server's log")

    hosts = ["127.0.0.1", "localhost", "::1", "[::1]"] if is_loopback(config.host) else ["*"]
    middleware = [
        Middleware(_SecurityHeaders),
        Middleware(TrustedHostMiddleware, allowed_hosts=hosts),
    ]
    if token is not None:
        middleware.append(
            Middleware(
                token_gate,
                token=token,
                session_cookie=SESSION_COOKIE,
                open_paths=OPEN_PATHS,
                sign_in_page=SIGN_IN_PATH,
            )
        )
    app = Starlette(
        routes=[
            *(sign_in_routes(token, STATIC_DIR) if token is not None else []),
            Route("/", b.index),
            Route("/api/store", b.store_info),
            Route("/api/timeline", b.timeline),
            Route("/api/curve", b.curve),
            Route("/api/episodes/{episode_id}", b.episode_info),
            Route("/api/episodes/{episode_id}/frames/{index}", b.frame),
            Route("/api/episodes/{episode_id}/thumbnail", b.thumbnail),
            Route("/api/episodes/{episode_id}/place", b.place_info),
            Route("/api/search", b.search, methods=["GET", "POST"]),
            Route("/api/live", b.live),
            Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
        ],
        middleware=middleware,
        exception_handlers={
            HTTPException: http_error,
            EmbedderMismatchError: handler(400),
            InputError: handler(400),
            ModelLoadError: handler(503),
            StoreUnreachableError: handler(503),
            StoreError: handler(500),
            Exception: internal,
        },
        lifespan=b.lifespan,
    )
    app.state.browser = b
    return app


SYNTHETIC_MODEL_NAME = "synthetic-trained-tiny"
"""``perception.encoders.SYNTHETIC_MODEL_NAME``, spelt here so the page does not import torch."""


def _synthetic_models(embedder_model: str | None, run: dict[str, Any] | None) -> bool:
    """True when the store's models are ``synthetic-trained-tiny`` (the page says so)."""
    names = [embedder_model or ""]
    models = (run or {}).get("models") or {}
    names += [str((models.get(part) or {}).get("name", "")) for part in ("encoder", "embedder")]
    return any(SYNTHETIC_MODEL_NAME in name for name in names)
