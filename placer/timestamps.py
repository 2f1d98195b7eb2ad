"""RFC 3339 timestamps, as Kubernetes writes them: one formatter, one parser.

Kubernetes writes ``Time`` with seconds (``2026-11-29T13:00:00Z``) and ``MicroTime`` with
microseconds (``2026-11-29T13:00:00.123456Z``), always in UTC; placer writes the same (its
JSON logs use milliseconds). The parser reads any of these, and offsets other than ``Z``.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["parse_rfc3339", "rfc3339"]


def rfc3339(moment: datetime | float | None = None, *, digits: int = 0) -> str:
    """``moment`` (a datetime, Unix seconds, or now) as RFC 3339 in UTC.

    ``digits`` of the second's fraction: 0 (Kubernetes' ``Time``), 3 (milliseconds) or 6
    (``MicroTime``); the fraction is cut, not rounded, as Go's formatter does.
    """
    if moment is None:
        stamp = datetime.now(UTC)
    elif isinstance(moment, datetime):
        stamp = moment.astimezone(UTC)
    else:
        stamp = datetime.fromtimestamp(moment, UTC)
    text = stamp.strftime("%Y-%m-%dT%H:%M:%S")
    if digits > 0:
        text += "." + f"{stamp.microsecond:06d}"[:digits]
    return text + "Z"


def parse_rfc3339(text: object) -> float | None:
    """Unix seconds of an RFC 3339 timestamp (any fraction, ``Z`` or an offset); ``None`` when
    absent or malformed (a date alone, or a time without its zone, is malformed)."""
    if not isinstance(text, str) or "T" not in text.upper():
        return None
    try:
        moment = datetime.fromisoformat(text.upper())
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return moment.timestamp()
