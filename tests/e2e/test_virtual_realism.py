"""Virtual fleet realism: pods from the definition, bound where the plan says, suspension,
deletion, unschedulable pods, and capacity that really decreases."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from placer.definitions import Catalog, phases_of
from placer.dispatch.record import ANNOTATION_PLAN
from placer.model import Cluster, Fleet, Node
from placer.quantity import CPU, GPU, MEMORY, PODS
from placer.testing import Store
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import catalog_kinds, realism_setup

ROOT = Path(__file__).resolve().parents[2]
SEED = yaml.safe_load((ROOT / "examples" / "jobset-demo.yaml").read_text())
CATALOG = Catalog.builtin()
JOBSETS = "jobsets.jobset.x-k8s.io"


def fleet() -> Fleet:
    allocatable = {GPU: 8, CPU: 64_000, MEMORY: 512 * 2**30, PODS: 110}
    nodes = tuple(Node(f"n{i}", allocatable) for i in range(3))
    return Fleet((Cluster("c1", nodes),))


def owned_pods(store: Store, obj: dict[str, Any]) -> list[dict[str, Any]]:
    uid = obj["metadata"]["uid"]
    return [
        p
        for p in store.list("pods", obj["metadata"]["namespace"])
        if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences", []))
    ]


def test_every_catalog_kind_is_served() -> None:
    with VirtualFleet(fleet(), setup=realism_setup(CATALOG, pods=False)) as virtual:
        served = {(r.group, r.version, r.kind) for r in virtual.server("c1").store.resources()}
    assert set(catalog_kinds(CATALOG)) <= served


def test_pods_follow_the_plan_suspension_and_deletion() -> None:
    with VirtualFleet(fleet(), setup=realism_setup(CATALOG)) as virtual:
        store = virtual.server("c1").store
        body = copy.deepcopy(SEED)
        body["metadata"]["annotations"] = {
            ANNOTATION_PLAN: '{"replicatedjob/leader":["n2"],"replicatedjob/worker":["n2","n0"]}'
        }
        store.apply(body, field_manager="test")
        obj = store.get(JOBSETS, "demo", "default")
        assert phases_of(obj, CATALOG) == ("Running",)
        pods = owned_pods(store, obj)
        by_name = {p["metadata"]["name"]: p for p in pods}
        assert by_name["demo-replicatedjob-leader-0"]["spec"]["nodeName"] == "n2"
        assert by_name["demo-replicatedjob-worker-0"]["spec"]["nodeName"] == "n2"
        assert by_name["demo-replicatedjob-worker-1"]["spec"]["nodeName"] == "n0"
        labels = by_name["demo-replicatedjob-worker-1"]["metadata"]["labels"]
        assert labels["jobset.sigs.k8s.io/replicatedjob-name"] == "worker"
        assert all(p["status"]["phase"] == "Running" for p in pods)
        # suspended: the pods go; resumed: they come back
        store.apply({**body, "spec": {**body["spec"], "suspend": True}}, field_manager="test")
        assert owned_pods(store, obj) == []
        store.apply({**body, "spec": {**body["spec"], "suspend": False}}, field_manager="test")
        assert len(owned_pods(store, obj)) == 3
        store.delete(JOBSETS, "demo", "default")
        assert owned_pods(store, obj) == []


def test_a_pod_that_fits_no_node_stays_pending() -> None:
    with VirtualFleet(fleet(), setup=realism_setup(CATALOG)) as virtual:
        store = virtual.server("c1").store
        body = copy.deepcopy(SEED)
        for job in body["spec"]["replicatedJobs"]:
            job["replicas"] = 3  # 6 pods x 4 GPUs on 3 nodes x 8 GPUs: all fit
            resources = job["template"]["spec"]["template"]["spec"]["containers"][0]
            resources["resources"]["limits"] = {"nvidia.com/gpu": 5}  # one per node only
        store.apply(body, field_manager="test")
        pods = owned_pods(store, store.get(JOBSETS, "demo", "default"))
        bound = [p for p in pods if p["spec"].get("nodeName")]
        pending = [p for p in pods if not p["spec"].get("nodeName")]
        assert len(bound) == 3 and len(pending) == 3
        assert sorted(p["spec"]["nodeName"] for p in bound) == ["n0", "n1", "n2"]
        assert all(p["status"]["conditions"][0]["reason"] == "Unschedulable" for p in pending)
