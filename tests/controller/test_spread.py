"""Issue 17 on the hub: the controller places a spread workload as one copy per member — its
replicas divided 3/2/1 by weight, an override for one member — records every copy on the hub
object, aggregates their status (ready replicas summed, phase by the definition's rules),
divides again when the hub object is edited, re-divides a lost member's share onto the others
(none twice), deletes the lost member's copy when it comes back, and deletes every copy with
the hub object."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from placer.dispatch.ledger import LABEL_IN_FLIGHT, LEDGER_NAMESPACE

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NAME = "serve"


def policy() -> dict[str, Any]:
    return {
        "apiVersion": "placer.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "serving"},
        "spec": {
            "resourceSelectors": {"labelSelectors": [{"matchLabels": {"tier": "serving"}}]},
            "replicaScheduling": {
                "replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "Weighted",
                "weightPreference": {
                    "staticWeightList": [
                        {"targetCluster": {"clusterNames": ["m1"]}, "weight": 3},
                        {"targetCluster": {"clusterNames": ["m2"]}, "weight": 2},
                        {"targetCluster": {"clusterNames": ["m3"]}, "weight": 1},
                    ]
                },
            },
            "overrideRules": [
                {
                    "targetCluster": {"clusterNames": ["m3"]},
                    "overriders": {
                        "imageOverrider": [
                            {"component": "Registry", "operator": "replace", "value": "eu.io"}
                        ]
                    },
                }
            ],
        },
    }


def deployment(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace, "labels": {"tier": "serving"}},
        "spec": {
            "replicas": 6,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {
                    "containers": [
                        {
                            "name": "server",
                            "image": "nvcr.io/nvidia/tritonserver:24.05-py3",
                            "resources": {
                                "requests": {"cpu": "1", "memory": "1Gi"},
                                "limits": {"nvidia.com/gpu": "1"},
                            },
                        }
                    ]
                },
            },
        },
    }


def report_ready(hubfleet: Any, member: str, ready: int) -> None:
    """What the member's Deployment controller would write: its copy's status."""
    store = hubfleet.members[member].store
    [copy] = [o for o in store.list("deployments.apps", hubfleet.NAMESPACE) if _named(o)]
    status = {
        "observedGeneration": 1,
        "replicas": copy["spec"]["replicas"],
        "readyReplicas": ready,
        "availableReplicas": ready,
        "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}
        ],
    }
    store.replace({**copy, "status": status}, subresource="status")


def _named(obj: dict[str, Any]) -> bool:
    return bool(obj["metadata"]["name"] == NAME)


def shares(hubfleet: Any) -> dict[str, int]:
    return {
        member: copy["spec"]["replicas"]
        for member, copy in hubfleet.copies(NAME, kind="deployments.apps").items()
    }


def hub_object(hubfleet: Any) -> dict[str, Any]:
    [obj] = [
        o for o in hubfleet.hub.store.list("deployments.apps", hubfleet.NAMESPACE) if _named(o)
    ]
    return dict(obj)


def recorded(hubfleet: Any) -> dict[str, Any]:
    text = hubfleet.annotations(hub_object(hubfleet)).get("placer.dev/spread")
    return json.loads(text)["copies"] if text else {}


def test_divided_aggregated_failed_over_and_deleted(hubfleet: Any) -> None:
    hub = hubfleet.hub.store
    hub.create(yaml.safe_load((DEPLOY / "crds" / "placementpolicies.placer.dev.yaml").read_text()))
    hub.create(policy())
    running = hubfleet.controller(grace_period=2.0)
    hub.create(deployment(hubfleet.NAMESPACE))

    # divided 3/2/1, each copy marked as this hub's, m3's image from its registry
    hubfleet.wait_for(lambda: shares(hubfleet) == {"m1": 3, "m2": 2, "m3": 1}, what="3/2/1")
    copies = hubfleet.copies(NAME, kind="deployments.apps")
    images = {m: c["spec"]["template"]["spec"]["containers"][0]["image"] for m, c in copies.items()}
    assert images == {
        "m1": "nvcr.io/nvidia/tritonserver:24.05-py3",
        "m2": "nvcr.io/nvidia/tritonserver:24.05-py3",
        "m3": "eu.io/nvidia/tritonserver:24.05-py3",
    }
    assert {hubfleet.annotations(c)["placer.dev/hub-uid"] for c in copies.values()} == {
        hub_object(hubfleet)["metadata"]["uid"]
    }
    hubfleet.wait_for(
        lambda: (hubfleet.condition(hub_object(hubfleet)) or {}).get("status") == "True",
        what="Placed=True",
    )
    assert recorded(hubfleet) == {
        "m1": {"deployment": 3},
        "m2": {"deployment": 2},
        "m3": {"deployment": 1},
    }
    # one in-flight entry per copy, on its own member
    for member, server in hubfleet.members.items():
        entries = server.store.list(
            "configmaps", LEDGER_NAMESPACE, label_selector=f"{LABEL_IN_FLIGHT}=true"
        )
        pods = [len(json.loads(t)["pods"]) for e in entries for t in e["data"].values()]
        assert pods == [shares(hubfleet)[member]], member
    # the controller's API (/v1/placements) names every copy's cluster
    [item] = running.controller.placements_document()["placements"]
    assert (item["cluster"], item["clusters"]) == ("m1", ["m1", "m2", "m3"])
    # the Event follows the condition (written after it): wait for it
    placed = hubfleet.wait_for(
        lambda: [e for e in hubfleet.events(NAME) if e["reason"] == "Placed"],
        what="the Placed Event",
    )
    assert (
        "cluster m1: 3 pods, 3 GPUs; cluster m2: 2 pods, 2 GPUs; cluster m3: 1 pods"
        in (placed[0]["message"])
    )

    # status aggregated: ready replicas summed; the phase by the definition's rules (Degraded
    # while fewer than the hub object's 6 replicas are available, Running once all are)
    report_ready(hubfleet, "m1", 3)
    report_ready(hubfleet, "m2", 1)
    report_ready(hubfleet, "m3", 1)

    def status() -> dict[str, Any]:
        return dict(hub_object(hubfleet).get("status") or {})

    hubfleet.wait_for(lambda: status().get("readyReplicas") == 5, what="5 ready, summed")
    assert status()["replicas"] == 6
    hubfleet.wait_for(
        lambda: (
            hubfleet.annotations(hub_object(hubfleet)).get("placer.dev/phase") == "Running,Degraded"
        ),
        what="degraded",
    )
    report_ready(hubfleet, "m2", 2)
    hubfleet.wait_for(lambda: status().get("readyReplicas") == 6, what="6 ready")
    hubfleet.wait_for(
        lambda: hubfleet.annotations(hub_object(hubfleet)).get("placer.dev/phase") == "Running",
        what="running",
    )
    conditions = {c["type"]: c["status"] for c in status()["conditions"]}
    assert conditions == {"Available": "True", "Placed": "True"}

    # the hub object edited to 12 replicas: divided again, every copy applied with its share
    edited = hub_object(hubfleet)
    edited["spec"]["replicas"] = 12
    hub.replace(edited)
    hubfleet.wait_for(lambda: shares(hubfleet) == {"m1": 6, "m2": 4, "m3": 2}, what="6/4/2")

    # m3 lost: after the grace period its share is divided over m1 and m2 (3:2 of 12 = 7/5),
    # the copies there applied again; no replica twice among the reachable members
    hubfleet.members["m3"].stop()
    hubfleet.wait_for(
        lambda: recorded(hubfleet) == {"m1": {"deployment": 7}, "m2": {"deployment": 5}},
        timeout=30,
        what="re-divided",
    )
    reachable = {m: n for m, n in shares(hubfleet).items() if m != "m3"}
    assert reachable == {"m1": 7, "m2": 5}
    assert sum(reachable.values()) == 12
    lost = hubfleet.wait_for(
        lambda: next((e for e in hubfleet.events(NAME) if e["reason"] == "ClusterLost"), None),
        what="the ClusterLost Event",
    )
    assert "its share is divided over the other clusters" in lost["message"]

    # m3 back: its stale copy is deleted, the other two stay
    hubfleet.members["m3"].start()
    hubfleet.wait_for(lambda: shares(hubfleet) == {"m1": 7, "m2": 5}, timeout=30, what="stale")

    # deleting the hub object deletes every copy, then the object
    hub.delete("deployments.apps", NAME, hubfleet.NAMESPACE)
    hubfleet.wait_for(lambda: shares(hubfleet) == {}, timeout=30, what="copies deleted")
    hubfleet.wait_for(
        lambda: not [o for o in hub.list("deployments.apps", hubfleet.NAMESPACE) if _named(o)],
        what="hub object finalized",
    )
