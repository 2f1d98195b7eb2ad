"""placer.timestamps: RFC 3339 as Kubernetes writes it (Time, MicroTime), one way each."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from placer.timestamps import parse_rfc3339, rfc3339

MOMENT = datetime(2026, 11, 29, 13, 0, 5, 123456, tzinfo=UTC)


def test_formats_seconds_milliseconds_and_microseconds() -> None:
    assert rfc3339(MOMENT) == "2026-11-29T13:00:05Z"
    assert rfc3339(MOMENT, digits=3) == "2026-11-29T13:00:05.123Z"
    assert rfc3339(MOMENT, digits=6) == "2026-11-29T13:00:05.123456Z"
    assert rfc3339(MOMENT.timestamp(), digits=6) == "2026-11-29T13:00:05.123456Z"


def test_other_zones_are_written_in_utc() -> None:
    east = MOMENT.astimezone(timezone(timedelta(hours=2)))
    assert rfc3339(east) == "2026-11-29T13:00:05Z"


def test_now_by_default() -> None:
    before = datetime.now(UTC).replace(microsecond=0).timestamp()
    stamp = parse_rfc3339(rfc3339())
    assert stamp is not None and before <= stamp <= before + 5


@pytest.mark.parametrize("digits", [0, 3, 6])
def test_round_trip(digits: int) -> None:
    text = rfc3339(MOMENT, digits=digits)
    parsed = parse_rfc3339(text)
    assert parsed is not None
    assert rfc3339(parsed, digits=digits) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-29T13:00:05Z", datetime(2026, 11, 29, 13, 0, 5, tzinfo=UTC).timestamp()),
        ("2026-11-29t13:00:05z", datetime(2026, 11, 29, 13, 0, 5, tzinfo=UTC).timestamp()),
        ("2026-11-29T15:00:05+02:00", datetime(2026, 11, 29, 13, 0, 5, tzinfo=UTC).timestamp()),
    ],
)
def test_parses_zones(text: str, expected: float) -> None:
    assert parse_rfc3339(text) == expected


@pytest.mark.parametrize(
    "text", [None, 5, "", "yesterday", "2026-11-29", "2026-11-29T13:00:05", "2026-13-01T00:00:00Z"]
)
def test_malformed_is_none(text: object) -> None:
    assert parse_rfc3339(text) is None
