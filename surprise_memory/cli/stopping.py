"""How a command stops early: Ctrl-C and SIGTERM alike, and a reader that closed the pipe.

Decided (issue 30): SIGINT (Ctrl-C) and SIGTERM (``kill``, a service manager, ``docker
stop``) stop a command the same way. What it was doing is cut short, the cleanup of every
``with`` and ``finally`` runs (stores closed, a batch's summary written), one line says
``interrupted``, and the exit status is 128 + the signal: 130 after SIGINT, 143 after
SIGTERM, as a shell reports a command that a signal ended, so a script or a supervisor
tells an interrupted run from a finished one. SIGTERM raises :class:`Terminated`, a
:class:`KeyboardInterrupt`, so whatever cleans up after Ctrl-C cleans up after SIGTERM too.

A SIGINT that the caller ignored when it started the command (a background job of a
non-interactive shell, ``cmd &``) stays ignored, as Python leaves it: Ctrl-C at that
terminal is not meant for it, and SIGTERM stops it. ``serve`` is the one exception, since
uvicorn handles both signals itself; it exits 130 or 143 all the same
(:func:`raise_for_signal`).

A reader that closes the pipe early (``surprise-memory query STORE --json | head``) ends
the command quietly with status 141 (128 + SIGPIPE), as Unix tools end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from types import FrameType

__all__ = ["Terminated", "exit_status", "install_sigterm", "quiet_broken_pipe", "raise_for_signal"]

BROKEN_PIPE_STATUS = 128 + 13  # SIGPIPE


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: stop as after Ctrl-C (a KeyboardInterrupt, so the same cleanup runs)."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def install_sigterm() -> None:
    """Make SIGTERM raise :class:`Terminated` (main thread only; elsewhere nothing changes)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)


def exit_status(interrupt: KeyboardInterrupt) -> int:
    """128 + the signal that stopped the command: 143 for SIGTERM, 130 for SIGINT."""
    return 128 + (signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT)


def raise_for_signal(signum: int | None) -> None:
    """Raise what :func:`exit_status` turns into 128 + ``signum`` (None: nothing to raise).

    For a server that caught the signal itself (uvicorn) and returned normally.
    """
    if signum == signal.SIGTERM:
        raise Terminated
    if signum is not None:
        raise KeyboardInterrupt


def quiet_broken_pipe() -> int:
    """After a BrokenPipeError on stdout: nothing more is written there; the exit status.

    stdout is pointed at /dev/null, so the interpreter's final flush does not fail again.
    """
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return BROKEN_PIPE_STATUS
