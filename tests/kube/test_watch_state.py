"""The watch rules on decoded events (pure): RV tracking, bookmarks, 410, errors, unknowns."""

from __future__ import annotations

import json
import logging

import pytest

from placer.errors import ForbiddenError
from placer.kube import WatchState
from placer.kube.watching import Action, iter_lines


def event(kind: str, rv: str, name: str = "x") -> dict[str, object]:
    return {"type": kind, "object": {"metadata": {"name": name, "resourceVersion": rv}}}


def test_events_pass_on_and_move_the_version() -> None:
    state = WatchState("10")
    action, item = state.on_event(event("ADDED", "11"))
    assert action is Action.EMIT and item is not None and item.type == "ADDED"
    assert state.resource_version == "11"


def test_bookmarks_move_the_version_silently() -> None:
    state = WatchState("10")
    assert state.on_event(event("BOOKMARK", "15")) == (Action.SKIP, None)
    assert state.resource_version == "15"


def test_expired_means_relist_and_other_errors_raise() -> None:
    state = WatchState("10", cluster="east")
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
    assert state.on_event(gone) == (Action.RELIST, None)
    forbidden = {
        "type": "ERROR",
        "object": {"kind": "Status", "code": 403, "reason": "Forbidden", "message": "no"},
    }
    with pytest.raises(ForbiddenError, match="cluster east"):
        state.on_event(forbidden)


def test_unknown_types_and_garbage_are_logged_and_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = WatchState("10")
    with caplog.at_level(logging.WARNING):
        assert state.on_event(event("SURPRISE", "99")) == (Action.SKIP, None)
        assert state.on_line(b"{not json") == (Action.SKIP, None)
    assert state.resource_version == "10"
    assert "SURPRISE" in caplog.text


def test_lines_split_across_and_within_chunks() -> None:
    lines = [json.dumps(event("ADDED", str(i))).encode() for i in range(3)]
    stream = b"\n".join(lines) + b"\n"
    chunks = [stream[:7], stream[7:60], stream[60:]]
    assert list(iter_lines(chunks)) == lines
    assert list(iter_lines([b"a\n\nb"])) == [b"a", b"b"]
