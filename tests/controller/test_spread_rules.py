"""The controller's pure rules for a spread workload (issue 17): reconcile with a record naming
every copy, staleness, and the copies' aggregated status."""

from __future__ import annotations

import json
from typing import Any

from placer.controller.reconcile import (
    Adopt,
    Confirm,
    DeleteCopy,
    Failover,
    Health,
    MirrorSpread,
    Place,
    is_stale,
)
from placer.controller.records import record_of
from placer.controller.spread import aggregate_status
from placer.dispatch.spread import ANNOTATION_SPREAD
from tests.controller.test_rules import MEMBERS, UP, copy, obj, run

SPREAD = json.dumps({"copies": {"a": {"d": 2}, "b": {"d": 1}}, "source": "s"})


def spread_obj(**kwargs: Any) -> dict[str, Any]:
    o = obj(cluster="a", **kwargs)
    o["metadata"]["annotations"][ANNOTATION_SPREAD] = SPREAD
    return o


def spread_copy(status: dict[str, Any] | None = None) -> dict[str, Any]:
    c = copy(status)
    c["metadata"]["annotations"][ANNOTATION_SPREAD] = SPREAD
    return c


def test_the_record_names_every_copy() -> None:
    record = record_of(spread_obj())
    assert record is not None
    assert record.copies == ("a", "b") and record.clusters == ("a", "b")
    plain = record_of(obj(cluster="a"))
    assert plain is not None and plain.clusters == ("a",)


def test_copies_without_a_record_are_divided_again_not_adopted() -> None:
    """A crash between the applies and the record: placing again applies over the copies
    (adopting one and deleting the others would lose replicas)."""
    copies = {"a": spread_copy(), "b": spread_copy()}
    assert run(obj(), copies=copies) == [
        Place("its spread copies have no record; dividing it again")
    ]
    assert run(obj(), copies={"a": copy(), "b": copy()}) == [Adopt("a"), DeleteCopy("b")]


def test_a_recorded_spread_workload() -> None:
    both = {"a": spread_copy(), "b": spread_copy()}
    assert run(spread_obj(confirmed=False), copies=both) == [Confirm("a")]
    # a copy outside the record is stale; a copy of the record is not
    assert run(spread_obj(confirmed=False), copies={**both, "c": spread_copy()}) == [
        DeleteCopy("c"),
        Confirm("a"),
    ]
    assert not is_stale(copy(uid="u1"), "b", {"u1": spread_obj()})
    assert is_stale(copy(uid="u1"), "c", {"u1": spread_obj()})
    # a copy gone, or the hub object edited: divided again and every copy applied
    assert run(spread_obj(), copies={"a": spread_copy()}) == [
        Place("its copy on b is gone; dividing it again")
    ]
    edited = run(spread_obj(generation=2, applied=1), copies=both)
    assert edited == [Place("the hub object changed (generation 2); dividing again")]
    # the aggregated status is mirrored when it differs
    aggregate = ({"readyReplicas": 3}, "Running")
    assert run(spread_obj(), copies=both, aggregate=aggregate) == [
        MirrorSpread({"readyReplicas": 3}, "Running")
    ]


def test_a_lost_copy_fails_over_after_the_grace_period_only() -> None:
    both = {"a": spread_copy(), "b": spread_copy()}
    down = {**UP, "b": Health(False, 900.0, False)}
    assert run(spread_obj(), copies=both, health=down) == []  # within the grace period
    [failover] = run(spread_obj(), copies=both, health=down, now=1300.0)
    assert isinstance(failover, Failover) and failover.spread and failover.cluster == "b"
    assert run(spread_obj(), copies=both, members=("a",)) == [
        Failover("b", "cluster b is no longer a member of the fleet", spread=True)
    ]
    assert MEMBERS == ("a", "b", "c")


def test_aggregate_status_sums_counts_and_names_the_copy_not_ready() -> None:
    status = aggregate_status(
        [
            (
                "east",
                {
                    "replicas": 3,
                    "readyReplicas": 3,
                    "observedGeneration": 1,
                    "conditions": [{"type": "Available", "status": "True"}],
                },
            ),
            (
                "west",
                {
                    "replicas": 2,
                    "readyReplicas": 1,
                    "observedGeneration": 1,
                    "conditions": [
                        {"type": "Available", "status": "False", "message": "1 unavailable"}
                    ],
                },
            ),
        ]
    )
    assert status["replicas"] == 5 and status["readyReplicas"] == 4
    assert status["observedGeneration"] == 1  # not a count: the first copy's
    assert status["conditions"] == [
        {"type": "Available", "status": "False", "message": "cluster west: 1 unavailable"}
    ]
