"""Issue 15: work stuck on a member moves (placer.controller.stuck).

A Job placed by the controller whose pods the member's scheduler leaves Pending as
Unschedulable past pendingTimeout is re-placed on another member: its copy there is deleted
first (never two copies), the member is avoided, the hub object gets condition and Event
``Rescheduled`` with the member scheduler's message — exactly once. The members' pods are
written as their scheduler would leave them (the loopback members run no scheduler).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from placer.controller.stuck import avoid_patch, unschedulable_pod
from placer.policy import policy_from_dict

MESSAGE = "0/12 nodes are available: 12 Insufficient nvidia.com/gpu. preemption: not eligible"


def stamp(seconds_ago: float) -> str:
    moment = datetime.now(UTC) - timedelta(seconds=seconds_ago)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def pending_pod(name: str, owner: dict[str, Any], seconds_ago: float) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "creationTimestamp": stamp(seconds_ago),
            "ownerReferences": [
                {
                    "apiVersion": owner["apiVersion"],
                    "kind": owner["kind"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": MESSAGE,
                    "lastTransitionTime": stamp(seconds_ago),
                }
            ],
        },
    }


def test_unschedulable_pod_and_avoid_patch() -> None:
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u"},
    }
    pod = pending_pod("p", owner, 400)
    seconds, message = unschedulable_pod(pod, time.time()) or (0.0, "")
    assert 395 <= seconds <= 420 and message == MESSAGE
    bound = {**pod, "spec": {**pod["spec"], "nodeName": "n1"}}
    assert unschedulable_pod(bound, time.time()) is None
    gated = {**pod, "status": {"phase": "Pending", "conditions": []}}
    assert unschedulable_pod(gated, time.time()) is None
    obj = {"metadata": {"resourceVersion": "7", "annotations": {"placer.dev/avoid-clusters": "a"}}}
    patch = avoid_patch(obj, "b")
    assert patch["metadata"]["annotations"]["placer.dev/avoid-clusters"] == "a,b"
    assert patch["metadata"]["annotations"]["placer.dev/placed-cluster"] is None


def test_policy_pending_timeout() -> None:
    base = {
        "apiVersion": "placer.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "p"},
    }
    assert policy_from_dict({**base, "spec": {"pendingTimeout": "2m"}}).pending_timeout == 120.0
    assert policy_from_dict({**base, "spec": {"pendingTimeout": 30}}).pending_timeout == 30.0
    assert policy_from_dict(base).pending_timeout is None


def test_a_workload_stuck_pending_moves_to_another_member_exactly_once(hubfleet: Any) -> None:
    hubfleet.controller()
    hubfleet.hub.store.create(hubfleet.job("stuck", gpus=4, pods=2))
    hubfleet.hub.store.create(hubfleet.job("fresh", gpus=4, pods=2))

    def placed(name: str) -> dict[str, Any] | None:
        for job in hubfleet.hub_jobs():
            if job["metadata"]["name"] == name and hubfleet.placed_cluster(job):
                if (hubfleet.condition(job) or {}).get("status") == "True":
                    return job
        return None

    first = hubfleet.placed_cluster(hubfleet.wait_for(lambda: placed("stuck"), what="placed"))
    fresh_home = hubfleet.placed_cluster(hubfleet.wait_for(lambda: placed("fresh"), what="placed"))
    copy = hubfleet.copies("stuck")[first]
    # the member's scheduler leaves both pods Pending: for 10 minutes (past the default 5) ...
    hubfleet.members[first].store.seed(pending_pod(f"stuck-{i}", copy, 600) for i in range(2))
    # ... and the other workload's pods for a few seconds only (not past its timeout)
    fresh_copy = hubfleet.copies("fresh")[fresh_home]
    hubfleet.members[fresh_home].store.seed([pending_pod("fresh-0", fresh_copy, 5)])

    def moved() -> dict[str, Any] | None:
        job = placed("stuck")
        if job is not None and hubfleet.placed_cluster(job) != first:
            return job
        return None

    job = hubfleet.wait_for(moved, timeout=30, what="the stuck workload re-placed elsewhere")
    second = hubfleet.placed_cluster(job)
    assert second not in (None, first)
    assert hubfleet.annotations(job)["placer.dev/avoid-clusters"] == first
    assert list(hubfleet.copies("stuck")) == [second]  # the stuck copy was deleted
    events = [e for e in hubfleet.events("stuck") if e["reason"] == "Rescheduled"]
    assert len(events) == 1
    assert events[0]["type"] == "Warning"
    assert f"cluster {first}: 2 pod(s) unschedulable" in events[0]["message"]
    assert MESSAGE in events[0]["message"]
    # exactly once: a few more looks change nothing
    time.sleep(2.0)
    assert list(hubfleet.copies("stuck")) == [second]
    assert len([e for e in hubfleet.events("stuck") if e["reason"] == "Rescheduled"]) == 1
    # the workload pending for seconds only did not move
    assert list(hubfleet.copies("fresh")) == [fresh_home]
    assert not [e for e in hubfleet.events("fresh") if e["reason"] == "Rescheduled"]


def test_what_its_pods_name_travels_from_the_hub(hubfleet: Any) -> None:
    """A hub Job reading a ConfigMap and a Secret of the hub: both land with its copy, owned
    by it (placer.dispatch.dependencies)."""
    namespace = hubfleet.NAMESPACE
    hubfleet.hub.store.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": namespace},
            "data": {"EPOCHS": "3"},
        }
    )
    hubfleet.hub.store.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "token", "namespace": namespace},
            "data": {"t": "c2VjcmV0"},
        }
    )
    job = hubfleet.job("reads", gpus=1)
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["envFrom"] = [{"configMapRef": {"name": "settings"}}]
    container["env"] = [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "token", "key": "t"}}}]
    hubfleet.controller()
    hubfleet.hub.store.create(job)

    def placed() -> str | None:
        for obj in hubfleet.hub_jobs():
            if obj["metadata"]["name"] == "reads" and hubfleet.placed_cluster(obj):
                if (hubfleet.condition(obj) or {}).get("status") == "True":
                    return hubfleet.placed_cluster(obj)
        return None

    member = hubfleet.wait_for(placed, what="placed")
    store = hubfleet.members[member].store
    copy = hubfleet.copies("reads")[member]
    for resource, name in (("configmaps", "settings"), ("secrets", "token")):
        obj = store.get(resource, name, namespace)
        assert obj["metadata"]["labels"]["placer.dev/placed-by"] == "placer"
        assert [r["uid"] for r in obj["metadata"]["ownerReferences"]] == [copy["metadata"]["uid"]]
    assert store.get("secrets", "token", namespace)["data"] == {"t": "c2VjcmV0"}


def test_a_failed_copy_is_retried_elsewhere_as_often_as_the_policy_says(hubfleet: Any) -> None:
    import threading

    from placer.controller import Controller
    from placer.fleet import fleet_from_kubeconfigs
    from tests.controller.conftest import Running

    policy = policy_from_dict(
        {
            "apiVersion": "placer.dev/v1alpha1",
            "kind": "PlacementPolicy",
            "metadata": {"name": "retry-once"},
            "spec": {"retry": {"onFailure": 1}},
        }
    )
    fleet = fleet_from_kubeconfigs([hubfleet.members_kubeconfig], timeout=5.0)
    controller = Controller(hubfleet.hub_client(), fleet, hubfleet.settings(), policies=[policy])
    stop = threading.Event()
    thread = threading.Thread(target=lambda: controller.run(stop), daemon=True)
    thread.start()
    hubfleet.running.append(Running(controller, stop, thread))
    hubfleet.hub.store.create(hubfleet.job("flaky", gpus=1))

    def placed_on() -> str | None:
        for obj in hubfleet.hub_jobs():
            if obj["metadata"]["name"] == "flaky" and hubfleet.placed_cluster(obj):
                if (hubfleet.condition(obj) or {}).get("status") == "True":
                    return hubfleet.placed_cluster(obj)
        return None

    def fail(member: str) -> None:
        store = hubfleet.members[member].store
        copy = store.get("jobs", "flaky", hubfleet.NAMESPACE)
        copy["status"] = {"conditions": [{"type": "Failed", "status": "True"}]}
        store.put(copy)

    first = hubfleet.wait_for(placed_on, what="placed")
    fail(first)
    second = hubfleet.wait_for(
        lambda: (c := placed_on()) not in (None, first) and c, timeout=30, what="retried"
    )
    job = next(j for j in hubfleet.hub_jobs() if j["metadata"]["name"] == "flaky")
    assert hubfleet.annotations(job)["placer.dev/retries"] == "1"
    assert list(hubfleet.copies("flaky")) == [second]
    [event] = [e for e in hubfleet.events("flaky") if e["reason"] == "Retried"]
    assert f"cluster {first}: its copy failed there (retry 1 of 1)" in event["message"]
    # the second failure is final: no more retries
    fail(second)
    time.sleep(2.5)
    assert list(hubfleet.copies("flaky")) == [second]
    assert len([e for e in hubfleet.events("flaky") if e["reason"] == "Retried"]) == 1
