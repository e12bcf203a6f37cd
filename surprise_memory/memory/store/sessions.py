"""The session an episode was stored in: the machine's boot, where ``odom`` starts anew.

:func:`host_session_id` names this machine's session; :func:`check_session_id` checks one
given (a copy's, a recording's). Re-exported by :mod:`.records`, where the records use them.
"""

from __future__ import annotations

import functools
import secrets
from pathlib import Path

from surprise_memory.errors import InputError

__all__ = ["check_session_id", "host_session_id"]

_SESSION_ID_MAX = 128


@functools.cache
def host_session_id() -> str:
    """The session of this machine: ``boot-<id>``, its boot (Linux's ``boot_id``).

    The same for every process until the next reboot, when ``odom`` starts at a new origin;
    where no boot id can be read, ``process-<random>``, new for each process (stricter: a
    pose in ``odom`` is then only reused by the process that stored it).
    """
    try:
        boot = Path(_BOOT_ID_FILE).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        boot = ""
    if boot and len(boot) <= 64 and all(c.isalnum() or c == "-" for c in boot):
        return f"boot-{boot}"
    return f"process-{secrets.token_hex(8)}"


_BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"


def check_session_id(session_id: str) -> str:
    """Return ``session_id`` when valid: printable, no whitespace, at most 128 characters.

    Raises:
        InputError: Otherwise.

    """
    if (
        not isinstance(session_id, str)
        or len(session_id) > _SESSION_ID_MAX
        or not session_id.isprintable()
        or any(c.isspace() for c in session_id)
    ):
        raise InputError(
            f"session_id={session_id!r}: must be a string of at most {_SESSION_ID_MAX} "
            'printable characters without spaces ("" = unknown)'
        )
    return session_id
