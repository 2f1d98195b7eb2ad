"""GPU fractions as Run:ai and KAI Scheduler ask for them: shares of one device, demand and
capacity (issue 20, acceptance: a 0.5 GPU pod, and two of them share one device)."""

from __future__ import annotations

from typing import Any

import pytest

from placer.accelerators import accelerators_from_dict
from placer.definitions import Catalog, decompose
from placer.errors import InterpretationError
from placer.model import GPU_SHARE, Workload
from placer.quantity import GPU
from placer.solver import solve, verify
from tests.accelerators.conftest import Gather, gpu_node, pod

RUNAI = {"gpu-fraction": "0.5"}


def runai_pod(name: str, fraction: str = "0.5", **extra: str) -> dict[str, Any]:
    """A pending pod asking for a fraction of a GPU the Run:ai / KAI way (no GPU resource)."""
    return pod(name, annotations={"gpu-fraction": fraction, **extra})


def workloads(*manifests: dict[str, Any], catalog: Catalog | None = None) -> list[Workload]:
    chosen = catalog or Catalog.builtin()
    return [decompose(m, chosen).workload for m in manifests]


def test_a_half_gpu_pod_asks_for_half_of_one_device() -> None:
    result = decompose(runai_pod("half"), Catalog.builtin())
    (component,) = result.components
    assert component.pod.requests[GPU_SHARE] == 500
    assert GPU not in component.pod.requests
    (source,) = component.sources
    assert (source.kind, source.name) == ("fraction", 'gpu-fraction: "0.5"')
    assert "0.5 of one device" in source.text


def test_two_half_gpu_pods_share_one_device_and_a_third_does_not_fit(gathered: Gather) -> None:
    fleet, _ = gathered([gpu_node("one-gpu", gpus=1)])
    pods = workloads(runai_pod("a"), runai_pod("b"), runai_pod("c"))
    decision = solve(pods, fleet)
    assert verify(decision, pods, fleet) == []
    first, second = (p.pods[0] for p in decision.placements)
    assert first.node == second.node == "one-gpu"
    assert first.devices == second.devices == (0,)
    (unplaced,) = decision.unplaced  # two halves fill the one device
    assert "gpu-milli" in unplaced.reasons["gpu"]


def test_bound_fractional_pods_take_their_share_of_a_device(gathered: Gather) -> None:
    fleet, _ = gathered(
        [
            gpu_node("two-gpus", gpus=2),
            pod("running", node="two-gpus", annotations={"gpu-fraction": "0.25"}),
            # the same shared device (KAI / Run:ai GPU group label) as the next one
            pod(
                "grouped-a",
                node="two-gpus",
                annotations={"gpu-fraction": "0.5"},
                labels={"runai-gpu-group": "g1"},
            ),
            pod(
                "grouped-b",
                node="two-gpus",
                annotations={"gpu-fraction": "0.5"},
                labels={"runai-gpu-group": "g1"},
            ),
            # KAI's reservation pod holds the shared device: not counted a second time
            pod(
                "reservation",
                node="two-gpus",
                namespace="kai-resource-reservation",
                requests={"nvidia.com/gpu": "1"},
            ),
        ]
    )
    (node,) = fleet.clusters[0].nodes
    assert sorted(node.gpu_devices or ()) == [0, 750]
    assert node.free[GPU] == 0
    assert node.requested[GPU_SHARE] == 1250
    # a new 0.5 pod still fits next to the 0.25 one; a 0.8 one does not
    fits, too_big = workloads(runai_pod("fits"), runai_pod("too-big", "0.8"))
    assert [p.workload.name for p in solve([fits], fleet).placements] == ["fits"]
    assert solve([too_big], fleet).placements == ()


def test_gpu_memory_is_a_share_of_the_configured_device_memory() -> None:
    forty = decompose(pod("mem", annotations={"gpu-memory": "20480"}), Catalog.builtin())
    assert forty.components[0].pod.requests[GPU_SHARE] == 250  # 20 GiB of 80 GiB
    table = accelerators_from_dict({"gpuMemoryPerDevice": "40Gi"}, source="fleet.yaml")
    smaller = Catalog.builtin().with_accelerators(table)
    forty = decompose(pod("mem", annotations={"gpu-memory": "20480"}), smaller)
    assert forty.components[0].pod.requests[GPU_SHARE] == 500
    assert "of 40Gi (gpuMemoryPerDevice)" in forty.components[0].sources[0].text


def test_a_share_on_several_devices_counts_whole_devices() -> None:
    result = decompose(
        runai_pod("multi", "0.5", **{"gpu-fraction-num-devices": "2"}), Catalog.builtin()
    )
    requests = result.components[0].pod.requests
    assert requests[GPU] == 2 and GPU_SHARE not in requests
    assert "counted as 2 whole devices" in result.components[0].sources[0].text


def test_annotation_names_are_configuration() -> None:
    table = accelerators_from_dict(
        {"fractions": [{"annotation": "example.com/gpu-share", "unit": "fraction"}]},
        source="fleet.yaml",
    )
    catalog = Catalog.builtin().with_accelerators(table)
    custom = decompose(pod("c", annotations={"example.com/gpu-share": "0.3"}), catalog)
    assert custom.components[0].pod.requests[GPU_SHARE] == 300
    # the default annotation means nothing with this table
    plain = decompose(runai_pod("d"), catalog)
    assert GPU_SHARE not in plain.components[0].pod.requests


@pytest.mark.parametrize(
    ("annotations", "fragment"),
    [
        ({"gpu-fraction": "half"}, "'half' is not a number"),
        ({"gpu-fraction": "1.5"}, "more than one device"),
        ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "x"}, "whole number >= 1"),
    ],
)
def test_a_malformed_fraction_is_an_error_naming_the_component(
    annotations: dict[str, str], fragment: str
) -> None:
    with pytest.raises(InterpretationError, match=fragment) as err:
        decompose(pod("bad", annotations=annotations), Catalog.builtin())
    assert "Pod/bad" in str(err.value) and "component 'pod'" in str(err.value)


def test_a_pod_with_whole_gpus_and_a_fraction_warns() -> None:
    both = pod("both", annotations=RUNAI, requests={"nvidia.com/gpu": "1"})
    result = decompose(both, Catalog.builtin())
    assert result.components[0].pod.requests[GPU] == 1
    assert GPU_SHARE not in result.components[0].pod.requests
    (warning,) = result.warnings
    assert "not counted" in warning and "Pod/both" in warning


def test_time_sliced_gpus_fit_as_units_and_show_as_gpu_shares() -> None:
    shared = pod("ts", requests={"cpu": "1", "nvidia.com/gpu.shared": "1"})
    result = decompose(shared, Catalog.builtin())
    component = result.components[0]
    assert component.pod.requests["nvidia.com/gpu.shared"] == 1
    (source,) = component.sources
    assert source.kind == "shared"
    assert "0.25 GPU at 4 shares per device" in source.text
