"""Issue 14 in the controller: Queue objects on the hub, fair share, reclaim and preemption.

One member (``m1``: 12 nodes of 8 GPUs, 96 GPUs) so that a queue can flood it. The members run
no scheduler, so placed Jobs hold their capacity through the in-flight ledger (their planned
pods on the member's nodes): what an eviction frees is exactly what the victim's entry held.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.cli import main
from placer.controller.hubconfig import queues_from_hub
from placer.fleet import fleet_from_kubeconfigs
from placer.queues import reader
from placer.virtual.hub import hub_crds
from tests.controller.conftest import HubFleet, Running

GPU = "nvidia.com/gpu"


def queue(name: str, quota: int, **rule: Any) -> dict[str, Any]:
    return {
        "apiVersion": "placer.dev/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"resources": {GPU: {"quota": quota, **rule}}},
    }


def serve_queues(hubfleet: HubFleet, *queues: dict[str, Any]) -> None:
    """The Queue CRD on the hub (as ``placer fleet up --hub`` and ``deploy/`` install it), and
    ``queues``."""
    (crd,) = [c for c in hub_crds() if c["metadata"]["name"] == "queues.placer.dev"]
    hubfleet.hub.store.create(crd)
    for item in queues:
        hubfleet.hub.store.create(item)


def one_member(hubfleet: HubFleet, **overrides: Any) -> Running:
    fleet = fleet_from_kubeconfigs([hubfleet.members_kubeconfig], ["m1"], timeout=5.0)
    return hubfleet.controller(fleet, **overrides)


def team_job(hubfleet: HubFleet, name: str, team: str, **labels: str) -> dict[str, Any]:
    return hubfleet.job(name, gpus=8, labels={"placer.dev/queue": team, **labels})


def hub_job(hubfleet: HubFleet, name: str) -> dict[str, Any]:
    return hubfleet.hub.store.get("jobs", name, hubfleet.NAMESPACE)


def flood(hubfleet: HubFleet, team: str, count: int, **labels: str) -> list[str]:
    """``count`` Jobs of 8 GPUs for ``team``, all placed."""
    names = [f"{team}-{i}" for i in range(count)]
    for name in names:
        hubfleet.hub.store.create(team_job(hubfleet, name, team, **labels))
    hubfleet.wait_for(
        lambda: all(hubfleet.placed_cluster(hub_job(hubfleet, n)) == "m1" for n in names),
        timeout=60,
        what=f"{team}'s Jobs placed",
    )
    return names


def test_reclaim_places_in_quota_work_by_evicting_over_quota_work(
    hubfleet: HubFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """team-b floods the member (96 GPUs, 64 over its quota); team-a's in-quota Job is then
    placed by reclaiming exactly one of team-b's Jobs, which goes back to pending with the
    ``Preempted`` condition and Event naming the preemptor; never two copies, never more than
    the member's GPUs."""
    serve_queues(hubfleet, queue("team-a", 32), queue("team-b", 32))
    running = one_member(hubfleet)
    names = flood(hubfleet, "team-b", 12)
    hubfleet.hub.store.create(team_job(hubfleet, "a-0", "team-a"))
    hubfleet.wait_for(
        lambda: hubfleet.placed_cluster(hub_job(hubfleet, "a-0")) == "m1",
        timeout=60,
        what="team-a's Job placed by reclaim",
    )
    victims = [n for n in names if (hubfleet.condition(hub_job(hubfleet, n), "Preempted") or {})]
    assert len(victims) == 1, victims
    victim = hub_job(hubfleet, victims[0])
    preempted = hubfleet.condition(victim, "Preempted") or {}
    assert preempted["status"] == "True" and preempted["reason"] == "Reclaim"
    assert "team-a/a-0" in preempted["message"] or "a-0" in preempted["message"]
    placed = hubfleet.condition(victim, "Placed") or {}
    assert placed["status"] == "False" and placed["reason"] in ("Preempted", "Unschedulable")
    assert hubfleet.placed_cluster(victim) is None
    # its copy is parked on the member: suspended, naming the preemptor (no pods, no quota)
    [parked] = hubfleet.copies(victims[0]).values()
    assert parked["spec"]["suspend"] is True
    assert hubfleet.annotations(parked)["placer.dev/preempted-by"] == "Job/team-a/a-0"
    assert "suspended" in preempted["message"]
    events = hubfleet.wait_for(
        lambda: [e for e in hubfleet.events(victims[0]) if e["reason"] == "Preempted"],
        what="the Preempted Event",
    )
    assert "a-0" in events[0]["message"] and events[0]["type"] == "Warning"
    hubfleet.wait_for(
        lambda: any(e["reason"] == "Preempting" for e in hubfleet.events("a-0")),
        what="the Preempting Event",
    )
    copies = hubfleet.members["m1"].store.list("jobs", hubfleet.NAMESPACE)
    running_copies = [c for c in copies if not c["spec"].get("suspend")]
    assert len(running_copies) == 12  # 11 of team-b's and team-a's: 96 GPUs, never more
    assert len(copies) == 13  # and the parked one
    metrics = running.controller.metrics.exposition().decode()
    assert 'placer_preemptions_total{reason="reclaim"} 1.0' in metrics
    series = (
        'placer_queue_allocated{queue="team-a",resource="nvidia.com/gpu"} 8.0',
        'placer_queue_allocated{queue="team-b",resource="nvidia.com/gpu"} 88.0',
        'placer_queue_quota{queue="team-b",resource="nvidia.com/gpu"} 32.0',
        'placer_queue_pending{queue="team-b",resource="nvidia.com/gpu"} 8.0',
        'placer_queue_pending{queue="team-a",resource="nvidia.com/gpu"} 0.0',
    )
    hubfleet.wait_for(
        lambda: all(s in running.controller.metrics.exposition().decode() for s in series),
        timeout=30,
        what="the queue gauges",
    )
    # placer get queues against the hub: the same numbers, and who waits after an eviction
    hub_kubeconfig = str(hubfleet.hub_kubeconfig)
    code = main(
        ["get", "queues", "--hub-context", "hub", "--kubeconfig", hub_kubeconfig, "-o", "json"]
    )
    assert code == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["queues"]}
    assert rows["team-b"]["preempted"] == 1 and rows["team-a"]["preempted"] == 0
    gpus = rows["team-b"]["resources"][GPU]
    assert (gpus["allocated"], gpus["overQuota"], gpus["pending"]) == (88, 56, 8)
    assert rows["team-a"]["resources"][GPU]["allocated"] == 8
    # team-a's Job gone, the victim is placed again: Preempted turns False
    hubfleet.hub.store.delete("jobs", "a-0", hubfleet.NAMESPACE)

    def placed_again() -> bool:
        obj = hub_job(hubfleet, victims[0])
        again = hubfleet.condition(obj, "Preempted") or {}
        placed = hubfleet.condition(obj) or {}
        return (
            hubfleet.placed_cluster(obj) == "m1"
            and placed.get("status") == "True"
            and (again.get("status"), again.get("reason")) == ("False", "Placed")
        )

    hubfleet.wait_for(placed_again, timeout=60, what="the victim placed again, not Preempted")
    # ... its parked copy resumed in place (the same object), and it stays so once the copy's
    # status is mirrored
    [resumed] = hubfleet.copies(victims[0]).values()
    assert resumed["metadata"]["uid"] == parked["metadata"]["uid"]
    assert resumed["spec"]["suspend"] is False
    assert "placer.dev/preempted-by" not in hubfleet.annotations(resumed)
    time.sleep(1.0)
    assert placed_again()


@pytest.mark.parametrize(
    ("labels", "overrides", "reclaimable"),
    [
        ({"placer.dev/preemptible": "false"}, {}, True),  # protected work
        ({}, {"preemption": False}, True),  # placer controller --no-preemption
        ({}, {}, False),  # team-b's queue says reclaimable: false
    ],
    ids=["preemptible-false", "no-preemption", "queue-not-reclaimable"],
)
def test_protected_work_is_never_evicted(
    hubfleet: HubFleet, labels: dict[str, str], overrides: dict[str, Any], reclaimable: bool
) -> None:
    """``placer.dev/preemptible: "false"`` on every flooding Job, a controller without
    preemption, or ``reclaimable: false`` on the flooding queue: team-a's in-quota Job waits,
    and nothing is evicted."""
    team_b = queue("team-b", 32)
    if not reclaimable:
        team_b["spec"]["reclaimable"] = False
    serve_queues(hubfleet, queue("team-a", 32), team_b)
    running = one_member(hubfleet, **overrides)
    names = flood(hubfleet, "team-b", 12, **labels)
    hubfleet.hub.store.create(team_job(hubfleet, "a-0", "team-a"))
    hubfleet.wait_for(
        lambda: (
            (hubfleet.condition(hub_job(hubfleet, "a-0")) or {}).get("reason") == "Unschedulable"
        ),
        timeout=30,
        what="team-a's Job unschedulable",
    )
    assert all(hubfleet.placed_cluster(hub_job(hubfleet, n)) == "m1" for n in names)
    assert not any(hubfleet.condition(hub_job(hubfleet, n), "Preempted") for n in names)
    assert "placer_preemptions_total{" not in running.controller.metrics.exposition().decode()


def test_unknown_queue_is_a_condition_and_limits_hold(hubfleet: HubFleet) -> None:
    """A Job naming a queue the hub does not define gets ``UnknownQueue``, naming the known
    queues; a queue's limit is never passed, across cycles."""
    serve_queues(hubfleet, queue("team-a", 16, limit=16))
    one_member(hubfleet)
    hubfleet.hub.store.create(team_job(hubfleet, "typo", "team-x"))
    hubfleet.wait_for(
        lambda: (
            (hubfleet.condition(hub_job(hubfleet, "typo")) or {}).get("reason") == "UnknownQueue"
        ),
        timeout=30,
        what="the UnknownQueue condition",
    )
    message = (hubfleet.condition(hub_job(hubfleet, "typo")) or {})["message"]
    assert "team-x" in message and "team-a" in message
    # an invalid Queue is reported on itself (Valid=False, an InvalidQueue Event naming the
    # field) and left out; the Job naming it still waits for an UnknownQueue
    hubfleet.hub.store.create(queue("team-x", -2))

    def reported() -> bool:
        obj = hubfleet.hub.store.get("queues.placer.dev", "team-x")
        valid = hubfleet.condition(obj, "Valid") or {}
        return valid.get("status") == "False" and valid.get("reason") == "InvalidQueue"

    hubfleet.wait_for(reported, timeout=30, what="the invalid Queue's Valid=False condition")
    obj = hubfleet.hub.store.get("queues.placer.dev", "team-x")
    assert (
        "spec.resources.nvidia.com/gpu.quota" in (hubfleet.condition(obj, "Valid") or {})["message"]
    )
    assert (hubfleet.condition(hub_job(hubfleet, "typo")) or {}).get("reason") == "UnknownQueue"
    for i in range(3):
        hubfleet.hub.store.create(team_job(hubfleet, f"a-{i}", "team-a"))

    def settled() -> bool:
        jobs = [hub_job(hubfleet, f"a-{i}") for i in range(3)]
        placed = [j for j in jobs if hubfleet.placed_cluster(j)]
        waiting = [
            j for j in jobs if (hubfleet.condition(j) or {}).get("reason") == "Unschedulable"
        ]
        return len(placed) == 2 and len(waiting) == 1

    hubfleet.wait_for(settled, timeout=30, what="two of team-a's Jobs placed, one at the limit")
    refused = [
        f"a-{i}" for i in range(3) if not hubfleet.placed_cluster(hub_job(hubfleet, f"a-{i}"))
    ]
    assert len(refused) == 1
    message = (hubfleet.condition(hub_job(hubfleet, refused[0])) or {})["message"]
    assert "team-a" in message and "limit" in message


def test_queues_from_hub_leave_out_invalid_queues_only() -> None:
    """A Queue invalid alone or in the set (a cycle, an unknown parent, children's quotas above
    the parent's) is reported naming the queue and field; the others apply."""
    good = queue("good", 8)
    bad_field = queue("negative", -1)
    loop_a = {**queue("loop-a", 1), "spec": {"parent": "loop-b", "resources": {}}}
    loop_b = {**queue("loop-b", 1), "spec": {"parent": "loop-a", "resources": {}}}
    orphan = {**queue("orphan", 1), "spec": {"parent": "missing"}}
    parent = queue("dept", 4)
    child = {**queue("team", 8), "spec": {"parent": "dept", "resources": {GPU: {"quota": 8}}}}
    hub = queues_from_hub(
        [good, bad_field, loop_a, loop_b, orphan, parent, child],
        [
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "system-node-critical"},
                "value": 2000001000,
            }
        ],
    )
    assert hub.queues is not None and set(hub.queues.queues) == {"good"}
    assert "spec.resources.nvidia.com/gpu.quota" in hub.problems["negative"]
    assert "spec.parent" in hub.problems["loop-a"] and "spec.parent" in hub.problems["orphan"]
    assert "dept" in hub.problems["dept"] and "quota" in hub.problems["dept"]
    assert "team" in hub.problems
    assert hub.queues.classes["system-node-critical"].value == 2000001000
    assert queues_from_hub([]).queues is None


@pytest.mark.parametrize("kind", ["Queue"])
def test_queue_crd_is_served_on_the_hub_of_fleet_up(kind: str) -> None:
    names = {c["spec"]["names"]["kind"] for c in hub_crds()}
    assert kind in names


def test_queue_crd_matches_the_reader_and_rbac_reads_queues() -> None:
    deploy = Path(__file__).resolve().parents[2] / "deploy"
    (crd,) = yaml.safe_load_all((deploy / "crds/queues.placer.dev.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    assert f"{crd['spec']['group']}/{version['name']}" == reader.API_VERSION
    assert crd["spec"]["names"]["kind"] == reader.KIND and crd["spec"]["scope"] == "Cluster"
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert set(spec) == set(reader._SPEC_FIELDS)
    rule = spec["resources"]["additionalProperties"]["properties"]
    assert set(rule) == set(reader._RULE_FIELDS)
    kustomization = yaml.safe_load((deploy / "kustomization.yaml").read_text())
    assert "crds/queues.placer.dev.yaml" in kustomization["resources"]
    roles = [d for d in yaml.safe_load_all((deploy / "rbac.yaml").read_text()) if d]
    (role,) = [d for d in roles if d["kind"] == "ClusterRole"]
    reads = {
        (group, resource)
        for rule_ in role["rules"]
        for group in rule_["apiGroups"]
        for resource in rule_["resources"]
        if "watch" in rule_["verbs"]
    }
    assert {("placer.dev", "queues"), ("scheduling.k8s.io", "priorityclasses")} <= reads


def test_priority_class_from_the_hub_without_queues(hubfleet: HubFleet) -> None:
    """No Queue on the hub: a Job whose pods name the hub's PriorityClass ``urgent`` goes before
    a bigger Job of priority 0 when only one fits (the bigger one would place more GPUs)."""
    hubfleet.hub.store.create(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "urgent"},
            "value": 1000,
        }
    )
    big = hubfleet.job("big", gpus=8, pods=12)
    urgent = hubfleet.job("urgent", gpus=8, pods=11)
    urgent["spec"]["template"]["spec"]["priorityClassName"] = "urgent"
    for item in (big, urgent):
        hubfleet.hub.store.create(item)
    one_member(hubfleet)
    hubfleet.wait_for(
        lambda: (
            hubfleet.placed_cluster(hub_job(hubfleet, "urgent")) == "m1"
            and (hubfleet.condition(hub_job(hubfleet, "big")) or {}).get("reason")
            == "Unschedulable"
        ),
        timeout=30,
        what="the urgent Job placed, the big one waiting",
    )


def test_a_spread_workload_waits_under_queues_saying_why(hubfleet: HubFleet) -> None:
    """Spread workloads are not decided under the hub's Queues yet: one waits, ``Placed=False``
    naming why, and no copy is made (rather than being placed whole past its queue)."""
    from tests.controller.test_spread import DEPLOY as SPREAD_DEPLOY
    from tests.controller.test_spread import deployment, policy

    serve_queues(hubfleet, queue("default", 8))
    hub = hubfleet.hub.store
    hub.create(
        yaml.safe_load((SPREAD_DEPLOY / "crds" / "placementpolicies.placer.dev.yaml").read_text())
    )
    hub.create(policy())
    hubfleet.controller()
    hub.create(deployment(hubfleet.NAMESPACE))

    def waiting() -> bool:
        [obj] = hub.list("deployments.apps", hubfleet.NAMESPACE)
        placed = hubfleet.condition(obj) or {}
        return placed.get("status") == "False" and "not placed under" in placed.get("message", "")

    hubfleet.wait_for(waiting, timeout=30, what="the spread Deployment waiting under queues")
    assert hubfleet.copies("serve", kind="deployments.apps") == {}


def test_a_placed_elastic_workload_counts_at_its_running_count(
    hubfleet: HubFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """A PyTorchJob of a master and 2..10 workers of 4 GPUs placed where 16 GPUs are free runs
    a master and 3 workers (16 GPUs, its minimum is 12): its queue is charged 16 (the copy's
    count), in the controller's gauge and by ``placer get queues`` with the hub's kubeconfig
    alone (the hub object records the count); a hub object without that record (placed by an
    older controller) is counted from its copy when the members' kubeconfig is given too, else
    at 12, with a warning."""
    from tests.elastic.test_controller import pytorchjob, setup

    setup(hubfleet)
    serve_queues(hubfleet, queue("default", 64))
    running = one_member(hubfleet)
    hubfleet.hub.store.create(pytorchjob("elastic"))
    hubfleet.wait_for(
        lambda: (
            hubfleet.placed_cluster(hubfleet.hub.store.get("pytorchjobs", "elastic", "team-a"))
            == "m1"
        ),
        timeout=30,
        what="the PyTorchJob placed",
    )
    [copy] = hubfleet.copies("elastic", kind="pytorchjobs").values()
    assert copy["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    series = 'placer_queue_allocated{queue="default",resource="nvidia.com/gpu"} 16.0'
    hubfleet.wait_for(
        lambda: series in running.controller.metrics.exposition().decode(),
        timeout=30,
        what="the queue gauge at 16 GPUs",
    )
    hub, members = str(hubfleet.hub_kubeconfig), str(hubfleet.members_kubeconfig)
    get = ["get", "queues", "--hub-context", "hub", "--kubeconfig", hub, "-o", "json"]
    obj = hubfleet.hub.store.get("pytorchjobs", "elastic", "team-a")
    assert json.loads(hubfleet.annotations(obj)["placer.dev/replicas"]) == {"worker": 3}
    assert main(get) == 0  # the hub alone
    out, err = capsys.readouterr()
    assert json.loads(out)["queues"][0]["resources"][GPU]["allocated"] == 16
    assert "minimum" not in err
    # placed before the controller recorded counts: read from its member, else its minimum
    hubfleet.hub.store.patch(
        "pytorchjobs",
        "elastic",
        {"metadata": {"annotations": {"placer.dev/replicas": None}}},
        namespace="team-a",
    )
    assert main([*get, "--kubeconfig", members]) == 0
    [row] = json.loads(capsys.readouterr().out)["queues"]
    assert row["resources"][GPU]["allocated"] == 16
    assert main(get) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["queues"][0]["resources"][GPU]["allocated"] == 12
    assert "PyTorchJob/team-a/elastic counted at its minimum replicas" in err
