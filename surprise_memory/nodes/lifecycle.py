"""The managed-node base of the live nodes (``rclpy.lifecycle``): what each transition does.

* **configure** — ``setup()``: build from the parameters (load the models, open the
  store, create publishers, timers and diagnostics). Slow, and it can fail: then every
  entity it created is destroyed, one error line says why, the node stays *unconfigured*
  with its process up, and configure can be tried again (e.g. once the disk is mounted).
* **activate** — ``subscribe()``: create the subscriptions and services, so data flows.
* **deactivate** — destroy them again: the node pauses (models and state kept).
* **cleanup** — ``teardown()``: stop threads, close the store, drop the models (their GPU
  memory is returned to the driver), destroy what configure created.
* **shutdown** — from any state: ``flush()`` first where the node was configured (the
  scorer publishes the events pending in its gate, the memory node stores its pending
  episodes), then as cleanup.

With the parameter ``autostart`` (default true) :func:`~surprise_memory.nodes.runtime.run_node`
configures and activates the node at start, so ``ros2 run`` and the tests see a running
node; a failed configure then ends the process with status 2, as before. With
``autostart:=false`` a lifecycle manager drives the transitions through the standard
services (``<node>/change_state``, ``<node>/get_state``).
"""

from __future__ import annotations

import gc
from typing import Any

from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from surprise_memory.config import ComponentConfig, NodeConfig, settings_of
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.parameters import Applier, LiveSettings, declare_settings

__all__ = ["ManagedNode"]

# the node's entity lists and how each is destroyed
_ENTITIES = {
    "subscriptions": "destroy_subscription",
    "services": "destroy_service",
    "clients": "destroy_client",
    "timers": "destroy_timer",
    "publishers": "destroy_publisher",
    "guards": "destroy_guard_condition",
}


class ManagedNode(LifecycleNode):
    """A lifecycle node whose subclass supplies ``setup``/``subscribe``/``teardown``/``flush``.

    The parameters are declared at construction, so they can be read and set while the
    node is unconfigured; ``setup`` gets their values at each configure.

    Args:
        name: Node name.
        configs: The node's config classes (their settings become parameters).

    """

    def __init__(self, name: str, configs: tuple[type[ComponentConfig], ...]) -> None:
        super().__init__(name)
        self._configs = configs
        declare_settings(self, *configs)
        self.autostart = bool(self.get_parameter("autostart").value)
        self._configured: dict[str, set[int]] = {}  # entities of configure, by kind
        self._activated: dict[str, set[int]] = {}
        self._settings: LiveSettings | None = None
        self.failure = ""  # why the last configure failed

    # --- what a subclass supplies
    def setup(self, values: dict[str, Any]) -> None:
        """Build from the parameter values (configure); raise to fail."""
        raise NotImplementedError

    def subscribe(self) -> None:
        """Create the subscriptions and services (activate)."""
        raise NotImplementedError

    def teardown(self) -> None:
        """Stop threads, close files, drop models (cleanup, and after a failed configure)."""

    def flush(self) -> None:
        """Publish or store what is pending (shutdown of a configured node)."""

    def apply_live(
        self, values: dict[str, Any], appliers: dict[type[ComponentConfig], Applier]
    ) -> None:
        """From ``setup``: apply parameter changes live until cleanup (:class:`LiveSettings`)."""
        self._settings = LiveSettings(self, values, self._configs, appliers)

    def apply_parts(
        self,
        values: dict[str, Any],
        stats: NodeStats,
        appliers: dict[type[ComponentConfig], Applier],
    ) -> None:
        """From ``setup``: :meth:`apply_live` with the node's own diagnostics settings added.

        Args:
            values: The parameter values of this configure.
            stats: The node's counters (``input_silent_seconds`` applies to them, and is
                reported as ``applied.input_silent_seconds``).
            appliers: The parts' appliers, config class -> applier.

        """
        stats.add_values(lambda: {"applied.input_silent_seconds": stats.input_silent_seconds})
        own: dict[type[ComponentConfig], Applier] = {
            NodeConfig: lambda c: stats.set_input_silent_seconds(c.input_silent_seconds)
        }
        self.apply_live(values, {**own, **appliers})

    # --- transitions
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Load models and open the store; on failure, release everything and say why."""
        before = self._entities()
        values = {
            spec.name: self.get_parameter(spec.name).value
            for cls in self._configs
            for spec in settings_of(cls)
        }
        try:
            self.setup(values)
        except Exception as exc:  # any failure: one clear line, the node stays up
            self.failure = f"{type(exc).__name__}: {exc}"
            self.get_logger().error(f"configure failed: {self.failure}")
            self._release(self._since(before))
            return TransitionCallbackReturn.FAILURE
        self.failure = ""
        self._configured = self._since(before)
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Start the subscriptions and services."""
        before = self._entities()
        self.subscribe()
        self._activated = self._since(before)
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Pause: no more input; models and state are kept."""
        self._destroy(self._activated)
        self._activated = {}
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Free the models and close the store."""
        self._release(self._configured)
        self._configured = {}
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Flush what is pending, then free everything (from any state)."""
        if state.label == "active":
            self._destroy(self._activated)
            self._activated = {}
        if state.label in ("active", "inactive"):
            try:
                self.flush()
            finally:
                self._release(self._configured)
                self._configured = {}
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """A transition raised: release everything and go back to unconfigured."""
        self._destroy(self._activated)
        self._release(self._configured)
        self._activated, self._configured = {}, {}
        return TransitionCallbackReturn.SUCCESS

    @property
    def state_label(self) -> str:
        """The current lifecycle state (``unconfigured``, ``inactive``, ``active``...)."""
        return str(self._state_machine.current_state[1])

    def close(self) -> None:
        """Shut down from whatever state the node is in (``run_node`` calls it at exit)."""
        if self.state_label != "finalized":
            self.trigger_shutdown()

    # --- entity bookkeeping
    def _entities(self) -> dict[str, set[int]]:
        return {kind: {id(e) for e in getattr(self, kind)} for kind in _ENTITIES}

    def _since(self, before: dict[str, set[int]]) -> dict[str, set[int]]:
        now = self._entities()
        return {kind: now[kind] - before[kind] for kind in _ENTITIES}

    def _destroy(self, entities: dict[str, set[int]]) -> None:
        for kind, ids in entities.items():
            for entity in [e for e in getattr(self, kind) if id(e) in ids]:
                getattr(self, _ENTITIES[kind])(entity)

    def _release(self, entities: dict[str, set[int]]) -> None:
        if self._settings is not None:  # unconfigured: changes are taken at configure
            self._settings.detach()
            self._settings = None
        try:
            self.teardown()
        finally:
            self._destroy(entities)
            gc.collect()
            _empty_gpu_cache()


def _empty_gpu_cache() -> None:
    """Return freed GPU memory to the driver (cleanup of a node whose models were on CUDA)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
