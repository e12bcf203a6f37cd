"""The access rule's pure parts (``surprise_memory.access``): which address is this machine
only, where a token comes from, when a command must refuse, how secrets compare.

Across the wire (a real server: 401s, the sign-in, the refusal to start) in
``test_browser_access.py`` and ``test_mcp_server.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from surprise_memory.access import (
    check_exposure,
    is_loopback,
    read_token,
    same_secret,
    session_value,
)
from surprise_memory.errors import ConfigError, InputError

ENV = "SURPRISE_MEMORY_TEST_TOKEN"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("robot.lan", False),  # a name may resolve anywhere
        ("", False),
    ],
)
def test_only_the_loopback_is_this_machine_only(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_the_token_comes_from_the_file_else_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert read_token(ENV, None) is None
    monkeypatch.setenv(ENV, "  \n")
    assert read_token(ENV, None) is None  # an empty variable sets no token
    monkeypatch.setenv(ENV, " from-env\n")
    assert read_token(ENV, None) == "from-env"
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    assert read_token(ENV, str(token_file)) == "from-file"
    token_file.write_text("\n")
    with pytest.raises(InputError, match="holds no token"):
        read_token(ENV, str(token_file))
    with pytest.raises(InputError, match="No such file"):
        read_token(ENV, str(tmp_path / "nowhere"))


def test_a_command_refuses_another_address_without_a_token() -> None:
    check_exposure("127.0.0.1", None, host_option="--host", env_var=ENV)
    check_exposure("0.0.0.0", "secret", host_option="--host", env_var=ENV)
    with pytest.raises(ConfigError) as refused:
        check_exposure("0.0.0.0", None, host_option="--host", env_var=ENV)
    message = str(refused.value)
    assert message.startswith("--host 0.0.0.0: other machines could reach the memory")
    assert ENV in message and "--token-file" in message and "127.0.0.1" in message


def test_secrets_compare_whole_and_the_cookie_is_not_the_token() -> None:
    assert same_secret("a-token", b"a-token")
    assert not same_secret("a-token", "a-token ")
    assert not same_secret("", "a-token")
    cookie = session_value("a-token")
    assert "a-token" not in cookie and len(cookie) == 64
    assert cookie == session_value("a-token") != session_value("another-token")
