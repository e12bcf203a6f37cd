"""The ``go_to_episode`` service inside a node: an episode to a Nav2 goal.

:class:`NavigationPart` is created by :class:`~surprise_memory.nodes.memory_part.MemoryPart`,
so ``memory_node`` and ``pipeline_node`` both serve it, on their store and with their
embedder. The choice of the episode and the goal's geometry are the core's
(:mod:`surprise_memory.memory.navigation`); here are the request, the node's clock, tf and
the sending (:mod:`surprise_memory.nodes.goal_sender`), which follows each goal: beside
``go_to_episode`` the part serves ``navigation_status`` (a goal's state and Nav2's distance
remaining) and ``cancel_navigation`` (our goal by id, or the current one), and puts the
current goal on ``/diagnostics``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup

from surprise_memory.config import ComponentConfig, NavigationConfig, PlacesConfig, settings_of
from surprise_memory.errors import StoreError, SurpriseMemoryError
from surprise_memory.memory.navigation import (
    GoalQuery,
    GoalRefusedError,
    NavigationGoal,
    choose_episode,
    plan_goal,
)
from surprise_memory.memory.navigation_goals import CANCELLED_STATES, GoalStatus, cancel_line
from surprise_memory.memory.place_status import episode_place_status
from surprise_memory.memory.places import PlaceStatus
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.pose_trust import TrustRule
from surprise_memory.memory.store import EpisodeStoreBackend
from surprise_memory.memory.store.records import (
    EpisodeRecord,
    host_session_id,
    resolve_robot_id,
)
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.goal_messages import goal_status_to_msg
from surprise_memory.nodes.goal_sender import GoalSender, goal_msg
from surprise_memory.nodes.messages import episode_to_msg, time_to_ns
from surprise_memory.nodes.parameters import Applier
from surprise_memory.nodes.tf_lookup import TransformLookup
from surprise_memory.perception.encoders import ImageTextEmbedder
from surprise_memory.srv import CancelNavigation, GoToEpisode, NavigationStatus

__all__ = ["NavigationPart", "goal_query_from_request"]

_IF_LATE = (
    "if it accepts later, this node asks it at once to cancel the goal (navigation_status "
    "tells what came of it)"
)


class NavigationPart:
    """Serves ``go_to_episode``, ``navigation_status`` and ``cancel_navigation``.

    ``go_to_episode`` chooses an episode, makes its goal and sends it to Nav2; the other two
    follow and cancel the goals sent.

    Each request is answered with the goal's id, state and how it went (``sent_via``), or
    ``success=false`` and why not; the node keeps serving. Counted in the diagnostics:
    ``goals_sent`` (accepted, or acknowledged on the topic), ``goals_refused`` (the request
    or the episode did not allow a goal, or no navigator was there: nothing sent),
    ``goals_rejected``, ``goals_pending`` (not answered in time: followed, and the navigator
    asked at once to cancel it if it accepts late), ``goals_cancelled``; the current goal
    as ``goal.*`` (id, state, distance remaining) and the remembered goals per state as
    ``goals.<state>``.

    Args:
        node: The host node.
        stats: The host's counters.
        store: The episode store.
        embedder: Embeds text queries (refused while its weights are random).
        embed_lock: Held while the embedder runs (the episode writer shares it).

    """

    def __init__(
        self,
        node: Any,
        stats: NodeStats,
        *,
        store: EpisodeStoreBackend,
        embedder: ImageTextEmbedder,
        embed_lock: threading.Lock,
        places_config: Callable[[], PlacesConfig],
    ) -> None:
        self._node = node
        self._stats = stats
        self._store = store
        self._embedder = embedder
        self._embed_lock = embed_lock
        self._places_config = places_config

    def setup(self, values: Mapping[str, Any]) -> None:
        """Configure: the settings, the goal publisher or action client."""
        self._config = NavigationConfig.from_mapping(values)
        self._own_robot = resolve_robot_id(None, self._store.config.robot_id)
        self._session = host_session_id()
        # the action's answers come in another group than the service's (which waits)
        self._sender = GoalSender(self._node, self._config, ReentrantCallbackGroup())
        self._stats.set(goal_via=self._sender.via, session_id=self._session)
        self._stats.add_values(self._applied)
        self._stats.add_values(self._goal_values)

    @property
    def map_id(self) -> str:
        """The map the robot is on now (``map_id``; "" = unknown), stored with each episode."""
        return self._config.map_id

    def appliers(self) -> dict[type[ComponentConfig], Applier]:
        """Live changes (frame, stand-off, timeout; the transport and names are read-only)."""
        return {NavigationConfig: self._apply}

    def _apply(self, config: NavigationConfig) -> None:
        self._config = config

    def _applied(self) -> dict[str, object]:
        """The writable settings as the next request uses them (``applied.<name>``)."""
        writable = (s.name for s in settings_of(NavigationConfig) if not s.read_only)
        return {f"applied.{name}": getattr(self._config, name) for name in writable}

    def _goal_values(self) -> dict[str, object]:
        """The current goal (``goal.*``) and the remembered goals per state (``goals.*``)."""
        book = self._sender.book
        out: dict[str, object] = {f"goals.{k}": v for k, v in sorted(book.counts().items())}
        current = book.get()
        if current is not None:
            out |= {
                "goal.id": current.goal_id,
                "goal.episode": current.episode_id,
                "goal.state": current.state,
                "goal.preempted_by": current.preempted_by,
                "goal.distance_remaining_m": f"{current.distance_remaining_m:.2f}",
                "goal.eta_s": f"{current.eta_s:.1f}",
            }
        return out

    def subscribe(self) -> None:
        """Activate: the services (``go_to_episode`` in its own thread: it waits for Nav2).

        The status and cancel services answer in another group, while a request waits.
        """
        self._node.create_service(
            GoToEpisode,
            "go_to_episode",
            self._on_go_to_episode,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )
        group = ReentrantCallbackGroup()
        self._node.create_service(
            NavigationStatus, "navigation_status", self._on_status, callback_group=group
        )
        self._node.create_service(
            CancelNavigation, "cancel_navigation", self._on_cancel, callback_group=group
        )

    def teardown(self) -> None:
        """Cleanup: the action client (the node's lists hold the rest); let the model go."""
        if "_sender" in self.__dict__:
            self._sender.destroy()
        self.__dict__.pop("_embedder", None)

    def _on_go_to_episode(
        self, request: GoToEpisode.Request, response: GoToEpisode.Response
    ) -> GoToEpisode.Response:
        config = self._config  # one request, one set of settings
        status: GoalStatus | None = None
        try:
            goal = self._goal(request, config, response)
            response.goal = goal_msg(self._node, goal.pose)
            if not request.dry_run:
                earlier = self._sender.book.active()
                status = self._sender.send(
                    response.goal, config.goal_timeout_seconds, goal.episode.id, _IF_LATE
                )
        except Exception as exc:  # a bad request, or tf/Nav2 failing, never ends the node
            response.success = False
            response.sent_via = ""
            response.message = str(exc)
            if isinstance(exc, SurpriseMemoryError):
                self._stats.count("goals_refused")
            else:
                response.message = f"{type(exc).__name__}: {exc}"
                self._stats.reject("goal", response.message)
            self._node.get_logger().warning(f"go_to_episode: no goal: {response.message}")
            return response
        ep = goal.episode
        what = (
            f"episode {ep.id} ({ep.robot_id}): goal ({goal.pose.x:.2f}, {goal.pose.y:.2f}, "
            f"{goal.pose.z:.2f}) in {goal.pose.frame_id}, stand-off {goal.standoff_m:g} m"
        )
        note = f"; {goal.note}" if goal.note else ""
        if status is None:
            response.success = True
            response.message = f"{what}; dry run, not sent{note}"
            self._node.get_logger().info(f"go_to_episode: {response.message}")
            return response
        response.goal_id, response.state, response.sent_via = (
            status.goal_id,
            status.state,
            status.sent_via,
        )
        if earlier is not None:
            before = self._sender.book.get(earlier.goal_id)
            if before is not None and before.preempted_by == status.goal_id:
                response.preempted = earlier.goal_id
        response.success = status.state in ("running", "sent")
        counter = {"running": "goals_sent", "sent": "goals_sent", "pending": "goals_pending"}
        self._stats.count(counter.get(status.state, "goals_rejected"))
        response.message = (
            f"{what}; goal {status.goal_id} via {status.sent_via}: {status.state}"
            + (f" ({status.message})" if status.message else "")
            + (f"; preempted goal {response.preempted}" if response.preempted else "")
            + note
        )
        # one severity per call site (rclpy refuses a change between calls)
        if response.success:
            self._node.get_logger().info(f"go_to_episode: {response.message}")
        else:
            self._node.get_logger().warning(f"go_to_episode: {response.message}")
        return response

    def _on_status(
        self, request: NavigationStatus.Request, response: NavigationStatus.Response
    ) -> NavigationStatus.Response:
        status = self._sender.book.get(request.goal_id)
        response.success = status is not None
        response.status = goal_status_to_msg(status)
        if status is None:
            response.message = (
                f"no goal {request.goal_id} of this node (it keeps the last 64)"
                if request.goal_id
                else "no goal was sent yet"
            )
        else:
            response.message = status.progress_line()
        return response

    def _on_cancel(
        self, request: CancelNavigation.Request, response: CancelNavigation.Response
    ) -> CancelNavigation.Response:
        try:
            ok, status = self._sender.cancel(request.goal_id, self._config.goal_timeout_seconds)
        except SurpriseMemoryError as exc:
            response.success = False
            response.message = str(exc)
            response.status = goal_status_to_msg(None)
            return response
        response.success = ok
        response.status = goal_status_to_msg(status)
        response.message = cancel_line(ok, status)
        if ok and (status.state in CANCELLED_STATES or not status.done):
            self._stats.count("goals_cancelled")  # (not one that had ended before)
        if ok:
            self._node.get_logger().info(f"cancel_navigation: {response.message}")
        else:  # the navigator refused or did not confirm: the robot may drive on
            self._node.get_logger().warning(f"cancel_navigation: {response.message}")
        return response

    def _goal(
        self, request: GoToEpisode.Request, config: NavigationConfig, response: Any
    ) -> NavigationGoal:
        embedding = None
        if request.text:
            if not self._embedder.pretrained:
                raise GoalRefusedError(
                    f"text query {request.text!r}: the node's embedder "
                    f"{self._embedder.model_name!r} has random weights, so the text would pick "
                    "an episode at random; give an episode_id, a time window or a place"
                )
            with self._embed_lock:
                embedding = self._embedder.embed_text([request.text])[0]
        query = goal_query_from_request(request, embedding, self._embedder.model_name)
        now = self._node.get_clock().now().nanoseconds
        episode, partial = choose_episode(self._store, query, self._own_robot, now)
        response.episode = episode_to_msg(episode, (), self._place_status(episode))

        def transform_of(frame: str, stamp_ns: int) -> tuple[Pose | None, str]:
            with TransformLookup(self._node) as tf:  # tf heard only while needed
                return tf.lookup(
                    config.navigation_frame, frame, stamp_ns, config.goal_timeout_seconds
                )

        return plan_goal(
            episode,
            config.navigation_frame,
            own_robot=self._own_robot,
            now_ns=now,
            session_id=self._session,
            fixed_frames=config.fixed_frame_names,
            standoff_m=config.goal_standoff_meters if request.standoff < 0 else request.standoff,
            allow_other_robots=request.allow_other_robots,
            transform_of=transform_of,
            chosen=partial,
            facing=config.goal_facing,
            trust=TrustRule(config.map_id, config.max_goal_uncertainty_m, request.trust_pose),
        )

    def _place_status(self, episode: EpisodeRecord) -> PlaceStatus | None:
        """When the goal's place was last seen (any robot's views); None when unknown."""
        try:
            return episode_place_status(self._store, episode, self._places_config())
        except StoreError as exc:  # the goal does not depend on it
            self._node.get_logger().warning(
                f"go_to_episode: the place status of {episode.id} is unknown ({exc})",
                throttle_duration_sec=60.0,
            )
            return None


def goal_query_from_request(
    request: GoToEpisode.Request, embedding: Any, embedder_model: str
) -> GoalQuery:
    """The core's :class:`GoalQuery` from a request (zero and empty fields = not given).

    Args:
        request: The service request.
        embedding: The request's text, embedded (None without text).
        embedder_model: The model that embedded it.

    """
    loc = request.location
    use_location = request.use_location
    return GoalQuery(
        episode_id=request.episode_id or None,
        embedding=embedding,
        embedder_model=embedder_model if embedding is not None else None,
        start_ns=time_to_ns(request.start) or None,
        end_ns=time_to_ns(request.end) or None,
        near=(loc.x, loc.y, loc.z) if use_location else None,
        near_frame=(request.location_frame or None) if use_location else None,
        radius_m=float(request.radius) if use_location and request.radius != 0 else None,
        robot_id=request.robot_id or None,
        allow_other_robots=request.allow_other_robots,
        camera=request.camera or None,
    )
