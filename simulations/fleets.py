"""Example fleets: one trace cluster's nodes split into N member clusters (design C.1).

The traces each describe one cluster; a multi-cluster benchmark needs several. Three seeded
splits, all of which keep every node exactly once:

``by-model``
    Nodes sorted by GPU model (then shape and name) and cut into N contiguous blocks of about
    equal GPU count. Clusters come out nearly homogeneous, like real per-generation clusters;
    the seed is not used.
``stratified``
    Nodes shuffled with the seed, sorted by model (stable) and dealt round-robin: every cluster is
    a miniature of the fleet, each model's nodes spread to within one node.
``skewed``
    Contiguous model blocks as in ``by-model``, but sized in proportion to the N largest virtual
    clusters of SenseTime's Helios "Venus" cluster on one day (2020-09-28: 16 VCs of 8 to 256
    GPUs, ``simulations/data/helios-venus-vc-gpus``); the seed shuffles which size goes to which
    block. Very unequal clusters, as operators really carve fleets.

Cluster identities are synthetic but plausible and fixed by position (not by seed): a name, a
provider and region (``SITES``), and labels ``region``, ``provider`` and ``cost``. ``cost`` is
a relative price per GPU-hour: the GPU-weighted mean of a per-model price index (``MODEL_COST``:
T4 = 1; older or smaller GPUs cheaper, V100/G3 dearer) times a provider factor (on-premises
cheapest). These numbers are invented for placement policies to have something to weigh; they
are not prices. Every node gets its cluster's ``topology.kubernetes.io/region`` and ``zone``.

The PAI 2020 machine list (:func:`read_pai_nodes`) is a second fleet shape — mostly 2-GPU boxes.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from placer.errors import InputError
from placer.model import Cluster, Fleet, Node
from placer.quantity import CPU, GPU, MEMORY
from placer.traces.datasets import read_csv
from placer.traces.nodes import (
    DEFAULT_MAX_PODS,
    HOSTNAME_LABEL,
    REGION_LABEL,
    ZONE_LABEL,
    gpu_model,
    trace_node,
    with_labels,
)
from placer.traces.openb import read_openb_nodes
from simulations.datasets import HELIOS_DIR, PAI_DIR

__all__ = [
    "CAPTURED_AT",
    "HELIOS_DAY",
    "MODEL_COST",
    "OPENB_SITE",
    "SITES",
    "SPLITS",
    "Site",
    "helios_vc_gpus",
    "make_fleet",
    "openb_fleet",
    "pai_fleet",
    "read_pai_nodes",
    "replicated_openb",
    "split_nodes",
]

SPLITS = ("by-model", "stratified", "skewed")
HELIOS_DAY = "2020-09-28"
HELIOS_FILE = HELIOS_DIR / "cluster_gpu_number.csv"
PAI_FILE = PAI_DIR / "pai_machine_spec.csv"
#: capture time written into the example fleets: nominal (the openb paper's month), since the
#: fleets are built from a trace, not gathered.
CAPTURED_AT = "2023-07-01T00:00:00Z"
GIB = 2**30


@dataclass(frozen=True)
class Site:
    """Where a cluster of an example fleet lives."""

    name: str
    provider: str
    region: str
    zone: str


#: Cluster identities by position; beyond 16 clusters the list repeats with a numeric suffix.
SITES = (
    Site("aws-use1", "aws", "us-east-1", "us-east-1a"),
    Site("gcp-usc1", "gcp", "us-central1", "us-central1-a"),
    Site("azure-weu", "azure", "westeurope", "westeurope-1"),
    Site("onprem-hz", "onprem", "cn-hangzhou", "cn-hangzhou-dc1"),
    Site("aws-usw2", "aws", "us-west-2", "us-west-2b"),
    Site("gcp-euw4", "gcp", "europe-west4", "europe-west4-a"),
    Site("azure-eus", "azure", "eastus", "eastus-2"),
    Site("alibaba-sh", "alibaba", "cn-shanghai", "cn-shanghai-b"),
    Site("aws-euc1", "aws", "eu-central-1", "eu-central-1a"),
    Site("gcp-ase1", "gcp", "asia-east1", "asia-east1-b"),
    Site("azure-jpe", "azure", "japaneast", "japaneast-1"),
    Site("onprem-bj", "onprem", "cn-beijing", "cn-beijing-dc2"),
    Site("aws-apne1", "aws", "ap-northeast-1", "ap-northeast-1c"),
    Site("gcp-usw1", "gcp", "us-west1", "us-west1-a"),
    Site("azure-scus", "azure", "southcentralus", "southcentralus-1"),
    Site("alibaba-sg", "alibaba", "ap-southeast-1", "ap-southeast-1a"),
)
#: The single-cluster openb fleet (the FGD paper's cluster).
OPENB_SITE = Site("openb", "alibaba", "cn-hangzhou", "cn-hangzhou-h")
#: Relative price index per GPU-hour by GPU model (invented, see the module docstring).
MODEL_COST = {
    "A10": 1.5,
    "G2": 3.0,
    "G3": 4.0,
    "MISC": 0.6,
    "P100": 1.2,
    "T4": 1.0,
    "V100": 2.5,
    "V100M16": 2.5,
    "V100M32": 3.0,
}
_PROVIDER_FACTOR = {"aws": 1.0, "gcp": 0.95, "azure": 1.0, "alibaba": 0.85, "onprem": 0.6}
_PAI_COLUMNS = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")


# --------------------------------------------------------------------------------------------
# Splitting


def split_nodes(
    nodes: Sequence[Node],
    clusters: int,
    method: str = "by-model",
    *,
    seed: int = 0,
    helios_day: str = HELIOS_DAY,
) -> list[list[Node]]:
    """Split ``nodes`` into ``clusters`` non-empty groups (see the module docstring).

    Raises:
        InputError: unknown method, fewer nodes than clusters, or (``skewed``) fewer non-empty
            Helios VCs that day than clusters.
    """
    if method not in SPLITS:
        raise InputError(f"unknown split {method!r}", hint=f"use one of {', '.join(SPLITS)}")
    if not 1 <= clusters <= len(nodes):
        raise InputError(f"cannot split {len(nodes)} nodes into {clusters} clusters")
    if method == "stratified":
        shuffled = list(nodes)
        random.Random(seed).shuffle(shuffled)
        shuffled.sort(key=gpu_model)
        return [shuffled[i::clusters] for i in range(clusters)]
    ordered = sorted(nodes, key=_model_order)
    if method == "by-model":
        return _contiguous(ordered, [1] * clusters)
    sizes = helios_vc_gpus(helios_day)[:clusters]
    if len(sizes) < clusters:
        raise InputError(
            f"Helios Venus has {len(sizes)} non-empty virtual clusters on {helios_day}, "
            f"fewer than {clusters}",
            source=str(HELIOS_FILE),
            hint="use fewer clusters or another split",
        )
    random.Random(seed).shuffle(sizes)
    return _contiguous(ordered, sizes)


def _model_order(node: Node) -> tuple[str, int, int, int, str]:
    alloc = node.allocatable
    return (gpu_model(node), alloc.get(GPU, 0), alloc.get(CPU, 0), alloc.get(MEMORY, 0), node.name)


def _contiguous(ordered: Sequence[Node], weights: Sequence[int]) -> list[list[Node]]:
    """Cut ``ordered`` into ``len(weights)`` non-empty blocks with GPUs in proportion."""
    prefix = [0]
    for node in ordered:
        prefix.append(prefix[-1] + node.allocatable.get(GPU, 0))
    total, count, parts = prefix[-1], len(ordered), len(weights)
    cuts = [0]
    for k in range(1, parts):
        target = total * sum(weights[:k]) / sum(weights)
        i = bisect.bisect_left(prefix, target)
        if i > 0 and target - prefix[i - 1] <= prefix[i] - target:
            i -= 1  # the cut before the node that crosses the target is closer
        cuts.append(min(max(i, cuts[-1] + 1), count - (parts - k)))
    cuts.append(count)
    return [list(ordered[cuts[k] : cuts[k + 1]]) for k in range(parts)]


def helios_vc_gpus(day: str = HELIOS_DAY, path: Path = HELIOS_FILE) -> list[int]:
    """GPU counts of the non-empty Helios Venus virtual clusters on ``day``, largest first."""
    rows = read_csv(path, required=("date", "total"))
    for row in rows:
        if row.text("date") == day:
            columns = [c for c in row.values if c not in ("date", "total")]
            sizes = [row.integer(c) for c in columns]
            return sorted((s for s in sizes if s > 0), reverse=True)
    first, last = rows[0].text("date"), rows[-1].text("date")
    raise InputError(
        f"no row for {day!r}; the file covers {first} to {last}", source=str(path), field="date"
    )


# --------------------------------------------------------------------------------------------
# Fleets


def make_fleet(
    groups: Sequence[Sequence[Node]],
    *,
    sites: Sequence[Site] = SITES,
    captured_at: str = CAPTURED_AT,
) -> Fleet:
    """A fleet of one cluster per group, each with the identity of ``sites`` by position.

    Nodes are kept in model, shape, name order, so that identical nodes are neighbours and the
    fleet round-trips through a snapshot file unchanged (the writer groups identical nodes).

    Args:
        groups: the nodes of each cluster.
        sites: identities to use in order; when there are more groups, the list repeats with
            a numeric suffix on the names (``aws-use1-2``).
        captured_at: the snapshot's capture time.
    """
    clusters = []
    for index, nodes in enumerate(groups):
        site = sites[index % len(sites)]
        repeat = index // len(sites)
        topology = {REGION_LABEL: site.region, ZONE_LABEL: site.zone}
        clusters.append(
            Cluster(
                name=site.name + (f"-{repeat + 1}" if repeat else ""),
                nodes=tuple(with_labels(n, topology) for n in sorted(nodes, key=_model_order)),
                labels={
                    "region": site.region,
                    "provider": site.provider,
                    "cost": _cost(nodes, site.provider),
                },
            )
        )
    return Fleet(clusters=tuple(clusters), captured_at=captured_at)


def openb_fleet(clusters: int, split: str = "by-model", *, seed: int = 0) -> Fleet:
    """The 1,213 openb GPU nodes (GPU sharing modelled) split into ``clusters`` clusters.

    One cluster is the FGD paper's cluster itself, named ``openb`` (provider ``alibaba``).
    """
    nodes = read_openb_nodes("gpu")
    if clusters == 1:
        return make_fleet([nodes], sites=[OPENB_SITE])
    return make_fleet(split_nodes(nodes, clusters, split, seed=seed))


def replicated_openb(clusters: int, per_copy: int = 32) -> Fleet:
    """A fleet beyond one trace cluster: ``clusters`` clusters from copies of the 1,213 openb
    GPU nodes, each copy split by GPU model into ``per_copy`` clusters (one copy split into
    ``clusters`` when that is fewer), as :func:`openb_fleet` splits one.

    Copy ``k`` > 0 suffixes its nodes' names (and hostname labels) with ``-k``, so every node
    is distinct; cluster names repeat the sites with a numeric suffix (:func:`make_fleet`).

    Raises:
        InputError: ``clusters`` is not a multiple of the clusters per copy.
    """
    copies = max(1, -(-clusters // per_copy))
    if clusters % copies:
        raise InputError(
            f"cannot build {clusters} clusters from copies of openb split {per_copy} ways",
            hint=f"use a multiple of {per_copy}, or at most {per_copy}",
        )
    nodes = read_openb_nodes("gpu")
    groups: list[list[Node]] = []
    for copy in range(copies):
        renamed = list(nodes) if not copy else [_renamed(n, f"-{copy}") for n in nodes]
        groups += split_nodes(renamed, clusters // copies, "by-model")
    return make_fleet(groups)


def _renamed(node: Node, suffix: str) -> Node:
    labels = dict(node.labels)
    if HOSTNAME_LABEL in labels:
        labels[HOSTNAME_LABEL] = labels[HOSTNAME_LABEL] + suffix
    return replace(node, name=node.name + suffix, labels=labels)


def pai_fleet(clusters: int, split: str = "by-model", *, seed: int = 0) -> Fleet:
    """The 1,814 PAI 2020 GPU machines (GPU sharing modelled) split into ``clusters`` clusters."""
    return make_fleet(split_nodes(read_pai_nodes(), clusters, split, seed=seed))


def _cost(nodes: Sequence[Node], provider: str) -> str:
    gpus = [(n.allocatable.get(GPU, 0), gpu_model(n)) for n in nodes]
    total = sum(g for g, _ in gpus)
    if not total:
        return "0"
    index = sum(g * MODEL_COST.get(model, 1.0) for g, model in gpus) / total
    return f"{index * _PROVIDER_FACTOR.get(provider, 1.0):.2f}"


# --------------------------------------------------------------------------------------------
# PAI 2020 machines


def read_pai_nodes(
    path: Path = PAI_FILE,
    *,
    gpu_only: bool = True,
    gpu_devices: bool = True,
    max_pods: int = DEFAULT_MAX_PODS,
) -> tuple[Node, ...]:
    """The PAI 2020 machines as nodes ``pai-node-NNNN`` (row order; memory read as GiB).

    Args:
        path: the machine list (no header: ``machine,gpu_type,cap_cpu,cap_mem,cap_gpu``).
        gpu_only: drop the CPU-only machines.
        gpu_devices: model GPU sharing (1000 free per GPU).
        max_pods: ``pods`` allocatable of every node.
    """
    nodes = []
    for index, row in enumerate(read_csv(path, columns=_PAI_COLUMNS)):
        gpus = row.integer("cap_gpu")
        if gpu_only and not gpus:
            continue
        nodes.append(
            trace_node(
                f"pai-node-{index:04d}",
                cpu_milli=row.integer("cap_cpu", minimum=1) * 1000,
                memory_bytes=row.integer("cap_mem", minimum=1) * GIB,
                gpus=gpus,
                model=row.text("gpu_type"),
                gpu_devices=gpu_devices,
                max_pods=max_pods,
            )
        )
    return tuple(nodes)
