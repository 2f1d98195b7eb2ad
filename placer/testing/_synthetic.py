"""Synthetic cluster content: realistic Node and Pod objects in bulk, reproducibly.

For benchmarks and load tests that need "a 500-node GPU cluster with 5,000 pods" without a
snapshot to start from. Nodes are GPU servers (8 GPUs, 96 cores, 1 TiB by default) with the usual
labels (hostname, zone, region, GPU product), a few cordoned or tainted; pods are bound to nodes
without ever exceeding a node's allocatable (so the content is something a scheduler could have
produced), most Running, some Succeeded/Failed (which free their requests), some Pending and
unbound. Same arguments, same objects.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

__all__ = ["synthetic_cluster"]

_PRODUCTS = ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S")
_GI = 1024**3


def synthetic_cluster(
    nodes: int,
    pods: int,
    *,
    seed: int = 0,
    gpus_per_node: int = 8,
    cpu_per_node: int = 96,
    memory_gib_per_node: int = 1024,
    namespaces: int = 8,
    region: str = "region-1",
) -> Iterator[dict[str, Any]]:
    """Yield ``nodes`` Node objects, then ``pods`` Pod objects (and nothing else).

    Pods live in namespaces ``team-0`` .. ``team-{namespaces-1}`` (created implicitly by
    ``Store.seed``). About 85% of pods are bound and Running, 5% Succeeded or Failed, the rest
    Pending without a node; a bound pod asks for 1-2 GPUs (or none), 1-8 cores and 4-64 GiB, and
    is only bound where it fits.

    Args:
        nodes: number of nodes (``node-00000`` ...).
        pods: number of pods.
        seed: random seed.
        gpus_per_node: ``nvidia.com/gpu`` allocatable per node.
        cpu_per_node: cores allocatable per node.
        memory_gib_per_node: memory allocatable per node, GiB.
        namespaces: number of pod namespaces.
        region: ``topology.kubernetes.io/region`` of every node.
    """
    rng = random.Random(seed)
    free: list[list[int]] = []
    for i in range(nodes):
        name = f"node-{i:05d}"
        product = _PRODUCTS[i % len(_PRODUCTS)]
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "topology.kubernetes.io/region": region,
                    "topology.kubernetes.io/zone": f"{region}{'abc'[i % 3]}",
                    "nvidia.com/gpu.product": product,
                    "nvidia.com/gpu.count": str(gpus_per_node),
                },
            },
            "spec": {},
            "status": {
                "capacity": {
                    "cpu": str(cpu_per_node),
                    "memory": f"{memory_gib_per_node}Gi",
                    "nvidia.com/gpu": str(gpus_per_node),
                    "pods": "110",
                },
                "allocatable": {
                    "cpu": f"{cpu_per_node * 1000 - 500}m",
                    "memory": f"{memory_gib_per_node - 4}Gi",
                    "nvidia.com/gpu": str(gpus_per_node),
                    "pods": "110",
                },
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": f"boot-{i:05d}",
                    "containerRuntimeVersion": "containerd://1.7.20",
                    "kernelVersion": "6.1.0",
                    "kubeProxyVersion": "v1.31.0",
                    "kubeletVersion": "v1.31.0",
                    "machineID": f"machine-{i:05d}",
                    "operatingSystem": "linux",
                    "osImage": "Ubuntu 22.04.4 LTS",
                    "systemUUID": f"uuid-{i:05d}",
                },
            },
        }
        if i % 97 == 5:
            node["spec"]["unschedulable"] = True
        if i % 53 == 7:
            node["spec"]["taints"] = [
                {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}
            ]
        free.append(
            [gpus_per_node, cpu_per_node * 1000 - 500, (memory_gib_per_node - 4) * _GI, 110]
        )
        yield node
    for j in range(pods):
        gpus = rng.choice((0, 0, 1, 1, 2))
        cpu = rng.choice((1000, 2000, 4000, 8000))
        memory = rng.choice((4, 8, 16, 32, 64)) * _GI
        roll = rng.random()
        node_index: int | None = None
        if roll < 0.90 and nodes:
            start = rng.randrange(nodes)
            for k in range(min(nodes, 64)):
                n = (start + k) % nodes
                f = free[n]
                if f[0] >= gpus and f[1] >= cpu and f[2] >= memory and f[3] >= 1:
                    node_index = n
                    break
        phase = "Pending"
        if node_index is not None:
            phase = "Running" if roll < 0.85 else rng.choice(("Succeeded", "Failed"))
            if phase == "Running":
                f = free[node_index]
                f[0] -= gpus
                f[1] -= cpu
                f[2] -= memory
                f[3] -= 1
        requests: dict[str, str] = {"cpu": f"{cpu}m", "memory": str(memory)}
        container: dict[str, Any] = {
            "name": "main",
            "image": "registry.example/train:1",
            "resources": {"requests": requests},
        }
        if gpus:
            requests["nvidia.com/gpu"] = str(gpus)
            container["resources"]["limits"] = {"nvidia.com/gpu": str(gpus)}
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"pod-{j:06d}",
                "namespace": f"team-{j % max(namespaces, 1)}",
                "labels": {"app": f"job-{j // 8}", "placer.dev/test": "synthetic"},
            },
            "spec": {
                "containers": [container],
                "restartPolicy": "Never",
                "schedulerName": "default-scheduler",
            },
            "status": {"phase": phase},
        }
        if node_index is not None:
            pod["spec"]["nodeName"] = f"node-{node_index:05d}"
        yield pod
