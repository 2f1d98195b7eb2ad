"""Acceptance: the controller counts a hub workload's accelerators as ``placer plan`` does.

* Pods that name a DRA ResourceClaimTemplate need the devices it asks for: the controller
  reads the hub's templates (and claims) in the workload's namespace, as ``placer plan`` reads
  the ones given beside the workload (``decompose_all``).
* The fleet file's ``accelerators:`` section (``Catalog.with_accelerators``) applies to the
  hub's workloads and to the members' devices with ``placer controller --fleet FILE``.

Before, the controller decomposed hub objects with placer's default table and without claims,
and gathered with the default table: such demand counted as zero.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.accelerators.conftest import claim_template, resource_slice
from tests.controller.conftest import NAMESPACE


def claimed_job(hubfleet: Any, name: str, template: str, *, pods: int = 1) -> dict[str, Any]:
    """A queued Job whose pods ask for devices only through ``template`` (no GPU limits)."""
    body: dict[str, Any] = hubfleet.job(name, pods=pods)
    spec = body["spec"]["template"]["spec"]
    del spec["containers"][0]["resources"]["limits"]
    spec["resourceClaims"] = [{"name": "devices", "resourceClaimTemplateName": template}]
    return body


def decided(hubfleet: Any, name: str) -> dict[str, Any]:
    """The hub Job's ``Placed`` condition once it says placed or unschedulable."""

    def final() -> dict[str, Any] | None:
        obj = hubfleet.hub.store.get("jobs", name, NAMESPACE)
        condition = hubfleet.condition(obj) or {}
        return condition if condition.get("reason") in ("Placed", "Unschedulable") else None

    result: dict[str, Any] = hubfleet.wait_for(final, timeout=30, what=f"{name} decided")
    return result


def placed_event(hubfleet: Any, name: str) -> str:
    """The message of the hub Job's ``Placed`` Event (written after its condition)."""
    events = hubfleet.wait_for(
        lambda: [e for e in hubfleet.events(name) if e["reason"] == "Placed"],
        what=f"the Placed Event of {name}",
    )
    return str(events[0]["message"])


def test_hub_claim_templates_count_toward_the_pods_devices(hubfleet: Any) -> None:
    hub = hubfleet.hub.store
    hub.create(claim_template("eight-gpus", count=8))
    hub.create(claim_template("nine-gpus", count=9))
    hub.create(claimed_job(hubfleet, "fits", "eight-gpus", pods=2))
    hub.create(claimed_job(hubfleet, "too-big", "nine-gpus"))
    hubfleet.controller()
    assert decided(hubfleet, "fits")["status"] == "True"
    assert "2 pods, 16 GPUs" in placed_event(hubfleet, "fits")
    too_big = decided(hubfleet, "too-big")  # 9 GPUs a pod: no node has more than 8
    assert (too_big["status"], too_big["reason"]) == ("False", "Unschedulable")


def test_the_fleet_files_accelerator_table_applies_to_hub_workloads_and_members(
    hubfleet: Any, tmp_path: Path
) -> None:
    for i in range(hubfleet.NODES):  # only m3 has the devices, 4 a node
        hubfleet.members["m3"].store.create(
            resource_slice(f"m3-n{i}", 4, driver="tpu.example.com", kind="tpu")
        )
    fleet_file = tmp_path / "fleet.yaml"
    fleet_file.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {"name": m, "kubeconfig": str(hubfleet.members_kubeconfig), "context": m}
                    for m in hubfleet.MEMBERS
                ],
                "accelerators": {
                    "deviceClasses": [
                        {
                            "deviceClass": "tpu.example.com",
                            "driver": "tpu.example.com",
                            "resource": "example.com/tpu",
                        }
                    ]
                },
            }
        )
    )
    hub = hubfleet.hub.store
    hub.create(claim_template("four-tpus", "tpu.example.com", 4))
    hub.create(claim_template("five-tpus", "tpu.example.com", 5))
    hub.create(claimed_job(hubfleet, "tpu", "four-tpus", pods=2))
    hub.create(claimed_job(hubfleet, "too-many", "five-tpus"))
    hubfleet.process("fleet-file", members=("--fleet", str(fleet_file)))
    assert decided(hubfleet, "tpu")["status"] == "True"
    assert hubfleet.placed_cluster(hub.get("jobs", "tpu", NAMESPACE)) == "m3"
    too_many = decided(hubfleet, "too-many")  # 5 a pod: no node has more than 4
    assert (too_many["status"], too_many["reason"]) == ("False", "Unschedulable")
