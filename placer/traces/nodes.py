"""Trace machines as :class:`placer.model.Node`: one node shape for every trace reader.

The traces describe a machine by CPU, memory, GPU count and a GPU model code. placer's model
wants allocatable resources in canonical units and the labels a real GPU node would carry, so
that the same selectors work on a snapshot as on a live cluster:

* the GPU model goes to ``nvidia.com/gpu.product`` (the label NVIDIA GPU feature discovery sets),
  with the trace's own code as value (``T4``, ``V100M32``, ``G2``); we do not invent marketing
  names for codes the trace keeps undisclosed. GPU-model constraints of trace tasks select on
  the same label, so the two always agree;
* ``nvidia.com/gpu.count`` is the GPU count, as GPU feature discovery sets it;
* ``pods`` is Kubernetes' default 110 per node (FGD's own node files allow 1001; with openb's
  tasks — at least 1 CPU each on nodes of at most 128 cores — the difference shows only on a
  128-core node full of 1-CPU pods);
* ``gpu_devices`` (GPU sharing) starts at 1000 free thousandths per device when requested.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from placer.model import Node
from placer.quantity import CPU, GPU, MEMORY, PODS

__all__ = [
    "DEFAULT_MAX_PODS",
    "GPU_COUNT_LABEL",
    "GPU_PRODUCT_LABEL",
    "HOSTNAME_LABEL",
    "REGION_LABEL",
    "ZONE_LABEL",
    "gpu_model",
    "trace_node",
    "with_labels",
]

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
HOSTNAME_LABEL = "kubernetes.io/hostname"
REGION_LABEL = "topology.kubernetes.io/region"
ZONE_LABEL = "topology.kubernetes.io/zone"
DEFAULT_MAX_PODS = 110


def trace_node(
    name: str,
    *,
    cpu_milli: int,
    memory_bytes: int,
    gpus: int,
    model: str,
    gpu_devices: bool = True,
    max_pods: int = DEFAULT_MAX_PODS,
) -> Node:
    """A node of a trace machine: allocatable cpu/memory/GPUs/pods, GPU labels, all free.

    Args:
        name: node name (also its ``kubernetes.io/hostname`` label).
        cpu_milli: CPU capacity in millicores.
        memory_bytes: memory capacity in bytes.
        gpus: whole GPUs (0 for a CPU node: no GPU resource, labels or devices).
        model: GPU model code (ignored when ``gpus`` is 0).
        gpu_devices: model GPU sharing: one entry of 1000 free thousandths per GPU.
        max_pods: the node's ``pods`` allocatable.
    """
    allocatable = {CPU: cpu_milli, MEMORY: memory_bytes, PODS: max_pods}
    labels = {HOSTNAME_LABEL: name}
    devices: tuple[int, ...] | None = None
    if gpus:
        allocatable[GPU] = gpus
        labels[GPU_PRODUCT_LABEL] = model
        labels[GPU_COUNT_LABEL] = str(gpus)
        if gpu_devices:
            devices = (1000,) * gpus
    return Node(name=name, allocatable=allocatable, labels=labels, gpu_devices=devices)


def gpu_model(node: Node) -> str:
    """The node's GPU model label (``""`` for a node without GPUs)."""
    return node.labels.get(GPU_PRODUCT_LABEL, "") if node.allocatable.get(GPU, 0) else ""


def with_labels(node: Node, labels: Mapping[str, str]) -> Node:
    """A copy of ``node`` with ``labels`` added (or replaced)."""
    return replace(node, labels={**node.labels, **labels})
