"""One service called from a private node, so it works from any callback of the host node.

:class:`ServiceCaller` is used by the agents' clients
(:class:`~surprise_memory.agents.ros_client.EpisodicMemoryClient`,
:class:`~surprise_memory.agents.ros_navigation.GoToEpisodeClient`).

Why a private node: an agent usually calls the memory from inside a callback of its own
node (a timer, a subscription), often under a single-threaded executor. That executor is
busy running the callback, so it could never deliver the service's answer to a client on
the same node, whatever its callback group: the call would always time out. The client's
service client therefore lives on a small hidden node of its own (same context, same
namespace) that the call spins itself, under a lock; this works from any callback, under
any executor, and with no executor at all.
"""

from __future__ import annotations

import itertools
import os
import threading
from typing import Any

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from surprise_memory.errors import ServiceTimeoutError

__all__ = ["ServiceCaller"]

_client_ids = itertools.count()


class ServiceCaller:
    """Calls one service from a private node, so it works from any callback of the host.

    See the module's docstring for why the client cannot live on the host node.

    Args:
        node: The host node (its context and namespace are used; nothing is added to it).
        srv_type: The service type.
        service: Its name; a relative name resolves in the host node's namespace.

    """

    def __init__(self, node: Node, srv_type: Any, service: str) -> None:
        self._lock = threading.Lock()  # one call at a time spins the private executor
        self._node = rclpy.create_node(
            f"_episodic_memory_client_{os.getpid()}_{next(_client_ids)}",
            namespace=node.get_namespace(),
            context=node.context,
            start_parameter_services=False,
        )
        self._executor = SingleThreadedExecutor(context=node.context)
        self._executor.add_node(self._node)
        self._client: Any = self._node.create_client(srv_type, service)

    @property
    def service_name(self) -> str:
        """The resolved service name."""
        return str(self._client.srv_name)

    def call(self, request: Any, timeout: float) -> Any:
        """Send ``request``; returns the response.

        Raises:
            ServiceTimeoutError: The service is not there, or did not answer in ``timeout`` s.

        """
        name = self.service_name
        with self._lock:
            if not self._client.wait_for_service(timeout_sec=timeout):
                raise ServiceTimeoutError(f"service {name} is not available after {timeout} s")
            future = self._client.call_async(request)
            self._executor.spin_until_future_complete(future, timeout_sec=timeout)
            if not future.done():
                self._client.remove_pending_request(future)
                raise ServiceTimeoutError(f"service {name} did not answer within {timeout} s")
        result = future.result()
        if result is None:
            raise ServiceTimeoutError(f"service {name} failed: {future.exception()}")
        return result

    def destroy(self) -> None:
        """Remove the service client and its private node (idempotent)."""
        with self._lock:
            if self._node is not None:
                self._executor.remove_node(self._node)
                self._executor.shutdown()
                self._node.destroy_node()
                self._node = None  # type: ignore[assignment]
