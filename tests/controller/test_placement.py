"""Acceptance: workloads created on the hub are placed once each, status flows back, deletes clean.

One controller (in-process) against a loopback hub and three loopback members. The members run
no framework controllers: the tests play the Job controller by writing the copies' status.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from placer.definitions import Catalog, decompose
from placer.dispatch import PlacementRecord
from placer.fleet import fleet_from_kubeconfigs, gather_fleet
from placer.model import Decision, DecisionSummary, Placement, PodAssignment, Unplaced
from placer.solver import verify

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _decision_from_copies(hubfleet: Any, names: list[str]) -> tuple[Decision, list[Any]]:
    """The placements the members hold, rebuilt from the copies' records (pod-to-node plans)."""
    catalog = Catalog.builtin()
    placements = []
    workloads = []
    for name in names:
        copies = hubfleet.copies(name)
        assert len(copies) == 1, f"{name} has copies on {sorted(copies)}"
        ((cluster, copy),) = copies.items()
        decomposition = decompose(copy, catalog)
        workloads.append(decomposition.workload)
        record = PlacementRecord.from_object(copy)
        assert record is not None and record.cluster == cluster
        pods = []
        for component in decomposition.components:
            nodes = record.plan[component.label]
            assert len(nodes) == component.replicas
            for index, node_name in enumerate(nodes):
                pods.append(
                    PodAssignment(
                        component=component.name,
                        instance=component.instance,
                        index=index,
                        node=node_name,
                        requests=component.pod.requests,
                    )
                )
        placements.append(
            Placement(
                workload=decomposition.ref,
                cluster=cluster,
                pods=tuple(pods),
                requests=decomposition.workload.total_requests(),
            )
        )
    summary = DecisionSummary(
        solver="controller",
        mode="batch",
        status="feasible",
        seconds=0.0,
        workloads=len(workloads),
        placed=len(placements),
    )
    return Decision(tuple(placements), tuple[Unplaced, ...](), summary), workloads


def test_hundred_workloads_placed_once_without_overcommit(hubfleet: Any) -> None:
    fleet_before = gather_fleet(fleet_from_kubeconfigs([hubfleet.members_kubeconfig]))
    running = hubfleet.controller()
    rng = random.Random(7)
    names = []
    # four waves, so that later cycles must see earlier placements through the ledger
    for wave in range(4):
        for i in range(25):
            name = f"w{wave}-{i:02d}"
            names.append(name)
            hubfleet.hub.store.create(
                hubfleet.job(name, gpus=rng.choice((1, 2)), pods=rng.choice((1, 2)))
            )
        time.sleep(0.4)

    demand = sum(
        int(j["spec"]["parallelism"])
        * int(
            j["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
        )
        for j in hubfleet.hub_jobs()
    )
    assert (
        demand <= len(hubfleet.MEMBERS) * hubfleet.NODES * hubfleet.GPUS
    )  # everything fits: every workload is placed

    def all_placed() -> bool:
        jobs = hubfleet.hub_jobs()
        return len(jobs) == 100 and all(
            hubfleet.placed_cluster(j) and (hubfleet.condition(j) or {}).get("status") == "True"
            for j in jobs
        )

    hubfleet.wait_for(all_placed, timeout=60, what="100 workloads placed")
    time.sleep(0.5)  # a duplicate would have had the time to appear

    # exactly one copy each, on the recorded cluster, unsuspended, in the same namespace
    for obj in hubfleet.hub_jobs():
        name = obj["metadata"]["name"]
        copies = hubfleet.copies(name)
        assert list(copies) == [hubfleet.placed_cluster(obj)], name
        copy = copies[hubfleet.placed_cluster(obj)]
        assert copy["spec"]["suspend"] is False
        assert copy["metadata"]["labels"]["placer.dev/hub"] == "hub"
        assert hubfleet.annotations(copy)["placer.dev/hub-uid"] == obj["metadata"]["uid"]
        assert "placer.dev/placement" in obj["metadata"]["finalizers"]
    assert sum(len(s.store.list("jobs")) for s in hubfleet.members.values()) == 100

    # never overcommitted: the placements the members hold, checked by the independent verifier
    decision, workloads = _decision_from_copies(hubfleet, names)
    assert verify(decision, workloads, fleet_before) == []
    assert Counter(p.cluster for p in decision.placements).keys() <= set(hubfleet.MEMBERS)

    metrics = running.controller.metrics.exposition().decode()
    assert "placer_placements_total" in metrics
    placed = sum(
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("placer_placements_total{")
    )
    assert placed == 100
    events = hubfleet.events("w0-00")
    assert [e["reason"] for e in events] == ["Placed"]
    first = hubfleet.hub.store.get("jobs", "w0-00", hubfleet.NAMESPACE)
    assert e_message(events[0]).startswith(f"cluster {hubfleet.placed_cluster(first)}")


def e_message(event: dict[str, Any]) -> str:
    return str(event.get("message") or "")


def test_status_mirrored_and_delete_cleans_member(hubfleet: Any) -> None:
    hubfleet.controller()
    for name in ("run", "done", "gone"):
        hubfleet.hub.store.create(hubfleet.job(name, gpus=2))
    hubfleet.wait_for(
        lambda: (
            all(hubfleet.placed_cluster(j) for j in hubfleet.hub_jobs())
            and len(hubfleet.hub_jobs()) == 3
        ),
        what="placed",
    )

    def member_status(name: str, status: dict[str, Any]) -> None:
        ((cluster, _copy),) = hubfleet.copies(name).items()
        hubfleet.members[cluster].store.patch(
            "jobs", name, {"status": status}, namespace=hubfleet.NAMESPACE, subresource="status"
        )

    # act as the Job controller on the members
    member_status("run", {"active": 1, "ready": 1})
    member_status(
        "done",
        {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True", "reason": "Done"}]},
    )

    def mirrored() -> bool:
        run = hubfleet.hub.store.get("jobs", "run", hubfleet.NAMESPACE)
        done = hubfleet.hub.store.get("jobs", "done", hubfleet.NAMESPACE)
        return (
            hubfleet.annotations(run).get("placer.dev/phase") == "Running"
            and run["status"].get("active") == 1
            and hubfleet.annotations(done).get("placer.dev/phase") == "Completed"
            and any(c["type"] == "Complete" for c in done["status"]["conditions"])
        )

    hubfleet.wait_for(mirrored, what="member status mirrored to the hub")
    done = hubfleet.hub.store.get("jobs", "done", hubfleet.NAMESPACE)
    types = [c["type"] for c in done["status"]["conditions"]]
    assert types.count("Placed") == 1 and "Complete" in types  # ours kept beside the member's

    # delete on the hub: the member copy goes first, then the hub object
    assert len(hubfleet.copies("gone")) == 1
    _ = hubfleet.copies("gone").items()
    hubfleet.hub.store.delete("jobs", "gone", hubfleet.NAMESPACE)
    hubfleet.wait_for(lambda: not hubfleet.copies("gone"), what="member copy deleted")
    hubfleet.wait_for(
        lambda: all(j["metadata"]["name"] != "gone" for j in hubfleet.hub_jobs()),
        what="hub object finalized",
    )
    assert len(hubfleet.copies("run")) == 1  # the others are untouched


def test_with_virtual_fleet_realism_the_hub_shows_running(hubfleet: Any) -> None:
    """Members that play the frameworks (placer.virtual.realism): pods appear, status flows back."""
    from placer.virtual.realism import Realism, register_catalog_kinds

    catalog = Catalog.builtin()
    for name, server in hubfleet.members.items():
        register_catalog_kinds(server.store, catalog)
        server.store.add_reactor(Realism(catalog, name=name))
    register_catalog_kinds(hubfleet.hub.store, catalog)  # CRDs on the hub, no controllers
    hubfleet.controller()
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train", "namespace": "team-a", "labels": {"placer.dev/queue": "q"}},
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                {
                    "name": "worker",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "t",
                                            "image": "t",
                                            "resources": {"limits": {"nvidia.com/gpu": "4"}},
                                        }
                                    ]
                                }
                            }
                        }
                    },
                }
            ],
        },
    }
    hubfleet.hub.store.create(jobset)

    def running() -> dict[str, Any] | None:
        obj = hubfleet.hub.store.get("jobsets", "train", "team-a")
        phase = hubfleet.annotations(obj).get("placer.dev/phase")
        mirrored = "replicatedJobsStatus" in (obj.get("status") or {})
        return obj if phase == "Running" and mirrored else None

    obj = hubfleet.wait_for(running, what="the hub JobSet Running")
    assert obj["spec"]["suspend"] is True  # the hub object stays suspended
    ((cluster, copy),) = hubfleet.copies("train", kind="jobsets").items()
    assert copy["spec"]["suspend"] is False
    pods = hubfleet.members[cluster].store.list("pods", "team-a")
    assert len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods)
    assert obj["status"]["replicatedJobsStatus"] == copy["status"]["replicatedJobsStatus"]


def test_unschedulable_waits_and_is_placed_when_capacity_appears(hubfleet: Any) -> None:
    running = hubfleet.controller()
    hubfleet.hub.store.create(hubfleet.job("big", gpus=16))  # no node has 16 GPUs yet

    def reason() -> str:
        obj = hubfleet.hub.store.get("jobs", "big", hubfleet.NAMESPACE)
        return str((hubfleet.condition(obj) or {}).get("reason", ""))

    hubfleet.wait_for(lambda: reason() == "Unschedulable", what="refused")
    message = hubfleet.condition(hubfleet.hub.store.get("jobs", "big", hubfleet.NAMESPACE))
    assert "it needs 16 nvidia.com/gpu, the largest node has 8 allocatable" in str(message)
    # retried after the longest backoff (2 s here) though capacity did not change: the same
    # refusal again is one aggregated Event, not a new one per attempt
    hubfleet.wait_for(
        lambda: [e.get("count") for e in hubfleet.events("big")] == [2], what="aggregated event"
    )
    assert [e["reason"] for e in hubfleet.events("big")] == ["Unschedulable"]

    hubfleet.members["m2"].store.seed([hubfleet.node("m2-big", gpus=16)])
    hubfleet.wait_for(lambda: reason() == "Placed", what="placed once room appeared")
    assert list(hubfleet.copies("big")) == ["m2"]
    assert "placer_unschedulable_total" in running.controller.metrics.exposition().decode()


def test_an_edited_hub_object_is_reapplied_where_it_is(hubfleet: Any) -> None:
    hubfleet.controller()
    hubfleet.hub.store.create(hubfleet.job("edit", gpus=1))
    hubfleet.wait_for(
        lambda: hubfleet.placed_cluster(hubfleet.hub.store.get("jobs", "edit", "team-a")),
        what="placed",
    )
    ((cluster, _copy),) = hubfleet.copies("edit").items()
    obj = hubfleet.hub.store.get("jobs", "edit", "team-a")
    container = obj["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "LEARNING_RATE", "value": "0.01"}]
    hubfleet.hub.store.replace(obj)

    def reapplied() -> bool:
        copies = hubfleet.copies("edit")
        env = copies.get(cluster, {})["spec"]["template"]["spec"]["containers"][0].get("env")
        return list(copies) == [cluster] and env == [{"name": "LEARNING_RATE", "value": "0.01"}]

    hubfleet.wait_for(reapplied, what="the edit applied to the same member")
    generation = hubfleet.hub.store.get("jobs", "edit", "team-a")["metadata"]["generation"]
    hubfleet.wait_for(
        lambda: (
            (hubfleet.condition(hubfleet.hub.store.get("jobs", "edit", "team-a")) or {}).get(
                "observedGeneration"
            )
            == generation
        ),
        what="the applied generation recorded",
    )
    assert "EditDoesNotFit" not in [e["reason"] for e in hubfleet.events("edit")]


def test_a_label_added_on_the_hub_reaches_the_copy(hubfleet: Any) -> None:
    """A label changes no generation; the copy follows it all the same (a queue or team label
    that ``placer submit`` and the members' tools read from the copy), once."""
    hubfleet.controller()
    hubfleet.hub.store.create(hubfleet.job("labelled", gpus=1))
    hubfleet.wait_for(lambda: hubfleet.copies("labelled"), what="placed")
    ((cluster, _copy),) = hubfleet.copies("labelled").items()
    hubfleet.hub.store.patch(
        "jobs", "labelled", {"metadata": {"labels": {"team": "vision"}}}, namespace="team-a"
    )
    hubfleet.wait_for(
        lambda: hubfleet.copies("labelled")[cluster]["metadata"]["labels"].get("team") == "vision",
        what="the label on the copy",
    )
    member = hubfleet.members[cluster]
    member.clear_requests()
    time.sleep(1.0)  # several resyncs: applied once, not again
    assert [r for r in member.requests if r.resource == "jobs" and r.verb == "patch"] == []


def test_a_label_removed_on_the_hub_leaves_the_copy_and_the_members_own_stay(
    hubfleet: Any,
) -> None:
    """A label removed on the hub (no generation change) is removed from the copy at once, not
    at the next edit; a label the member put on the copy itself stays (placer removes only
    the labels it copied from the hub: ``placer.dev/hub-labels`` on the copy)."""
    hubfleet.controller()
    job = hubfleet.job("unlabelled", gpus=1)
    job["metadata"]["labels"] = {**job["metadata"].get("labels", {}), "team": "vision"}
    job["metadata"]["labels"]["stage"] = "beta"
    hubfleet.hub.store.create(job)
    hubfleet.wait_for(lambda: hubfleet.copies("unlabelled"), what="placed")
    ((cluster, copy),) = hubfleet.copies("unlabelled").items()
    assert {"team", "stage"} <= set(
        copy["metadata"]["annotations"]["placer.dev/hub-labels"].split(",")
    )
    member = hubfleet.members[cluster].store
    member.patch(
        "jobs", "unlabelled", {"metadata": {"labels": {"member-tool": "on"}}}, namespace="team-a"
    )
    hubfleet.hub.store.patch(
        "jobs", "unlabelled", {"metadata": {"labels": {"stage": None}}}, namespace="team-a"
    )

    def labels() -> dict[str, str]:
        return dict(hubfleet.copies("unlabelled")[cluster]["metadata"]["labels"])

    hubfleet.wait_for(lambda: "stage" not in labels(), what="the label gone from the copy")
    assert labels()["team"] == "vision" and labels()["member-tool"] == "on"
    recorded = hubfleet.copies("unlabelled")[cluster]["metadata"]["annotations"]
    assert "stage" not in recorded["placer.dev/hub-labels"].split(",")


def test_a_group_member_arriving_later_joins_its_group(hubfleet: Any) -> None:
    """``placer.dev/group`` holds across cycles: a member created after the others were placed
    goes to their cluster, even where the policy would send it elsewhere."""
    hub = hubfleet.hub.store
    hub.create(yaml.safe_load((DEPLOY / "crds" / "placementpolicies.placer.dev.yaml").read_text()))
    hub.create(
        {
            "apiVersion": "placer.dev/v1alpha1",
            "kind": "PlacementPolicy",
            "metadata": {"name": "prefer-m1"},
            "spec": {"preferredClusters": ["m1"]},
        }
    )
    hubfleet.controller()
    # the first member is pinned to m3; a job of no group still follows the policy to m1
    hub.create(hubfleet.job("first", labels={"placer.dev/group": "g", "placer.dev/cluster": "m3"}))
    hub.create(hubfleet.job("loner"))
    hubfleet.wait_for(lambda: hubfleet.copies("first"), what="first placed")
    hubfleet.wait_for(lambda: hubfleet.copies("loner"), what="loner placed")
    assert list(hubfleet.copies("first")) == ["m3"]
    assert list(hubfleet.copies("loner")) == ["m1"]  # the policy steers what has no group
    hub.create(hubfleet.job("second", labels={"placer.dev/group": "g"}))
    hubfleet.wait_for(lambda: hubfleet.copies("second"), what="second placed")
    assert list(hubfleet.copies("second")) == ["m3"]


def test_an_edit_that_no_longer_fits_is_applied_with_a_warning(hubfleet: Any) -> None:
    hubfleet.controller()
    hubfleet.hub.store.create(hubfleet.job("grow", gpus=1))

    def recorded() -> bool:
        obj = hubfleet.hub.store.get("jobs", "grow", "team-a")
        condition = hubfleet.condition(obj) or {}
        return bool(hubfleet.placed_cluster(obj)) and condition.get("status") == "True"

    # edit only once the controller has written its record (an edit racing the record write
    # would replace the hub object without it)
    hubfleet.wait_for(recorded, what="placed and recorded")
    ((cluster, _copy),) = hubfleet.copies("grow").items()
    obj = hubfleet.hub.store.get("jobs", "grow", "team-a")
    obj["spec"]["parallelism"] = obj["spec"]["completions"] = 13  # 13 pods of 8 GPUs: 12 nodes
    limits = obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    limits["nvidia.com/gpu"] = "8"
    hubfleet.hub.store.replace(obj)
    hubfleet.wait_for(
        lambda: hubfleet.copies("grow").get(cluster, {}).get("spec", {}).get("parallelism") == 13,
        what="the edit applied where it is",
    )
    assert list(hubfleet.copies("grow")) == [cluster]  # it did not move
    events = [e for e in hubfleet.events("grow") if e["reason"] == "EditDoesNotFit"]
    assert events and f"may not fit on cluster {cluster}" in events[0]["message"]
    assert events[0]["type"] == "Warning"


def test_managed_workloads_gauge_counts_the_placed_hub_objects(hubfleet: Any) -> None:
    """``placer_managed_workloads``: hub objects with a placement record (it stayed 0)."""
    running = hubfleet.controller()

    def managed() -> float | None:
        for line in running.controller.metrics.exposition().decode().splitlines():
            if line.startswith("placer_managed_workloads "):
                return float(line.split()[-1])
        return None

    for name in ("m-a", "m-b"):
        hubfleet.hub.store.create(hubfleet.job(name))
    hubfleet.hub.store.create(hubfleet.job("m-never", gpus=hubfleet.GPUS + 1))  # fits nowhere
    hubfleet.wait_for(lambda: managed() == 2.0, what="two managed workloads")
    hubfleet.hub.store.delete("jobs", "m-a", hubfleet.NAMESPACE)
    hubfleet.wait_for(lambda: managed() == 1.0, what="one managed workload after a deletion")
