"""Issue 16 in the controller: a reserved gang that waited too long starts by eviction.

With ``--reserve-preempt-after`` (``ReservationPolicy.preempt_after_s``) a gang holding a
reservation whose start is still more than ``--reserve-preempt-slack`` ahead evicts running
work once it has waited that long (:func:`placer.solver.reservation_preemption.force`, through
the controller's preemption: suspended copies, ``Preempted`` conditions and Events, the
metric), in the same plan as queue preemption.

One member (``m1``: 12 nodes of 8 GPUs) playing the Job controller, scheduler and kubelet
(:class:`placer.virtual.realism.Realism`), with a write hook (:class:`Invariants`) checking after
every write that no node or member holds more GPUs than it has and no Job is on two members.
Every test runs the controller against loopback API servers over HTTPS (real kubeconfigs).
"""

from __future__ import annotations

import time
from typing import Any

from placer.controller.settings import BackoffSettings
from placer.fleet import fleet_from_kubeconfigs
from placer.solver.reservations import ReservationPolicy
from placer.timestamps import parse_rfc3339
from tests.controller.conftest import HubFleet, Running
from tests.controller.test_eviction import Invariants, hold, let_go, pods_of, with_pods
from tests.controller.test_queues import queue, serve_queues
from tests.controller.test_reservations import hub_job, kept, reserved

#: seconds a reserved gang waits before it evicts (the tests' --reserve-preempt-after).
AFTER = 3.0


def evicting(hubfleet: HubFleet, min_gpus: int, **overrides: Any) -> Running:
    """A controller on ``m1`` alone: reservations at once for gangs of ``min_gpus`` GPUs or
    more, evicting after :data:`AFTER` seconds unless the start is within a minute."""
    fleet = fleet_from_kubeconfigs([hubfleet.members_kubeconfig], ["m1"], timeout=5.0)
    policy = ReservationPolicy(
        after_s=0, min_gpus=min_gpus, grace_s=60, preempt_after_s=AFTER, preempt_slack_s=60
    )
    return hubfleet.controller(fleet, reservations=policy, **overrides)


def one_hour(
    hubfleet: HubFleet, name: str, pods: int = 1, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """A Job of ``pods`` pods of 8 GPUs expected to run an hour."""
    body = hubfleet.job(name, gpus=8, pods=pods, labels=labels)
    body["metadata"]["annotations"] = {"placer.dev/expected-runtime": "1h"}
    return body


def place_all(hubfleet: HubFleet, bodies: list[dict[str, Any]]) -> list[str]:
    for body in bodies:
        hubfleet.hub.store.create(body)
    names = [b["metadata"]["name"] for b in bodies]
    hubfleet.wait_for(
        lambda: all(hubfleet.placed_cluster(hub_job(hubfleet, n)) == "m1" for n in names),
        timeout=60,
        what="the running Jobs placed",
    )
    return names


def preempted(hubfleet: HubFleet, names: list[str]) -> dict[str, dict[str, Any]]:
    """The ``Preempted=True`` conditions of ``names``, by name."""
    found = {}
    for name in names:
        condition = hubfleet.condition(hub_job(hubfleet, name), "Preempted") or {}
        if condition.get("status") == "True":
            found[name] = condition
    return found


def gpus_of(hubfleet: HubFleet, name: str) -> int:
    job = hub_job(hubfleet, name)
    return 8 * int(job["spec"]["parallelism"])


def warnings(hubfleet: HubFleet, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in hubfleet.events(name) if e["reason"] == reason]


def test_a_reserved_gang_evicts_the_least_whole_work_after_the_threshold_and_starts_there(
    hubfleet: HubFleet,
) -> None:
    """m1 is full: two protected Jobs, one of priority 100, a gang of two pods and seven
    one-node Jobs, all expected to run an hour. A gang of six nodes gets a reservation an hour
    away; once it has waited :data:`AFTER` seconds it evicts exactly six nodes' worth of the
    allowed work (whole gangs; never the protected or higher-priority Jobs), and is placed on
    the nodes they free once their pods are gone; no node holds more than its GPUs."""
    m1 = hubfleet.members["m1"]
    with_pods(m1)
    invariants = Invariants(hubfleet, ("m1",))
    running = evicting(hubfleet, min_gpus=48)
    protected = {"placer.dev/preemptible": "false"}
    keep = place_all(
        hubfleet,
        [
            one_hour(hubfleet, "keep-0", labels=protected),
            one_hour(hubfleet, "keep-1", labels=protected),
            one_hour(hubfleet, "urgent", labels={"placer.dev/priority": "100"}),
        ],
    )
    allowed = place_all(
        hubfleet,
        [one_hour(hubfleet, "pair", pods=2), *(one_hour(hubfleet, f"small-{i}") for i in range(7))],
    )
    hubfleet.wait_for(
        lambda: (
            sum(1 for p in m1.store.list("pods", hubfleet.NAMESPACE) if p["spec"].get("nodeName"))
            == 12
        ),
        what="12 pods bound",
    )
    hubfleet.hub.store.create(hubfleet.job("pretrain", gpus=8, pods=6))
    condition = reserved(hubfleet, "pretrain")
    assert "cluster m1" in condition["message"]
    created = parse_rfc3339(hub_job(hubfleet, "pretrain")["metadata"]["creationTimestamp"]) or 0

    hubfleet.wait_for(
        lambda: hubfleet.placed_cluster(hub_job(hubfleet, "pretrain")) == "m1",
        timeout=60,
        what="pretrain placed by eviction",
    )
    victims = preempted(hubfleet, [*keep, *allowed])
    assert set(victims) <= set(allowed), victims  # never protected, never of a higher priority
    assert sum(gpus_of(hubfleet, n) for n in victims) == 48, victims  # exactly the room it needs
    for name, evicted in victims.items():
        assert evicted["reason"] == "Reservation" and "Job/team-a/pretrain" in evicted["message"]
        # not before the gang had waited the threshold (creationTimestamp is whole seconds)
        at = parse_rfc3339(evicted["lastTransitionTime"]) or 0
        assert at >= created + AFTER - 1, (name, at, created)
        [copy] = hubfleet.copies(name).values()  # parked on m1: suspended, its pods gone
        assert copy["spec"]["suspend"] is True and pods_of(m1, copy) == []
        assert "placer.dev/preempted-by" in hubfleet.annotations(copy)
        assert len(warnings(hubfleet, name, "Preempted")) == 1
    for name in set(allowed) - set(victims):  # whole gangs: the others keep all their pods
        [copy] = hubfleet.copies(name).values()
        assert len(pods_of(m1, copy)) == int(copy["spec"]["parallelism"])
    [copy] = hubfleet.copies("pretrain").values()
    pods = hubfleet.wait_for(
        lambda: (
            (found := pods_of(m1, copy)) and all(p["spec"].get("nodeName") for p in found) and found
        ),
        what="pretrain's pods bound",
    )
    survivors = {
        p["spec"]["nodeName"]
        for name in [*keep, *(set(allowed) - set(victims))]
        for p in pods_of(m1, next(iter(hubfleet.copies(name).values())))
    }
    assert len(pods) == 6 and not survivors & {p["spec"]["nodeName"] for p in pods}
    (preempting,) = warnings(hubfleet, "pretrain", "Preempting")
    assert "(reservation)" in preempting["message"]
    assert all(name in preempting["message"] for name in victims)
    hubfleet.wait_for(lambda: kept(hubfleet) == [], what="the reservation released")
    time.sleep(1.0)  # the victims wait: m1 is full again
    assert all(hubfleet.placed_cluster(hub_job(hubfleet, n)) is None for n in victims)
    metrics = running.controller.metrics.exposition().decode()
    assert f'placer_preemptions_total{{reason="reservation"}} {float(len(victims))}' in metrics
    assert 'placer_reservation_outcomes_total{outcome="placed"} 1.0' in metrics
    assert invariants.checks > 0 and invariants.violations == []


def test_a_reservation_never_takes_another_queues_in_quota_work_nor_evicts_twice(
    hubfleet: HubFleet,
) -> None:
    """Queues on the hub: team-b (quota 64) runs six one-node Jobs, within its quota; team-a
    (quota 16) six, over its own. team-a's gang of four nodes is over quota (no reclaim) and of
    its Jobs' priority (no preempt): only its reservation evicts, and only team-a's own work —
    team-b's in-quota work is never taken for it. team-b's new Job, within quota, reclaims one
    of team-a's at the same time: every victim is evicted once, by one rule."""
    m1 = hubfleet.members["m1"]
    with_pods(m1)
    invariants = Invariants(hubfleet, ("m1",))
    serve_queues(hubfleet, queue("team-a", 16), queue("team-b", 64))
    running = evicting(hubfleet, min_gpus=32)

    def team(name: str, queue_name: str, pods: int = 1) -> dict[str, Any]:
        return one_hour(hubfleet, name, pods=pods, labels={"placer.dev/queue": queue_name})

    b_jobs = place_all(hubfleet, [team(f"b-{i}", "team-b") for i in range(6)])
    a_jobs = place_all(hubfleet, [team(f"a-{i}", "team-a") for i in range(6)])
    hubfleet.hub.store.create(team("pretrain", "team-a", pods=4))
    hubfleet.hub.store.create(team("b-new", "team-b"))
    for name in ("pretrain", "b-new"):
        hubfleet.wait_for(
            lambda name=name: hubfleet.placed_cluster(hub_job(hubfleet, name)) == "m1",
            timeout=60,
            what=f"{name} placed",
        )
    victims = preempted(hubfleet, [*a_jobs, *b_jobs])
    assert set(victims) <= set(a_jobs), victims  # team-b's in-quota work never taken
    reasons = sorted(c["reason"] for c in victims.values())
    assert reasons == ["Reclaim", *["Reservation"] * 4], victims
    for name in victims:
        assert len(warnings(hubfleet, name, "Preempted")) == 1, name  # evicted once
    time.sleep(1.0)
    assert preempted(hubfleet, b_jobs) == {}
    metrics = running.controller.metrics.exposition().decode()
    assert 'placer_preemptions_total{reason="reservation"} 4.0' in metrics
    assert 'placer_preemptions_total{reason="reclaim"} 1.0' in metrics
    assert 'placer_preemptions_total{reason="preempt"}' not in metrics
    assert invariants.violations == []


def test_a_kept_reservation_evicts_under_a_restarted_controller(hubfleet: HubFleet) -> None:
    """The first controller reserves for the gang and never evicts; it stops. The next, with
    ``--reserve-preempt-after``, reads the reservation from the hub's ConfigMap and forces that
    one (it plans none of its own) — the gang's wait counted from its creation, not from the
    restart. (No pods here: placed Jobs hold their room through the in-flight ledger.)"""
    fleet = fleet_from_kubeconfigs([hubfleet.members_kubeconfig], ["m1"], timeout=5.0)
    first = hubfleet.controller(
        fleet, reservations=ReservationPolicy(after_s=0, min_gpus=64, grace_s=60)
    )
    place_all(hubfleet, [one_hour(hubfleet, f"warm-{i}") for i in range(12)])
    hubfleet.hub.store.create(hubfleet.job("pretrain", gpus=8, pods=8))
    reserved(hubfleet, "pretrain")
    (before,) = kept(hubfleet)
    time.sleep(AFTER)  # past the threshold already: nothing evicts without the flag
    assert hubfleet.placed_cluster(hub_job(hubfleet, "pretrain")) is None
    first.halt()

    second = evicting(hubfleet, min_gpus=64, backoff=BackoffSettings(initial=30, maximum=60))
    hubfleet.wait_for(
        lambda: hubfleet.placed_cluster(hub_job(hubfleet, "pretrain")) == "m1",
        timeout=60,
        what="pretrain placed by the second controller's eviction",
    )
    victims = preempted(hubfleet, [f"warm-{i}" for i in range(12)])
    assert len(victims) == 8 and all(c["reason"] == "Reservation" for c in victims.values())
    metrics = second.controller.metrics.exposition().decode()
    assert 'placer_reservation_outcomes_total{outcome="made"}' not in metrics  # the kept one
    assert 'placer_reservation_outcomes_total{outcome="placed"} 1.0' in metrics
    assert 'placer_preemptions_total{reason="reservation"} 8.0' in metrics
    assert before["uid"] == hub_job(hubfleet, "pretrain")["metadata"]["uid"]
    hubfleet.wait_for(lambda: kept(hubfleet) == [], what="the reservation released")


def test_the_freed_room_stays_the_gangs_across_a_restart_mid_eviction(hubfleet: HubFleet) -> None:
    """The victims' pods are slow to go (a finalizer holds them terminating) and the controller
    stops right after the eviction. The reservation it kept on the hub now holds the freed nodes
    from the eviction on: the next controller evicts nothing more, keeps the victims off those
    nodes, and places the gang there once the pods are gone."""
    m1 = hubfleet.members["m1"]
    with_pods(m1)
    invariants = Invariants(hubfleet, ("m1",))
    first = evicting(hubfleet, min_gpus=32)
    names = place_all(hubfleet, [one_hour(hubfleet, f"warm-{i}") for i in range(12)])
    hubfleet.wait_for(
        lambda: (
            len([p for p in m1.store.list("pods", hubfleet.NAMESPACE) if p["spec"].get("nodeName")])
            == 12
        ),
        what="12 pods bound",
    )
    hold(m1, hubfleet.NAMESPACE)
    hubfleet.hub.store.create(hubfleet.job("pretrain", gpus=8, pods=4))
    victims = hubfleet.wait_for(
        lambda: len(found := preempted(hubfleet, names)) == 4 and found,
        timeout=60,
        what="four victims",
    )
    forced = hubfleet.wait_for(
        lambda: (found := kept(hubfleet)) and "started by eviction" in found[0]["reason"] and found,
        what="the reservation moved to the freed nodes",
    )[0]
    first.halt()
    terminating = [
        p
        for p in m1.store.list("pods", hubfleet.NAMESPACE)
        if p["metadata"].get("deletionTimestamp")
    ]
    assert len(terminating) == 4

    second = evicting(hubfleet, min_gpus=32)
    reserving_ = second.controller.cycle.reserving
    assert reserving_ is not None
    hubfleet.wait_for(lambda: reserving_.loaded, what="the reservation read again")
    time.sleep(1.0)  # several cycles: the gang cannot start yet, nothing else is evicted
    assert len(preempted(hubfleet, names)) == 4
    assert hubfleet.placed_cluster(hub_job(hubfleet, "pretrain")) is None
    let_go(m1, terminating)
    hubfleet.wait_for(
        lambda: hubfleet.placed_cluster(hub_job(hubfleet, "pretrain")) == "m1",
        timeout=60,
        what="pretrain placed after the restart",
    )
    [copy] = hubfleet.copies("pretrain").values()
    pods = hubfleet.wait_for(
        lambda: (
            (found := pods_of(m1, copy)) and all(p["spec"].get("nodeName") for p in found) and found
        ),
        what="pretrain's pods bound",
    )
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(forced["nodes"])
    assert all(hubfleet.placed_cluster(hub_job(hubfleet, n)) is None for n in victims)
    metrics = second.controller.metrics.exposition().decode()
    assert 'placer_preemptions_total{reason="reservation"}' not in metrics  # none evicted again
    assert invariants.violations == []
