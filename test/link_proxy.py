"""A TCP proxy that stands in for a robot's Wi-Fi between a client and a real server.

:class:`LinkProxy` listens on a loopback port and forwards each connection to a target (a
TCP address or a Unix socket, e.g. the test's PostgreSQL). The test controls the link:

* ``pass_traffic()``: forward both ways (the default);
* ``refuse()``: new connections are refused (nothing listens), open ones are cut, as when
  the server's host is down;
* ``black_hole()``: new connections are accepted and nothing is ever answered; open ones
  stop forwarding (bytes are swallowed both ways), as when the radio link is gone but the
  sockets look alive;
* ``set_latency(s)``: every chunk waits ``s`` seconds in each direction;
* ``cut()``: reset every open connection now (RST);
* ``cut_next_commit()``: the next ``COMMIT`` a client sends reaches the server, and the
  connection is reset before the answer comes back: the client cannot know whether its
  transaction committed (an ambiguous commit);
* ``cut_open_on_use()``: each connection open now is reset when its client next sends
  something, before it reaches the server (a connection the server dropped while it was
  idle, which the client finds only by using it); new connections pass.

Threads only (an accept thread; per connection and direction a reader and a sender, so a
peer that stops reading never holds up the other direction); every socket is closed by
:meth:`close`. Used by the fleet fault tests and
``benchmarks/bench_fleet_link.py``.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

__all__ = ["LinkProxy"]

_CHUNK = 65536
_COMMIT = b"COMMIT"


def _stop_listening(listener: socket.socket) -> None:
    """Close a listening socket; shutdown first, or a thread blocked in accept() keeps it open."""
    with contextlib.suppress(OSError):
        listener.shutdown(socket.SHUT_RDWR)
    listener.close()


class _Direction:
    """One direction of a connection: chunks queued with their due times, sent in order.

    Each direction sends from its own thread, so a peer that does not read (its buffer
    full) holds up only the bytes going to it, never the other direction.
    """

    def __init__(self, dst: socket.socket, on_error: Callable[[], None]) -> None:
        self.dst = dst
        self._on_error = on_error
        self._cond = threading.Condition()
        self._queue: deque[tuple[float, bytes]] = deque()
        self._closed = False
        threading.Thread(target=self._send, name="deliver", daemon=True).start()

    def put(self, due: float, data: bytes) -> None:
        with self._cond:
            self._queue.append((due, data))
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _send(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                due, data = self._queue[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                self._queue.popleft()
            try:
                self.dst.sendall(data)
            except OSError:
                self._on_error()
                return


class _Connection:
    """One client connection and its upstream socket, pumped by the proxy's rules."""

    def __init__(
        self, proxy: LinkProxy, client: socket.socket, upstream: socket.socket | None
    ) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.closed = threading.Event()
        self._drop_replies = False  # after an ambiguous commit: nothing more reaches the client
        self.cut_on_use = False  # reset at the client's next bytes, which never go up
        self._directions: list[_Direction] = []
        if upstream is None:  # accepted into a black hole: read and swallow until closed
            threading.Thread(target=self._swallow, name="sink", daemon=True).start()
            return
        up, down = _Direction(upstream, self.close), _Direction(client, self.close)
        self._directions = [up, down]
        for name, src, to in (("up", client, up), ("down", upstream, down)):
            threading.Thread(target=self._pump, args=(src, to), name=name, daemon=True).start()

    def _swallow(self) -> None:
        while not self.closed.is_set():
            try:
                if not self.client.recv(_CHUNK):
                    break
            except OSError:
                break
        self.close()

    def _pump(self, src: socket.socket, to: _Direction) -> None:
        """Read from ``src`` and queue for the other side with the link's delay (or swallow)."""
        while not self.closed.is_set():
            try:
                data = src.recv(_CHUNK)
            except OSError:
                data = b""
            if not data:
                self.close()
                return
            mode, latency = self.proxy.state()
            if mode == "black_hole":
                continue  # swallowed: the peer waits for ever
            if src is self.client and self.cut_on_use:
                self.close(reset=True)
                return
            if src is self.client and _COMMIT in data and self.proxy.take_commit_cut():
                with contextlib.suppress(OSError):
                    to.dst.sendall(data)  # the server commits ...
                self._drop_replies = True
                time.sleep(0.2)  # ... and its answer is lost with the link
                self.close(reset=True)
                return
            if src is not self.client and self._drop_replies:
                continue
            to.put(time.monotonic() + latency, data)

    def close(self, *, reset: bool = False) -> None:
        """Close both sockets; with ``reset`` the client gets an RST, not a clean FIN."""
        if self.closed.is_set():
            return
        self.closed.set()
        for direction in self._directions:
            direction.close()
        for sock in (self.client, self.upstream):
            if sock is None:
                continue
            with contextlib.suppress(OSError):
                if reset:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                # close() alone does not wake a pump blocked in recv() on the socket, and
                # until that recv returns the kernel keeps the connection open: the peer
                # hears of no cut (a client waiting for an answer waited for ever).
                # shutdown(SHUT_RD) wakes it, sends nothing; the last close sends FIN or RST
                sock.shutdown(socket.SHUT_RD)
            with contextlib.suppress(OSError):
                sock.close()


class LinkProxy:
    """A controllable TCP link from ``127.0.0.1:port`` to ``target``.

    Args:
        target: ``(host, port)`` of the server, or the path of its Unix socket.

    Attributes:
        port: The loopback port clients connect to (fixed for the proxy's life).

    """

    def __init__(self, target: tuple[str, int] | str | Path) -> None:
        self._target = target
        self._lock = threading.Lock()
        self._mode = "pass"
        self._latency = 0.0
        self._commit_cuts = 0
        self._connections: list[_Connection] = []
        self._closed = False
        self._listener: socket.socket | None = None
        self.port = 0
        self._listen()

    # ----------------------------------------------------------------- control
    def pass_traffic(self) -> None:
        """Forward both ways again, without delay.

        Connections accepted into the black hole had no server behind them: they are reset.
        """
        with self._lock:
            self._mode, self._latency = "pass", 0.0
            sinks = [c for c in self._connections if c.upstream is None]
        for conn in sinks:
            conn.close(reset=True)
        self._listen()

    def refuse(self) -> None:
        """Refuse new connections and cut the open ones (the server's host is down)."""
        with self._lock:
            self._mode = "refuse"
            listener, self._listener = self._listener, None
        if listener is not None:
            _stop_listening(listener)
        self.cut()

    def black_hole(self) -> None:
        """Accept, never answer: open and new connections swallow every byte."""
        with self._lock:
            self._mode = "black_hole"
        self._listen()

    def set_latency(self, seconds: float) -> None:
        """Delay every chunk by ``seconds`` in each direction (black-holed connections reset)."""
        self.pass_traffic()
        with self._lock:
            self._latency = seconds

    def cut(self) -> None:
        """Reset every open connection now."""
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close(reset=True)

    def cut_next_commit(self) -> None:
        """Let the next client COMMIT reach the server, then reset before its answer."""
        with self._lock:
            self._commit_cuts += 1

    def cut_open_on_use(self) -> None:
        """Reset each open connection when its client next sends (nothing reaches the server)."""
        with self._lock:
            for conn in self._connections:
                conn.cut_on_use = True

    @property
    def commit_cuts_pending(self) -> int:
        """Armed commit cuts that have not happened yet."""
        with self._lock:
            return self._commit_cuts

    def close(self) -> None:
        """Stop listening and close every connection."""
        with self._lock:
            self._closed = True
            listener, self._listener = self._listener, None
        if listener is not None:
            _stop_listening(listener)
        self.cut()

    def __enter__(self) -> LinkProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- used by connections
    def state(self) -> tuple[str, float]:
        """The link's mode and latency now."""
        with self._lock:
            return self._mode, self._latency

    def take_commit_cut(self) -> bool:
        """Whether this COMMIT is to be cut (consumes one armed cut)."""
        with self._lock:
            if self._commit_cuts <= 0:
                return False
            self._commit_cuts -= 1
            return True

    # ----------------------------------------------------------------- internals
    def _listen(self) -> None:
        with self._lock:
            if self._listener is not None or self._closed:
                return
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(64)
            self.port = listener.getsockname()[1]
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed by refuse() or close()
            upstream = None
            if self.state()[0] != "black_hole":
                try:
                    upstream = self._dial()
                except OSError:
                    client.close()
                    continue
            conn = _Connection(self, client, upstream)
            with self._lock:  # refuse() may have run meanwhile: look again under the lock
                refused = self._mode == "refuse"
                if not refused:
                    self._connections = [c for c in self._connections if not c.closed.is_set()]
                    self._connections.append(conn)
            if refused:
                conn.close(reset=True)

    def _dial(self) -> socket.socket:
        if isinstance(self._target, tuple):
            sock = socket.create_connection(self._target, timeout=5.0)
        else:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(5.0)
            sock.connect(str(self._target))
        sock.settimeout(None)
        return sock
