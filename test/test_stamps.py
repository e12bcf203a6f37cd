"""Times given by a person (``parse_time``), the same on every supported Python (3.10-3.12)."""

from __future__ import annotations

import pytest

from surprise_memory.errors import InputError
from surprise_memory.stamps import parse_time

T0 = 1_700_000_000_000_000_000  # 2023-11-14T22:13:20Z


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("2023-11-14T22:13:20Z", T0),
        # Python 3.10's fromisoformat reads 3 or 6 fraction digits only, and no "Z"
        ("2023-11-14T22:14:25.3Z", T0 + 65_300_000_000),
        ("2023-11-14T22:13:20.25+00:00", T0 + 250_000_000),
        ("2023-11-14T22:13:20,5Z", T0 + 500_000_000),
        ("2023-11-14T22:13:20.123456789Z", T0 + 123_456_000),  # cut to microseconds
        ("2023-11-14T23:13:20.5+01:00", T0 + 500_000_000),
        ("2023-11-14 22:13:20.000001Z", T0 + 1_000),
        ("12.5", T0 + 12_500_000_000),
        ("12.5s", T0 + 12_500_000_000),
        ("1700000012500000000ns", 1_700_000_012_500_000_000),
    ],
)
def test_parse_time(text: str, ns: int) -> None:
    assert parse_time(text, T0) == ns


@pytest.mark.parametrize(
    "text",
    [
        "2023-11-14T22:13:20",
        "yesterday",
        "2023-13-01T00:00:00Z",
        "²",  # str.isdigit says yes, int() says no
        "1e300",  # seconds past any stamp (was an OverflowError)
        "-1e999",  # -inf
        "99999999999999999999ns",  # past int64
    ],
)
def test_parse_time_refuses_with_a_reason(text: str) -> None:
    with pytest.raises(InputError, match="time"):
        parse_time(text, T0)


def test_relative_time_needs_an_origin() -> None:
    with pytest.raises(InputError, match="no episode yet"):
        parse_time("3.0", None)
