"""Acceptance: a decision dispatched in concurrent parts never overcommits a node, even when
the cluster it chose refuses every apply and each part decides its workloads again.

bench_churn found it: a member whose token expired between a cycle's gather and its
dispatch refused a big decision's applies; each of the decision's parts (dispatched at once)
decided its failed workloads again on the fleet charged with the *first* decision, not with
the other parts' new choices, and several parts put their workloads on the same free node.
"""

from __future__ import annotations

from typing import Any

import pytest

from placer.controller import fanout
from placer.definitions import Catalog, decompose
from placer.dispatch import Manifest, PlacementRecord
from placer.dispatch.existing import placement_from_record
from placer.fleet import fleet_from_kubeconfigs, gather_fleet
from placer.solver import charge


def busy_pod(node: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"busy-{node}", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "c",
                    "image": "i",
                    "resources": {"requests": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
        "status": {"phase": "Running"},
    }


def test_parts_deciding_again_at_once_do_not_share_a_node(
    hubfleet: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # parts from 2 units (a real cycle splits from 64 units a part: hundreds of workloads)
    monkeypatch.setattr(fanout, "UNITS_PER_PART", 2)
    # m1 is the fullest member (4 of its 12 nodes busy): packing puts the 8 workloads there
    server = hubfleet.members["m1"]
    server.store.seed(busy_pod(f"m1-n{i}", hubfleet.GPUS) for i in range(8, 12))
    capacity = gather_fleet(fleet_from_kubeconfigs([hubfleet.members_kubeconfig]))
    # ... which refuses every apply of a Job (an admission webhook, RBAC, a stale token)
    refusal = server.faults.fail(403, times=None, verb="patch", resource="jobs.batch")
    hubfleet.controller(dispatch_parts=4, batch_window=1.0)
    names = [f"whole-{i}" for i in range(8)]
    for name in names:
        hubfleet.hub.store.create(hubfleet.job(name, gpus=hubfleet.GPUS))

    def decided() -> bool:
        return all(
            (hubfleet.condition(j) or {}).get("status") in ("True", "False")
            and (hubfleet.condition(j) or {}).get("reason") != "WaitingForCluster"
            for j in hubfleet.hub_jobs()
        )

    hubfleet.wait_for(decided, timeout=60, what="every workload decided")
    assert refusal.hits >= len(names)  # every one was tried on m1 first
    catalog = Catalog.builtin()
    placements = []
    for name in names:
        for cluster, copy in hubfleet.copies(name).items():
            record = PlacementRecord.from_object(copy)
            assert record is not None and cluster in ("m2", "m3"), (name, cluster)
            manifest = Manifest(copy, decompose(copy, catalog))
            placements.append(placement_from_record(manifest, cluster, record))
    assert len(placements) == len(names)  # m2 and m3 have room for all of them
    charged = charge(capacity, placements)
    over = [
        (c.name, n.name, n.free)
        for c in charged.clusters
        for n in c.nodes
        if any(v < 0 for v in n.free.values())
    ]
    assert not over, over
