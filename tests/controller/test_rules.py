"""The controller's pure rules: reconcile, staleness, backoff, records, leases, hub config."""

from __future__ import annotations

from typing import Any

import pytest

from placer.controller.fanout import UNITS_PER_PART, split_decision
from placer.controller.hubconfig import definitions_from_hub, policies_from_hub
from placer.controller.leader import LeaseView, next_lease
from placer.controller.metrics import unschedulable_reason
from placer.controller.reconcile import (
    Adopt,
    Backoff,
    Confirm,
    DeleteCopy,
    Failover,
    Finalize,
    Health,
    Mirror,
    Place,
    Reapply,
    Wait,
    blocking_members,
    group_clusters,
    is_stale,
    reconcile,
)
from placer.controller.records import (
    FINALIZER,
    copied_labels,
    finalizer_patch,
    mark_copy,
    merge_conditions,
    placed_condition,
    record_of,
    record_patch,
    status_patch,
)
from placer.controller.settings import ControllerSettings, LeaseSettings, hub_id
from placer.definitions import Catalog, decompose
from placer.dispatch import Manifest
from placer.dispatch.claims import claim_key, shard_of
from placer.model import Cluster, Decision, DecisionSummary, Fleet, Placement

MEMBERS = ("a", "b", "c")
UP = {c: Health(True, 0.0, True) for c in MEMBERS}


def obj(
    *,
    cluster: str | None = None,
    confirmed: bool = True,
    generation: int = 1,
    applied: int = 1,
    deleting: bool = False,
    status: dict[str, Any] | None = None,
    phase: str = "",
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "w",
        "namespace": "ns",
        "uid": "u1",
        "generation": generation,
        "resourceVersion": "7",
        "annotations": {},
    }
    full_status: dict[str, Any] = dict(status or {})
    if cluster:
        meta["annotations"] = {"placer.dev/placed-cluster": cluster, "placer.dev/decision": "d1"}
        meta["finalizers"] = [FINALIZER]
        if phase:
            meta["annotations"]["placer.dev/phase"] = phase
        if confirmed:
            condition = placed_condition(True, "Placed", f"cluster {cluster}: ok", 0.0)
            condition["observedGeneration"] = applied
            full_status["conditions"] = [*full_status.get("conditions", []), condition]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "status": full_status}


def copy(status: dict[str, Any] | None = None, uid: str = "u1") -> dict[str, Any]:
    return {
        "metadata": {"name": "w", "namespace": "ns", "annotations": {"placer.dev/hub-uid": uid}},
        "status": status or {},
    }


def run(o: dict[str, Any], **kwargs: Any) -> list[Any]:
    options: dict[str, Any] = {
        "opted_in": True,
        "copies": {},
        "health": UP,
        "members": MEMBERS,
        "now": 1000.0,
        "grace_period": 300.0,
    }
    options.update(kwargs)
    return reconcile(o, **options)


def test_unplaced_object_waits_for_a_cycle_once_every_member_is_listed() -> None:
    assert run(obj()) == [Place()]
    assert run(obj(), opted_in=False) == []
    unsynced = {**UP, "b": Health(True, 0.0, False)}
    assert run(obj(), health=unsynced) == []  # a copy may be on b
    lost = {**UP, "b": Health(False, 0.0, False)}
    assert run(obj(), health=lost) == [Place()]  # unreachable members do not block


def test_only_objects_whose_copy_may_be_unseen_wait_for_an_unlistable_member() -> None:
    refused = {**UP, "b": Health(False, 900.0, False, "list nodes: 401 Unauthorized")}
    forbidden = {**UP, "b": Health(True, 0.0, False, "list jobs: 403 Forbidden", 900.0)}
    stale = {**UP, "b": Health(False, 900.0, True, "list nodes: 401 Unauthorized")}
    for health in (refused, forbidden):
        problem = health["b"].problem
        # listed when this leader started (an earlier one may have dispatched it): waits
        assert run(obj(), health=health) == [Wait((("b", problem),))]
        assert run(obj(), health=health, opted_in=False) == []
        # dispatched by this leader elsewhere only, or never: b cannot hold a copy
        assert run(obj(), health=health, suspects={"a"}) == [Place()]
        assert run(obj(), health=health, suspects=set()) == [Place()]
        # dispatched to b by this leader: waits
        assert run(obj(), health=health, suspects={"b"}) == [Wait((("b", problem),))]
        # out of sight for the grace period: given up on, as failover does
        assert run(obj(), health=health, now=900.0 + 300.0) == [Place()]
    # b was listed since this leader started: what an earlier one did is known, not what
    # this one did since
    assert run(obj(), health=stale) == [Place()]
    assert run(obj(), health=stale, suspects={"b"}) == [Wait((("b", stale["b"].problem),))]
    # still listing, no trouble: waits quietly (no condition to write)
    listing = {**UP, "b": Health(True, 0.0, False)}
    assert run(obj(), health=listing) == []
    assert run(obj(), health=listing, suspects=set()) == [Place()]
    assert blocking_members(listing, MEMBERS, None, 1000.0, 300.0) == ["b"]


def test_existing_copies_without_record_are_adopted_not_duplicated() -> None:
    assert run(obj(), copies={"b": copy()}) == [Adopt("b")]
    assert run(obj(), copies={"c": copy(), "b": copy()}) == [Adopt("b"), DeleteCopy("c")]


def test_a_copy_parked_by_an_eviction_is_never_adopted() -> None:
    """A copy suspended by an eviction (``placer.dev/preempted-by``) holds no pods: its object
    waits for a cycle (which resumes or replaces it); a running copy elsewhere is adopted and
    the parked one deleted."""
    parked = copy()
    parked["metadata"]["annotations"]["placer.dev/preempted-by"] = "Job/ns/urgent"
    [place] = run(obj(), copies={"b": parked})
    assert isinstance(place, Place) and "evicted" in place.reason
    assert run(obj(), copies={"b": parked}, opted_in=False) == []
    assert run(obj(), copies={"b": parked, "c": copy()}) == [Adopt("c"), DeleteCopy("b")]


def test_recorded_object_confirm_mirror_reapply() -> None:
    assert run(obj(cluster="a", confirmed=False), copies={"a": copy()}) == [Confirm("a")]
    assert run(obj(cluster="a"), copies={"a": copy()}) == []
    running = {"active": 1}
    assert run(obj(cluster="a"), copies={"a": copy(running)}) == [Mirror("a")]
    assert run(obj(cluster="a"), copies={"a": copy()}, copy_phase={"a": "Running"}) == [Mirror("a")]
    mirrored = obj(cluster="a", status=running, phase="Running")
    assert run(mirrored, copies={"a": copy(running)}, copy_phase={"a": "Running"}) == []
    changed = obj(cluster="a", generation=2, applied=1)
    assert run(changed, copies={"a": copy()}) == [
        Reapply("a", "the hub object changed (generation 2)")
    ]


def test_a_label_the_copy_lacks_is_reapplied() -> None:
    labelled = obj(cluster="a")
    labelled["metadata"]["labels"] = {"placer.dev/queue": "team-b"}
    whole = {**copy(), "spec": {"suspend": False}}
    assert run(labelled, copies={"a": whole}) == [Reapply("a", "the hub object's labels changed")]
    whole["metadata"]["labels"] = {"placer.dev/queue": "team-b", "placer.dev/hub": "hub"}
    assert run(labelled, copies={"a": whole}) == []  # (labels of its own on the copy are fine)
    assert run(labelled, copies={"a": copy()}) == []  # just written, not cached whole: wait


def test_a_label_removed_on_the_hub_is_reapplied_away_but_not_one_others_added() -> None:
    """The copy records the hub labels it was given (``placer.dev/hub-labels``): one of them
    gone from the hub is re-applied away; a label of the member's own (``kueue``) is not
    looked at, nor placer's own labels on the copy."""
    unlabelled = obj(cluster="a")
    unlabelled["metadata"]["labels"] = {"placer.dev/queue": "team-b"}
    whole = {**copy(), "spec": {"suspend": False}}
    whole["metadata"]["labels"] = {
        "placer.dev/queue": "team-b",
        "team": "vision",
        "kueue.x-k8s.io/managed": "true",
        "placer.dev/hub": "hub",
        "placer.dev/decision": "d1",
    }
    whole["metadata"]["annotations"]["placer.dev/hub-labels"] = "placer.dev/queue,team"
    assert run(unlabelled, copies={"a": whole}) == [Reapply("a", "the hub object's labels changed")]
    whole["metadata"]["labels"].pop("team")  # re-applied without it
    assert run(unlabelled, copies={"a": whole}) == []
    whole["metadata"]["annotations"]["placer.dev/hub-labels"] = "placer.dev/queue"
    whole["metadata"]["labels"]["team"] = "vision"  # put back by someone else: theirs now
    assert run(unlabelled, copies={"a": whole}) == []


def test_mark_copy_records_the_hub_labels_it_copies_not_placers_own() -> None:
    body = {"metadata": {"name": "w", "labels": {"team": "a", "placer.dev/decision": "d1"}}}
    marked = mark_copy(body, "hub", "u1", ["team", "placer.dev/queue", "placer.dev/hub"])
    assert marked["metadata"]["annotations"]["placer.dev/hub-labels"] == "placer.dev/queue,team"
    assert copied_labels(marked) == {"placer.dev/queue", "team"}
    assert "placer.dev/hub-labels" not in mark_copy(body, "hub", "u1")["metadata"]["annotations"]


def test_missing_copy_is_placed_again_unless_finished() -> None:
    (action,) = run(obj(cluster="a"))
    assert isinstance(action, Place) and "gone" in action.reason
    assert run(obj(cluster="a", phase="Completed")) == []


def test_failover_only_after_the_grace_period() -> None:
    lost_since = {**UP, "a": Health(False, 900.0, False)}
    assert run(obj(cluster="a"), health=lost_since, now=1000.0, grace_period=300.0) == []
    (action,) = run(obj(cluster="a"), health=lost_since, now=1200.0, grace_period=300.0)
    assert isinstance(action, Failover) and action.cluster == "a"
    assert "unreachable for 5m" in action.reason
    (gone,) = run(obj(cluster="zz"))
    assert isinstance(gone, Failover) and "no longer a member" in gone.reason


def test_stale_copies_on_other_members_are_deleted() -> None:
    actions = run(obj(cluster="a"), copies={"a": copy(), "b": copy()})
    assert actions == [DeleteCopy("b")]


def test_deleting_deletes_reachable_copies_then_finalizes() -> None:
    down = {**UP, "b": Health(False, 0.0, False)}
    deleting = obj(cluster="a", deleting=True)
    assert run(deleting, copies={"a": copy(), "b": copy()}, health=down) == [
        DeleteCopy("a", reason="its hub object is being deleted")
    ]
    assert run(deleting, health=down) == [Finalize()]
    # placer's finalizer gone (another one keeps the object): nothing left to do
    deleting["metadata"]["finalizers"] = ["example.com/keep"]
    assert run(deleting, health=down) == []
    assert run(obj(deleting=True)) == []  # never placed
    # a reachable member's copies not listed yet (a restart): a copy may be there, wait
    deleting["metadata"]["finalizers"] = [FINALIZER]
    listing = {**UP, "c": Health(True, 0.0, False)}
    assert run(deleting, health=listing) == []
    # a member that cannot list them (403): left to the stale-copy rule
    forbidden = {**UP, "c": Health(True, 0.0, False, "list jobs: 403 Forbidden", 0.0)}
    assert run(deleting, health=forbidden) == [Finalize()]


def test_is_stale() -> None:
    hub = {"u1": obj(cluster="a")}
    assert not is_stale(copy(), "a", hub)
    assert is_stale(copy(), "b", hub)
    assert is_stale(copy(uid="u2"), "a", hub)  # its hub object is gone
    assert not is_stale({"metadata": {}}, "a", hub)  # not a hub copy


def test_backoff_waits_for_capacity_and_time() -> None:
    backoff = Backoff(initial=5.0, maximum=60.0)
    assert backoff.ready("w", 0.0, epoch=1)
    assert backoff.failed("w", 0.0, epoch=1) == 5.0
    assert not backoff.ready("w", 10.0, epoch=1)  # capacity did not change
    assert not backoff.ready("w", 2.0, epoch=2)  # changed, but backoff not over
    assert backoff.ready("w", 5.0, epoch=2)
    assert backoff.ready("w", 60.0, epoch=1)  # the longest wait is over anyway
    backoff.failed("w", 5.0, epoch=2)
    assert backoff.delay(2) == 10.0 and backoff.delay(30) == 60.0
    assert backoff.next_time("w", epoch=3) == 15.0
    backoff.forget("w")
    assert backoff.ready("w", 5.0, epoch=2) and "w" not in backoff


def test_backoff_of_an_attempt_not_failed_for_room_waits_for_time_only() -> None:
    """Another placer process held the workload's claim: capacity is not what it waits for."""
    backoff = Backoff(initial=5.0, maximum=60.0)
    backoff.failed("w", 0.0, epoch=1, room=False)
    assert not backoff.ready("w", 4.0, epoch=1)
    assert backoff.ready("w", 5.0, epoch=1)  # the same capacity epoch: ready anyway
    assert backoff.next_time("w", epoch=1) == 5.0


def test_dispatch_parts_are_dealt_by_claim_shard_and_only_for_big_decisions() -> None:
    catalog = Catalog.builtin()

    def manifest(i: int) -> Manifest:
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": f"j{i}", "namespace": "team-a"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
        }
        return Manifest(body, decompose(body, catalog))

    def decision(manifests: list[Manifest]) -> Decision:
        placements = tuple(Placement(m.ref, "abc"[i % 3], (), {}) for i, m in enumerate(manifests))
        summary = DecisionSummary("x", "batch", "feasible", 0.0, len(manifests), len(placements))
        return Decision(placements, (), summary)

    fleet = Fleet((Cluster("a"), Cluster("b"), Cluster("c")))
    few = [manifest(i) for i in range(UNITS_PER_PART)]
    assert len(split_decision(decision(few), few, fleet, 4)) == 1  # not worth the parts' cost
    many = [manifest(i) for i in range(4 * UNITS_PER_PART + 10)]
    parts = split_decision(decision(many), many, fleet, 4)
    assert len(parts) == 4
    dealt = [p.workload.name for part in parts for p in part.decision.placements]
    assert sorted(dealt) == sorted(m.ref.name for m in many)
    for index, part in enumerate(parts):  # each part's claims live in its own shard
        assert {shard_of(claim_key(p.workload), 4) for p in part.decision.placements} == {index}


def test_record_round_trip_and_patches() -> None:
    o = obj()
    patch = record_patch(o, "east", "d9", "2026-01-01T00:00:00Z")
    meta = patch["metadata"]
    assert meta["resourceVersion"] == "7" and meta["finalizers"] == [FINALIZER]
    assert meta["labels"] == {"placer.dev/placed-cluster": "east"}
    o["metadata"]["annotations"] = {k: v for k, v in meta["annotations"].items() if v}
    o["metadata"]["finalizers"] = ["other", FINALIZER]
    record = record_of(o)
    assert record is not None and record.cluster == "east" and not record.confirmed
    assert finalizer_patch(o) == {"metadata": {"resourceVersion": "7", "finalizers": ["other"]}}


def test_status_patch_mirrors_member_status_keeping_our_condition() -> None:
    hub = obj(cluster="a", status={"old": 1})
    condition = placed_condition(True, "Placed", "cluster a: ok", 50.0)
    member = {"active": 1, "conditions": [{"type": "Complete", "status": "True"}]}
    patch = status_patch(hub, condition, member)
    assert patch is not None
    status = patch["status"]
    assert status["old"] is None and status["active"] == 1
    assert [c["type"] for c in status["conditions"]] == ["Complete", "Placed"]
    # unchanged status of the condition keeps its transition time
    assert status["conditions"][1]["lastTransitionTime"] == "1970-01-01T00:00:00Z"
    applied = {**hub, "status": {k: v for k, v in status.items() if v is not None}}
    assert status_patch(applied, condition, member) is None


def test_merge_conditions_replaces_by_type() -> None:
    first = placed_condition(False, "Unschedulable", "x", 0.0)
    second = placed_condition(True, "Placed", "cluster a", 10.0)
    merged = merge_conditions([{"type": "Other"}, first], second)
    assert [c["type"] for c in merged] == ["Other", "Placed"]
    assert merged[1]["lastTransitionTime"] == "1970-01-01T00:00:10Z"
    assert len(placed_condition(False, "R", "m" * 5000, 0.0)["message"]) == 1024


def test_next_lease_follows_client_go() -> None:
    spec, view = next_lease(None, None, identity="a", duration=15, now=0.0, wall=0.0)
    assert spec is not None and spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 0
    held = {**spec, "holderIdentity": "b", "leaseDurationSeconds": 15}
    spec, view = next_lease(held, None, identity="a", duration=15, now=100.0, wall=0.0)
    assert spec is None  # just observed: wait a full duration from now
    spec, view = next_lease(held, view, identity="a", duration=15, now=114.0, wall=0.0)
    assert spec is None
    spec, view = next_lease(held, view, identity="a", duration=15, now=115.0, wall=0.0)
    assert spec is not None and spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 1
    renewed = {**held, "renewTime": "later"}
    assert next_lease(renewed, view, identity="a", duration=15, now=116.0, wall=0.0)[0] is None
    released = {**held, "holderIdentity": ""}
    spec, _ = next_lease(
        released, LeaseView(released, 116.0), identity="a", duration=15, now=116.0, wall=0.0
    )
    assert spec is not None  # a released lease is free at once


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        ControllerSettings(lease=LeaseSettings(duration=5, renew_deadline=5))
    with pytest.raises(ValueError, match="hub name"):
        ControllerSettings(hub="not a label!")
    assert hub_id("gke_project_zone_hub") == "gke_project_zone_hub"
    assert hub_id("arn:aws:eks:region:1:cluster/hub") == "arn-aws-eks-region-1-cluster-hub"


def test_hub_policies_and_definitions_are_read_with_their_problems() -> None:
    good = {
        "apiVersion": "placer.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "g"},
        "spec": {"objective": "spread"},
        "status": {"x": 1},
    }
    bad = {
        "apiVersion": "placer.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "b"},
        "spec": {"clusterCosts": {"a": -1}},
    }
    read = policies_from_hub([good, bad])
    assert [p.name for p in read.policies] == ["g"]
    assert "spec.clusterCosts.a" in read.problems["b"]
    base = Catalog.builtin()
    broken = {
        "apiVersion": "run.ai/v1alpha1",
        "kind": "Karta",
        "metadata": {"name": "k"},
        "spec": {
            "structureDefinition": {
                "rootComponent": {
                    "name": "r",
                    "kind": {"group": "x.io", "version": "v1", "kind": "X"},
                }
            }
        },
    }
    hub = definitions_from_hub(base, [broken])
    assert "status definition" in hub.problems["k"]
    assert [str(g) for g in hub.uncovered] == ["x.io/v1 X"]
    assert len(hub.catalog) == len(base)


def test_unschedulable_reason_is_low_cardinality() -> None:
    assert unschedulable_reason({}) == "NoClusters"
    assert (
        unschedulable_reason(
            {"a": "cluster unreachable: refused", "b": "no node with enough free nvidia.com/gpu"}
        )
        == "InsufficientCapacity"
    )
    assert (
        unschedulable_reason({"a": "excluded by policy p's cluster selector (x=y)"})
        == "PolicyExcluded"
    )
    assert unschedulable_reason({"a": "cluster unreachable: refused"}) == "ClusterUnreachable"


def test_batch_deadline_collects_bursts_within_three_windows() -> None:
    from placer.controller.pending import batch_deadline

    assert batch_deadline(10.0, 10.0, 1.0) == 11.0  # one arrival: one window
    assert batch_deadline(10.0, 11.5, 1.0) == 11.75  # still arriving: a quiet quarter window
    assert batch_deadline(10.0, 20.0, 1.0) == 13.0  # a long stream: three windows at most
    assert batch_deadline(0.0, 0.0, 0.0) == 0.0  # no window: at once


def grouped(name: str, group: str, cluster: str | None, deleting: bool = False) -> dict[str, Any]:
    o = obj(cluster=cluster, deleting=deleting)
    o["metadata"]["name"] = name
    o["metadata"]["labels"] = {"placer.dev/group": group}
    return o


def test_group_clusters_from_recorded_members_on_reachable_clusters() -> None:
    objects = [
        grouped("z", "g1", "b"),
        grouped("a", "g1", "c"),  # members disagree: the first by name wins, whatever the order
        grouped("x", "g2", None),  # not placed yet: says nothing
        grouped("y", "g3", "a", deleting=True),  # going away: says nothing
        grouped("v", "g4", "lost"),  # its cluster is not reachable: the group is free again
        obj(cluster="a"),  # no group
    ]
    assert group_clusters(objects, ["a", "b", "c"]) == {"g1": "c"}
    assert group_clusters(list(reversed(objects)), ["a", "b", "c"]) == {"g1": "c"}
    # with c unreachable, the member recorded on b speaks for g1
    assert group_clusters(objects, ["a", "b"]) == {"g1": "b"}
