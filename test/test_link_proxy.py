"""The fault tests' stand-in for a robot's Wi-Fi: its cuts reach a client that is waiting.

A client blocked on an answer is the case that matters (a store call in progress). The
proxy once closed its sockets while its own threads were blocked reading them; the
kernel then kept the connections open, and the client heard of no cut until its own
bound ran out (an hour, inside a schema migration).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from link_proxy import LinkProxy


@pytest.fixture
def silent_server() -> Iterator[tuple[str, int]]:
    """A TCP server that accepts and reads but never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()
    listener.close()
    for conn in held:
        conn.close()


def _waiting_client(port: int) -> socket.socket:
    client = socket.create_connection(("127.0.0.1", port), timeout=5.0)
    client.sendall(b"a request")
    return client


def _cut_seen_within(client: socket.socket, seconds: float) -> float:
    """How long the client, blocked on an answer, waited to learn the link was cut."""
    client.settimeout(seconds)
    t0 = time.monotonic()
    try:
        data = client.recv(16)
    except ConnectionResetError:
        return time.monotonic() - t0
    except TimeoutError:
        pytest.fail(f"no cut seen within {seconds} s")
    assert data == b"", data  # a clean close would do too, never an answer
    return time.monotonic() - t0


@pytest.mark.parametrize("fault", ["cut", "refuse"])
def test_a_cut_reaches_a_client_waiting_for_an_answer(
    silent_server: tuple[str, int], fault: str
) -> None:
    with LinkProxy(silent_server) as link:
        client = _waiting_client(link.port)
        time.sleep(0.2)  # the proxy's reader is blocked on the client's socket now
        act: Callable[[], None] = getattr(link, fault)
        act()
        assert _cut_seen_within(client, 3.0) < 1.0
        client.close()


def test_the_link_back_resets_connections_accepted_into_the_black_hole(
    silent_server: tuple[str, int],
) -> None:
    with LinkProxy(silent_server) as link:
        link.black_hole()
        client = _waiting_client(link.port)
        time.sleep(0.2)
        link.pass_traffic()
        assert _cut_seen_within(client, 3.0) < 1.0
        client.close()
