"""Builders for the accelerator tests: GPU nodes, pods, DRA objects, and a gathered loopback
cluster (real HTTPS, a real kubeconfig file)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from placer.fleet import fleet_from_kubeconfigs, gather_fleet
from placer.model import Fleet, Node
from placer.quantity import CPU, GPU, MEMORY, PODS
from placer.testing import ApiServer
from placer.virtual.seeding import node_object
from tests.builders import objects

DRA = "resource.k8s.io/v1"
H100 = "NVIDIA H100 80GB HBM3"


def gpu_node(name: str, gpus: int = 0) -> dict[str, Any]:
    """The Node object of a Ready node with 32 cores, 256Gi and ``gpus`` device-plugin GPUs."""
    allocatable = {CPU: 32_000, MEMORY: 256 * 2**30, PODS: 110} | ({GPU: gpus} if gpus else {})
    return node_object(Node(name, allocatable, labels={"kubernetes.io/hostname": name}))


def pod(
    name: str,
    *,
    node: str | None = None,
    namespace: str = "team-a",
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    requests: Mapping[str, str] | None = None,
    claims: Iterable[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """A Pod (bound to ``node`` and Running when given, else Pending)."""
    extra: dict[str, Any] = {"resourceClaims": [dict(c) for c in claims]} if claims else {}
    return objects.pod(
        name,
        node=node,
        namespace=namespace,
        annotations=annotations,
        labels=labels,
        requests=requests or {"cpu": "1"},
        **extra,
    )


def resource_slice(
    node: str, gpus: int, *, driver: str = "gpu.nvidia.com", kind: str = "gpu", generation: int = 1
) -> dict[str, Any]:
    """The DRA driver's ResourceSlice for ``node``: devices ``<kind>-0..`` (v1 shape)."""
    return {
        "apiVersion": DRA,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}-{kind}-{generation}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"{kind}-{i}",
                    "attributes": {
                        "productName": {"string": H100},
                        "type": {"string": kind},
                        "uuid": {"string": f"GPU-{node}-{i}"},
                    },
                }
                for i in range(gpus)
            ],
        },
    }


def allocated_claim(
    name: str, node: str, devices: Iterable[str], *, driver: str = "gpu.nvidia.com"
) -> dict[str, Any]:
    """A ResourceClaim that the scheduler allocated ``devices`` of ``node`` to."""
    taken = list(devices)
    return {
        "apiVersion": DRA,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpus", "exactly": {"deviceClassName": driver, "count": len(taken)}}
                ]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpus", "driver": driver, "pool": node, "device": device}
                        for device in taken
                    ]
                }
            }
        },
    }


def claim_template(
    name: str, device_class: str = "gpu.nvidia.com", count: int = 1, namespace: str = "team-a"
) -> dict[str, Any]:
    """A ResourceClaimTemplate asking ``count`` devices of ``device_class`` (v1 ``exactly``)."""
    return {
        "apiVersion": DRA,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpus",
                            "exactly": {"deviceClassName": device_class, "count": count},
                        }
                    ]
                }
            }
        },
    }


Gather = Callable[[list[dict[str, Any]]], tuple[Fleet, Path]]


@pytest.fixture
def gathered(
    start_apiserver: Callable[..., ApiServer], kubeconfig_for: Callable[..., Path]
) -> Gather:
    """``gathered(objects)``: a loopback cluster ``gpu`` seeded with ``objects``, gathered over
    HTTPS through a kubeconfig file; returns the fleet and the kubeconfig."""

    def run(objects: list[dict[str, Any]]) -> tuple[Fleet, Path]:
        server = start_apiserver("gpu")
        server.store.seed(objects)
        kubeconfig = kubeconfig_for(server)
        return gather_fleet(fleet_from_kubeconfigs([kubeconfig])), kubeconfig

    return run
