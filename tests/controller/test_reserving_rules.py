"""The controller's reservations, pure parts: how they are kept on the hub, since when a hub
object waits, its expected run time, the ``Reserved`` condition, and the command line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from placer.cli import build_parser
from placer.cli._reservations import relative
from placer.cli.controller import DEFAULT_RESERVATION_GRACE, reservation_policy
from placer.controller.records import placed_condition, status_patch
from placer.controller.reservationstore import Booked, decode, encode, entry_of
from placer.controller.reserving import describe, reserved_condition, runtime_of, waiting_since
from placer.errors import UsageError
from placer.model import WorkloadRef
from placer.solver.reservations import Reservation
from placer.timestamps import parse_rfc3339

GANG = WorkloadRef("batch/v1", "Job", "team-a", "pretrain")
NOW = 1_800_000_000.0


def booked(**changes: Any) -> Booked:
    values: dict[str, Any] = {
        "workload": GANG,
        "cluster": "m1",
        "nodes": ("m1-n0", "m1-n1"),
        "start_s": NOW + 3600.5,
        "planned_s": NOW,
        "reason": "waited 1.0 h >= 1.0 h",
        "runtime_s": 7200.0,
    }
    values.update(changes)
    return Booked(Reservation(**values), uid="u-1")


def hub_object(**metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": "pretrain", "namespace": "team-a", **metadata}}


# -- kept on the hub ---------------------------------------------------------------------------


def test_reservations_round_trip_through_the_configmap_text() -> None:
    kept = [booked(), booked(workload=WorkloadRef("v1", "Pod", "b", "p"), runtime_s=None)]
    again, problems = decode(encode(kept))
    assert problems == []
    assert [b.uid for b in again] == ["u-1", "u-1"]
    assert [b.reservation for b in again] == [b.reservation for b in kept]
    item = entry_of(kept[0])
    assert item["start"] == "2027-01-15T09:00:00.500Z" and item["runtimeSeconds"] == 7200.0
    assert parse_rfc3339(item["start"]) == NOW + 3600.5


def test_a_bad_item_is_left_out_and_named_the_rest_is_kept() -> None:
    good = entry_of(booked())
    items = [good, {**good, "nodes": []}, {**good, "start": "tomorrow"}, "x", {"kind": "Job"}]
    found, problems = decode(json.dumps(items))
    assert [b.reservation for b in found] == [booked().reservation]
    assert len(problems) == 4
    assert problems[0].startswith("reservations.json[1] is left out: nodes")
    assert "RFC 3339" in problems[1] and "not an object" in problems[2]
    assert decode("{")[1][0].startswith("reservations.json is not JSON")
    assert decode('{"a": 1}') == ([], ["reservations.json is not a JSON list"])


# -- waiting, run times, conditions ------------------------------------------------------------


def test_a_hub_object_waits_since_its_creation_or_since_it_went_back_to_pending() -> None:
    created = "2027-01-15T06:00:00Z"
    assert waiting_since(hub_object(creationTimestamp=created), NOW) == parse_rfc3339(created)
    assert waiting_since(hub_object(), NOW) == NOW
    lost = hub_object(creationTimestamp=created)
    lost["status"] = {
        "conditions": [
            {"type": "Placed", "status": "False", "lastTransitionTime": "2027-01-15T07:20:00Z"}
        ]
    }
    assert waiting_since(lost, NOW) == parse_rfc3339("2027-01-15T07:20:00Z")
    lost["status"]["conditions"][0]["status"] = "True"  # placed: its creation counts
    assert waiting_since(lost, NOW) == parse_rfc3339(created)


def test_expected_run_time_from_the_annotation_then_active_deadline() -> None:
    annotated = hub_object(annotations={"placer.dev/expected-runtime": "1h30m"})
    annotated["spec"] = {"activeDeadlineSeconds": 60}
    assert runtime_of(annotated) == 5400
    deadline = {**hub_object(), "spec": {"activeDeadlineSeconds": 600}}
    assert runtime_of(deadline) == 600
    assert runtime_of(hub_object()) is None
    bad = hub_object(annotations={"placer.dev/expected-runtime": "soon"})
    with pytest.raises(ValueError, match=r"annotation placer\.dev/expected-runtime: 'soon'"):
        runtime_of(bad)


def test_reserved_condition_says_where_and_when_and_goes_when_the_gang_is_placed() -> None:
    reservation = booked(nodes=tuple(f"m1-n{i}" for i in range(12))).reservation
    condition = reserved_condition(reservation, "", NOW, generation=3)
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "Reserved",
        "True",
        "Reserved",
    )
    assert condition["observedGeneration"] == 3
    message = describe(reservation)
    assert condition["message"] == message
    assert "cluster m1 from 2027-01-15T09:00:00Z (12 nodes: m1-n0," in message
    assert "m1-n7, ..." in message and "waited 1.0 h" in message
    none = reserved_condition(None, "no start", NOW)
    assert (none["status"], none["reason"], none["message"]) == ("False", "NotReserved", "no start")

    obj = {**hub_object(), "status": {"conditions": [condition]}}
    waiting = status_patch(obj, placed_condition(False, "Unschedulable", "full", NOW))
    assert waiting is not None
    assert [c["type"] for c in waiting["status"]["conditions"]] == ["Reserved", "Placed"]
    placed = status_patch(obj, placed_condition(True, "Placed", "cluster m1", NOW))
    assert placed is not None
    assert [c["type"] for c in placed["status"]["conditions"]] == ["Placed"]


# -- the command line ----------------------------------------------------------------------------


def controller_args(*flags: str) -> Any:
    return build_parser().parse_args(["controller", "--hub-context", "hub", *flags])


def test_reservation_flags_make_the_policy_and_need_reserve_after() -> None:
    assert reservation_policy(controller_args()) is None
    policy = reservation_policy(
        controller_args(
            "--reserve-after", "600", "--reserve-priority", "100", "--reserve-min-gpus", "64"
        )
    )
    assert (policy.after_s, policy.priority, policy.min_gpus) == (600, 100, 64)
    assert (policy.max_reservations, policy.grace_s) == (1, DEFAULT_RESERVATION_GRACE)
    policy = reservation_policy(
        controller_args(
            "--reserve-after", "0", "--max-reservations", "4", "--reservation-grace", "0"
        )
    )
    assert (policy.after_s, policy.max_reservations, policy.grace_s) == (0, 4, 0)
    with pytest.raises(UsageError, match="--max-reservations needs --reserve-after"):
        reservation_policy(controller_args("--max-reservations", "4"))
    # the eviction flags, named and meant as in placer simulate
    policy = reservation_policy(
        controller_args(
            "--reserve-after",
            "0",
            "--reserve-preempt-after",
            "7200",
            "--reserve-preempt-slack",
            "600",
        )
    )
    assert (policy.preempt_after_s, policy.preempt_slack_s) == (7200, 600)
    policy = reservation_policy(controller_args("--reserve-after", "0"))
    assert (policy.preempt_after_s, policy.preempt_slack_s) == (None, 3600)
    with pytest.raises(UsageError, match="--reserve-preempt-after needs --reserve-after"):
        reservation_policy(controller_args("--reserve-preempt-after", "60"))
    with pytest.raises(
        UsageError, match="--reserve-preempt-slack goes with --reserve-preempt-after"
    ):
        reservation_policy(controller_args("--reserve-after", "0", "--reserve-preempt-slack", "60"))


def test_relative_times_of_get_reservations() -> None:
    assert relative(3599) == "in 59m"
    assert relative(-30) == "30s ago"
    assert relative(3 * 86400) == "in 3d"
    assert relative(7300) == "in 2h"
