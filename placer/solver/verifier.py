"""An independent check of a decision against its input: the realisation gap must be zero.

Written apart from the packer on purpose (plain dictionaries, no arrays, no shared scoring),
so a bug in the solver's bookkeeping cannot hide itself. It checks:

* every input workload is either placed once or unplaced once, and nothing else appears;
* each placement is in a reachable cluster of the fleet, honours the workload's pin, the first
  matching policy's cluster selector (when ``policies`` are given) and the cluster's taints;
* every pod of every component is there exactly once (an elastic component's pods
  ``0..k-1`` for one ``k`` between its ``replicas`` and ``max_replicas``), on a node of that
  cluster which accepts it (ready, not cordoned, selector, affinity, taints:
  :func:`placer.podspec.node_mismatch`);
* no node gets more than its free amount of any resource or pod slots, and GPU devices are
  never over-committed (whole GPUs on idle devices, shares within a device's free thousandths);
* the pods of each required topology constraint share one domain (one value of its level's
  node label, which each of their nodes carries);
* workloads of one ``placer.dev/group`` are all placed in one cluster, or none is;
* the summary counts match the lists.

Returns the problems as sentences; an empty list means the decision is valid.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from placer.model import GPU_SHARE, Decision, Fleet, Node, PodAssignment, Workload
from placer.podspec import node_mismatch, taint_not_tolerated
from placer.policy import PlacementPolicy, policy_for, topology_of
from placer.quantity import GPU, PODS
from placer.solver.state import node_devices

__all__ = ["verify"]


def verify(
    decision: Decision,
    workloads: Sequence[Workload],
    fleet: Fleet,
    *,
    policies: Sequence[PlacementPolicy] = (),
) -> list[str]:
    """Every way ``decision`` breaks the rules (see module docstring); ``[]`` when valid."""
    problems: list[str] = []
    by_ref = {w.ref: topology_of(w, policies) for w in workloads}
    refs = [p.workload for p in decision.placements] + [u.workload for u in decision.unplaced]
    seen = Counter(refs)
    for ref, count in seen.items():
        if ref not in by_ref:
            problems.append(f"{ref} is in the decision but not in the input")
        elif count > 1:
            problems.append(f"{ref} appears {count} times in the decision")
    for ref in by_ref:
        if ref not in seen:
            problems.append(f"{ref} is neither placed nor unplaced")
    clusters = {c.name: c for c in fleet.clusters}
    usage: dict[tuple[str, str], dict[str, int]] = {}
    devices: dict[tuple[str, str], list[int]] = {}
    for placement in decision.placements:
        workload = by_ref.get(placement.workload)
        cluster = clusters.get(placement.cluster)
        where = f"{placement.workload} in {placement.cluster}"
        if workload is None:
            continue
        if cluster is None:
            problems.append(f"{where}: no such cluster")
            continue
        if not cluster.reachable:
            problems.append(f"{where}: the cluster is unreachable")
        if workload.pinned_cluster and workload.pinned_cluster != cluster.name:
            problems.append(f"{where}: pinned to {workload.pinned_cluster}")
        policy = policy_for(workload, policies)
        if policy is not None and not policy.admits(cluster):
            problems.append(f"{where}: policy {policy.name} excludes the cluster")
        # an elastic component has its pods 0..k-1 for one k in [replicas, max_replicas]
        expected = {
            (c.name, c.instance, i): c
            for c in workload.components
            for i in range(max(c.replicas, c.max_replicas or 0))
        }
        got = Counter((p.component, p.instance, p.index) for p in placement.pods)
        top: dict[tuple[str, str], int] = {}
        for name, instance, index in got:
            top[(name, instance)] = max(top.get((name, instance), 0), index + 1)
        for pod_key, count in got.items():
            if pod_key not in expected:
                problems.append(f"{where}: unexpected pod {pod_key}")
            elif count > 1:
                problems.append(f"{where}: pod {pod_key} placed {count} times")
        for pod_key, demand in expected.items():
            needed = max(demand.replicas, top.get(pod_key[:2], 0))
            if pod_key not in got and pod_key[2] < needed:
                problems.append(f"{where}: pod {pod_key} has no node")
        nodes = {n.name: n for n in cluster.nodes}
        for pod in placement.pods:
            component = expected.get((pod.component, pod.instance, pod.index))
            if component is None:
                continue
            label = f"{where}: pod {component.label}[{pod.index}]"
            taint = taint_not_tolerated(cluster.taints, component.pod.tolerations)
            if taint is not None:
                problems.append(f"{label}: cluster taint {taint.key} not tolerated")
            node = nodes.get(pod.node)
            if node is None:
                problems.append(f"{label}: node {pod.node} is not in the cluster")
                continue
            mismatch = node_mismatch(component.pod, node)
            if mismatch:
                problems.append(f"{label} on {node.name}: {mismatch}")
            requests = component.pod.requests
            if pod.requests and dict(pod.requests) != dict(requests):
                problems.append(f"{label}: recorded requests differ from the component's")
            key = (cluster.name, node.name)
            used = usage.setdefault(key, {})
            for name, amount in requests.items():
                if name not in (GPU, GPU_SHARE):
                    used[name] = used.get(name, 0) + amount
            used[PODS] = used.get(PODS, 0) + 1
            problems += _gpus(label, node, requests, pod.devices, devices, key)
        problems += _topology(where, workload, placement.pods, nodes)
    for (cluster_name, node_name), used in usage.items():
        node = next(n for n in clusters[cluster_name].nodes if n.name == node_name)
        free = node.free
        for name, amount in used.items():
            available = node.free_pods if name == PODS else free.get(name, 0)
            if amount > available:
                problems.append(
                    f"node {node_name} of {cluster_name}: {name} over-committed "
                    f"({amount} placed, {available} free)"
                )
    problems += _groups(decision, workloads)
    summary = decision.summary
    if summary.placed != len(decision.placements):
        problems.append(
            f"summary says {summary.placed} placed, the decision has {len(decision.placements)}"
        )
    if summary.workloads != len(workloads):
        problems.append(
            f"summary says {summary.workloads} workloads, the input has {len(workloads)}"
        )
    return problems


def _gpus(
    label: str,
    node: Node,
    requests: Mapping[str, int],
    used: tuple[int, ...],
    devices: dict[tuple[str, str], list[int]],
    key: tuple[str, str],
) -> list[str]:
    whole = requests.get(GPU, 0)
    share = requests.get(GPU_SHARE, 0)
    if not whole and not share:
        return []
    state = devices.setdefault(key, list(node_devices(node)))
    if not used:
        if share or node.gpu_devices is not None:
            return [f"{label}: no GPU device recorded on {node.name}"]
        # whole GPUs on a node without a device model: a plain count
        idle = [i for i, d in enumerate(state) if d == 1000][:whole]
        if len(idle) < whole:
            return [f"{label}: {whole} GPUs but only {len(idle)} idle on {node.name}"]
        for i in idle:
            state[i] = 0
        return []
    if len(used) != whole + (1 if share else 0) or len(set(used)) != len(used):
        return [f"{label}: GPU devices {list(used)} do not match the request on {node.name}"]
    problems = []
    for i in used[:whole]:
        if not 0 <= i < len(state) or state[i] != 1000:
            problems.append(f"{label}: GPU device {i} of {node.name} is not idle")
        else:
            state[i] = 0
    if share:
        i = used[-1]
        if not 0 <= i < len(state) or state[i] < share:
            problems.append(f"{label}: GPU device {i} of {node.name} lacks {share} thousandths")
        else:
            state[i] -= share
    return problems


def _topology(
    where: str, workload: Workload, pods: Sequence[PodAssignment], nodes: Mapping[str, Node]
) -> list[str]:
    """Each required topology constraint's pods share one value of its level's node label."""
    problems = []
    for constraint in workload.topology:
        if not constraint.required:
            continue
        members = set(constraint.members)
        values = {
            nodes[p.node].labels.get(constraint.required)
            for p in pods
            if p.node in nodes
            and (f"{p.component}/{p.instance}" if p.instance else p.component) in members
        }
        if None in values or len(values) > 1:
            shown = ", ".join(sorted(str(v) for v in values))
            problems.append(
                f"{where}: the pods of {constraint.name!r} span {len(values)} domains of "
                f"{constraint.required} ({shown}); it requires one"
            )
    return problems


def _groups(decision: Decision, workloads: Sequence[Workload]) -> list[str]:
    placed = {p.workload: p.cluster for p in decision.placements}
    groups: dict[str, list[Workload]] = {}
    for workload in workloads:
        if workload.group:
            groups.setdefault(workload.group, []).append(workload)
    problems = []
    for name, members in groups.items():
        where = {placed.get(w.ref) for w in members}
        if len(where) > 1:
            problems.append(
                f"group {name}: members split ({', '.join(sorted(str(c) for c in where))})"
            )
    return problems
