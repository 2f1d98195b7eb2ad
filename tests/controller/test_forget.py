"""A hub object gone leaves every state object in one call (Controller.forget), alone.

The controller is built on a loopback hub and members but not run: its state objects are
filled by hand, as the informers, the loop and the cycles would, then the object is forgotten.
"""

from __future__ import annotations

from typing import Any

from placer.controller import Controller
from placer.controller.records import ANNOTATION_HUB_UID, LABEL_HUB, CopyRef
from placer.fleet import fleet_from_kubeconfigs
from placer.kube import ClientSettings
from placer.model import WorkloadRef

REF = WorkloadRef("batch/v1", "Job", "team-a", "a")


def hub_job(hubfleet: Any, uid: str, *, cluster: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = hubfleet.job("a")
    obj["metadata"].update(uid=uid, resourceVersion="7", generation=1)
    if cluster:
        obj["metadata"]["annotations"] = {"placer.dev/placed-cluster": cluster}
    return obj


def built(hubfleet: Any) -> Controller:
    fleet = fleet_from_kubeconfigs([hubfleet.members_kubeconfig], timeout=5.0)
    return Controller(hubfleet.hub_client(), fleet, hubfleet.settings())


def everything(controller: Controller) -> dict[str, int]:
    return {
        **controller.hub_cache.sizes(),
        **{f"queue {k}": v for k, v in controller.queue.sizes().items()},
        **controller.pending.sizes(),
        **controller.members.sizes(),
    }


def fill(controller: Controller, obj: dict[str, Any]) -> None:
    """What the informers, the loop and a cycle keep about one hub object."""
    uid = obj["metadata"]["uid"]
    controller.hub_cache.put(REF, obj)
    controller.hub_cache.decompose(obj)
    controller.queue.add(REF)
    controller.queue.add_rate_limited(REF)
    controller.pending.failed(REF, 1.0, 0)
    controller.pending.invalid(REF, "as written")
    controller.members.dispatched(uid, ["m1"])
    controller.members.inherit(uid)
    controller.members.block(REF, ("m2",))


def test_forget_drops_the_object_from_every_queue_and_cache(hubfleet: Any) -> None:
    controller = built(hubfleet)
    fill(controller, hub_job(hubfleet, "u-a", cluster="m1"))
    assert everything(controller) == {
        "objects": 1,
        "placed": 1,
        "by_uid": 1,
        "first_seen": 1,
        "decomposed": 1,
        "queue queued": 1,
        "queue processing": 0,
        "queue delayed": 1,
        "queue backoff": 1,
        "pending": 1,
        "backoff": 1,
        "invalid": 1,
        "touched": 1,
        "inherited": 1,
        "blocked": 1,
    }
    epoch = controller.pending.epoch
    controller.forget(REF, "u-a")
    assert not any(everything(controller).values()), everything(controller)
    assert controller.pending.epoch == epoch + 1  # its capacity comes back


def test_forget_leaves_a_new_object_of_the_same_name_alone(hubfleet: Any) -> None:
    controller = built(hubfleet)
    fill(controller, hub_job(hubfleet, "u-new"))
    before = everything(controller)
    epoch = controller.pending.epoch
    controller.forget(REF, "u-old")  # the DELETED event of the object it replaced
    assert everything(controller) == before
    assert controller.pending.epoch == epoch


def test_forget_queues_the_objects_copies_to_be_judged_stale(hubfleet: Any) -> None:
    copy = hubfleet.job("a")
    copy["metadata"]["labels"][LABEL_HUB] = "hub"
    copy["metadata"]["annotations"] = {ANNOTATION_HUB_UID: "u-a"}
    member = hubfleet.members["m2"]
    member.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    member.store.create(copy)
    controller = built(hubfleet)
    controller.members.open(ClientSettings())
    try:
        controller.hub_cache.put(REF, hub_job(hubfleet, "u-a"))
        controller.members.watch_all("batch/v1", "Job")
        hubfleet.wait_for(
            lambda: all(i.synced for i in controller.members.informers()), what="copies listed"
        )
        controller.queue.get(timeout=0.01)  # (what the informers queued meanwhile)
        controller.forget(REF, "u-a")
        assert controller.queue.get(timeout=0.01) == [
            CopyRef("m2", "batch/v1", "Job", "team-a", "a")
        ]
    finally:
        for informer in controller.members.informers():
            informer.stop()
            informer.join(timeout=5)
        controller.members.close()
