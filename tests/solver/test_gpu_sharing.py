"""GPU devices: shared pods need one device with enough thousandths, whole GPUs idle devices."""

from __future__ import annotations

from typing import Any

from placer.solver import charge, release


def test_shared_pods_fill_devices_and_whole_gpus_need_idle_ones(kit: Any, decide: Any) -> None:
    # one node, two devices: 600 and 1000 thousandths free
    the_fleet = kit.fleet(kit.cluster("c", kit.node("n0", gpus=2, devices=[600, 1000])))
    small = kit.workload("small", ("w", 1, kit.pod(share=500)))
    whole = kit.workload("whole", ("w", 1, kit.pod(gpus=1)))
    decision = decide([small, whole], the_fleet)
    pods = {p.workload.name: p.pods[0] for p in decision.placements}
    assert pods["small"].devices == (0,)  # best fit: the partly used device
    assert pods["whole"].devices == (1,)
    # two whole GPUs do not fit: only one device is idle
    two = kit.workload("two", ("w", 1, kit.pod(gpus=2)))
    refused = decide([two], the_fleet)
    assert "needs 2, largest free block 1" in kit.reasons(refused, "two")["c"]
    # a share larger than any device's free part is refused with the device numbers
    big_share = kit.workload("big", ("w", 1, kit.pod(share=700)))
    busy = kit.fleet(kit.cluster("c", kit.node("n0", gpus=2, devices=[600, 300])))
    why = kit.reasons(decide([big_share], busy), "big")["c"]
    assert why.startswith("no GPU device with 700 thousandths free")
    assert why.endswith("the most free on one device is 600)")


def _used_milli(fleet: Any) -> int:
    total = 0
    for node in (n for c in fleet.clusters for n in c.nodes):
        if node.gpu_devices is not None:
            total += sum(1000 - d for d in node.gpu_devices)
        else:
            total += 1000 * node.requested.get("nvidia.com/gpu", 0)
    return total


def test_charge_then_release_restores_the_fleet(kit: Any, decide: Any) -> None:
    the_fleet = kit.fleet(
        kit.cluster("c", kit.node("n0", gpus=4), kit.node("n1", gpus=2, devices=[1000, 400]))
    )
    jobs = [
        kit.workload("a", ("w", 2, kit.pod(gpus=1, cpu=4))),
        kit.workload("b", ("w", 3, kit.pod(share=300))),
    ]
    decision = decide(jobs, the_fleet)
    assert len(decision.placements) == 2
    assert _used_milli(the_fleet) == 600
    charged = charge(the_fleet, decision.placements)
    assert _used_milli(charged) == 600 + 2 * 1000 + 3 * 300
    pods_before = sum(n.requested.get("pods", 0) for n in the_fleet.clusters[0].nodes)
    pods_after = sum(n.requested.get("pods", 0) for n in charged.clusters[0].nodes)
    assert pods_after - pods_before == 5
    # what is left: 4 + 2 GPUs minus 2 whole minus shares; 3 more whole GPUs cannot fit
    more = kit.workload("more", ("w", 3, kit.pod(gpus=1)))
    assert decide([more], charged).placements == ()
    restored = release(charged, decision.placements)
    assert _used_milli(restored) == 600
    for before, after in zip(the_fleet.clusters[0].nodes, restored.clusters[0].nodes, strict=True):
        assert before.free == after.free


def test_placements_decided_apart_on_the_same_device_take_two_devices(
    kit: Any, decide: Any
) -> None:
    """Two decisions made on the same fleet both plan "device 0" for a one-GPU pod; charged
    together they take devices 0 and 1 (the device plugin picks the device, not placer), so
    the node shows the two GPUs used that it really has, not one."""
    the_fleet = kit.fleet(kit.cluster("c", kit.node("n0", gpus=4, devices=[1000] * 4)))
    first = decide([kit.workload("a", ("w", 1, kit.pod(gpus=1)))], the_fleet)
    second = decide([kit.workload("b", ("w", 1, kit.pod(gpus=1)))], the_fleet)
    assert first.placements[0].pods[0].devices == second.placements[0].pods[0].devices == (0,)
    charged = charge(the_fleet, [*first.placements, *second.placements])
    assert charged.clusters[0].nodes[0].gpu_devices == (0, 0, 1000, 1000)
    assert _used_milli(charged) == 2000
