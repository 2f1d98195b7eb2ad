"""Preemption and reclaim: the running workloads to evict so that a pending one fits.

Who may be evicted (issue #14; KAI Scheduler's *reclaim* and *preempt* actions):

* **reclaim** — the preemptor is in quota (its demand stays within the quota of its queue, and
  of every ancestor once the victims are evicted): running work of *other* queues that are
  over their quota, whose queue is ``reclaimable``, with a priority no higher than the
  preemptor's (priorities are never inverted, :mod:`placer.solver.fairshare`). Only
  over-quota resources are reclaimed: from a victim queue ``q`` at most ``U_{q,r} − Q_{q,r}``
  of each resource ``r`` it lists, so a queue within its quota is never a victim and one over
  it is never taken below it.
* **fair-share reclaim** — the preemptor is over its quota (its queue's deserved share used),
  and another queue, over its own quota too, holds more over-quota capacity per unit of
  ``overQuotaWeight`` than the preemptor's queue will once placed (KAI's and Run:ai's reclaim
  towards the fair share of what is left after the quotas): its over-quota work, ``reclaimable``
  and of a priority no higher than the preemptor's, may be evicted, but never so much that the
  victim queue ends below the preemptor's: per victim queue ``q``, preemptor queue ``p`` and
  resource ``r`` the preemptor asks for and both list with a weight,
  ``Σ_{v ∈ q} d_{v,r} x_v ≤ O_{q,r} − (ω_{q,r} / ω_{p,r}) · (O_{p,r} + D_r)`` with ``O`` the
  over-quota use (``max(0, U − Q)``; the preemptor's counted as placed) — so the two queues'
  weighted over-quota shares ``O / ω`` meet and never cross, and the evicted work cannot take
  its room back by the same rule (no ping-pong). Leaf queues are compared on their own rules
  (ancestors' over-quota shares are not balanced). Only with ``fair_share=True`` (off by
  default: ``placer simulate --fair-share-reclaim``).
* **preempt** — running work of the preemptor's own queue with a strictly lower priority.
* **protected** — a workload labelled ``placer.dev/preemptible: "false"`` is never evicted.
* Victims are whole workloads (a gang is evicted whole or not at all).

Model, per cluster ``c`` the preemptor may use (CP-SAT, one small model over the candidates
``V_c`` running there):

* ``x_v ∈ {0, 1}``: evict ``v``; ``d_v`` its requests, ``D`` the preemptor's, ``f_c`` the
  cluster's free totals.
* room: ``f_{c,r} + Σ_v d_{v,r} x_v ≥ D_r`` for every resource ``r`` the preemptor asks for,
  GPUs counted in thousandths of a device (whole and shared together; ``f`` from the devices'
  free thousandths) — necessary; the real packer decides, below;
* node rows (:func:`_node_rows`): ``s_{n,k}`` of the preemptor's pods of component ``k`` on
  node ``n`` (a node its selector, affinity and taints allow), ``Σ_k a_{k,r} s_{n,k} ≤ F_{n,r} +
  Σ_v h_{v,n,r} x_v`` for every resource ``r`` its pods ask (``pods`` 1 a pod; GPUs as the
  devices wholly free once the victims there are gone) and ``Σ_n s_{n,k} ≥ count_k``: the
  preemptor's pods fit the nodes one by one, not only the cluster's totals;
* device rows (:func:`_device_rows`) for pods sharing a GPU (``σ_k`` thousandths):
  ``Σ_k σ_k y_{d,k} ≤ f_d + Σ_v m_{v,d} x_v`` per device ``d`` of the node and
  ``s_{n,k} = Σ_d y_{d,k}`` — a shared pod's thousandths on one device;
* reclaim only over quota: ``Σ_{v ∈ q} d_{v,r} x_v ≤ U_{q,r} − Q_{q,r}`` per victim queue ``q``
  taken by reclaim and resource ``r`` it lists (ancestors shared with the preemptor aside);
* fair-share reclaim only down to the preemptor's share: the bound above, per victim queue
  taken by fair-share reclaim;
* the caller's caps (:func:`evict_among`'s ``caps``, fair-share rebalancing's bound,
  :mod:`placer.solver.rebalance`): ``Σ_{v ∈ q} d_{v,r} x_v ≤ cap_{q,r}`` per victim queue;
* reclaim only in quota: ``U_{p,r} − Σ_{v under p} d_{v,r} x_v + D_r ≤ Q_{p,r}`` for every
  ancestor ``p`` of the preemptor's queue when a reclaim victim from outside ``p`` is chosen
  (reclaiming from a sibling leaves their common parent's use as it was: KAI compares queues
  where they diverge);
* the preemptor's limits: ``U_{p,r} − Σ_{v under p} d_{v,r} x_v + D_r ≤ L_{p,r}`` for every
  queue ``p`` of its chain (evicting its own queue's work makes room under a full limit);
* objective, lexicographic, solved in turn: fewest GPUs evicted (thousandths), then fewest
  workloads, then the lowest priorities (``Σ`` priority ranks), then the youngest (``Σ`` age
  ranks, 0 the most recently started); :func:`evict_among` with ``lost_at`` puts the least
  work thrown away first (``Σ`` GPU-minutes run, a reservation's eviction).

The optimum is then *realised*: the victims are released on the cluster's nodes and the
preemptor packed there by the solver; when the solver's packer (best fit, one pod shape after
another) misses, the pods go where the model's node rows put them (``s_{n,k}``, and devices as
the packer gives them, each pod checked to fit: :func:`_plan_placement`) — a gang of several
pod shapes on nodes of several shapes packs that way where best fit strands one shape's room
behind the other (the eviction was lost: ``MAX_ROUNDS`` interchangeable sets cut off in turn).
Placement policies, topology domains and pinned or avoided clusters are left to the packer.
When it does not pack, no subset of that set ``S`` can
(it frees less), so the no-good ``Σ_{v∉S} x_v ≥ 1`` asks for some other victim too and the
model is solved again (up to ``MAX_ROUNDS``; the cut of the empty set is "evict something").
The room and node rows hold for every set that packs (they are necessary), and the cuts remove
only sets that do not pack, so the first set that packs has the fewest GPUs (then workloads…)
of all sets that pack and obey the rules: never more is evicted than the preemptor needs on
real nodes, as far as the packer finds a packing where one exists. Of all clusters, the victim
set with the least (GPUs, workloads, priorities, ages) wins.

Pure: reads its arguments, returns new objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from placer.model import (
    GPU_SHARE,
    Cluster,
    Fleet,
    Node,
    Placement,
    PodAssignment,
    Workload,
    WorkloadRef,
    pods_requests,
)
from placer.podspec import node_mismatch
from placer.policy import PlacementPolicy, policy_for
from placer.quantity import GPU, PODS
from placer.queues import QueueSet, Usage, membership
from placer.solver.charging import release
from placer.solver.decide import solve
from placer.solver.state import ClusterState, PodShape, node_devices, resource_names

__all__ = [
    "FAIR_SHARE",
    "LABEL_PREEMPTIBLE",
    "MAX_ROUNDS",
    "PREEMPT",
    "RECLAIM",
    "Eviction",
    "Victim",
    "Victimised",
    "evict_among",
    "find_victims",
]

#: ``"false"`` protects a workload from eviction.
LABEL_PREEMPTIBLE = "placer.dev/preemptible"
RECLAIM = "reclaim"
PREEMPT = "preempt"
FAIR_SHARE = "fair-share"
#: victim sets tried per cluster before giving up on it.
MAX_ROUNDS = 8
#: CP-SAT seconds per objective stage (the models are tiny).
STAGE_SECONDS = 2.0
#: ... and at least (a stage that finds no answer in time loses the eviction for a decision).
MIN_STAGE_SECONDS = 0.25

#: the victim model's packing of the preemptor's pods: ``s_{n,k}`` by (node, run ``k``).
Plan = Mapping[tuple[str, int], int]


@dataclass(frozen=True)
class Victim:
    """A running workload that might be evicted."""

    workload: Workload
    placement: Placement
    #: when it started (seconds, any clock): the youngest is evicted first on a tie.
    started: float = 0.0


@dataclass(frozen=True)
class Victimised:
    """One evicted workload and why (``RECLAIM`` or ``PREEMPT``)."""

    workload: WorkloadRef
    cluster: str
    reason: str
    gpu_milli: int


@dataclass(frozen=True)
class Eviction:
    """A preemptor, the victims to evict for it, and where it then goes (on the fleet with the
    victims released)."""

    preemptor: WorkloadRef
    cluster: str
    victims: tuple[Victimised, ...]
    placement: Placement

    @property
    def gpu_milli(self) -> int:
        return sum(v.gpu_milli for v in self.victims)


def _milli(requests: Mapping[str, int]) -> int:
    return requests.get(GPU, 0) * 1000 + requests.get(GPU_SHARE, 0)


def fair_bounds(
    queue: str, preemptor_queue: str, demand: Mapping[str, int], queues: QueueSet, usage: Usage
) -> dict[str, int]:
    """Per resource ``r``, the most fair-share reclaim may take from ``queue`` for a preemptor of
    ``preemptor_queue`` asking ``demand``: ``O_{q,r} − (ω_{q,r} / ω_{p,r}) · (O_{p,r} + D_r)``
    (module docstring), over the resources the preemptor asks for that both queues list with a
    weight. Empty: no such resource (no fair-share reclaim between them)."""
    theirs = queues.queues[queue].resources
    mine = queues.queues[preemptor_queue].resources
    bounds: dict[str, int] = {}
    for resource, amount in demand.items():
        if not amount or resource not in theirs or resource not in mine:
            continue
        rule, own = theirs[resource], mine[resource]
        if rule.over_quota_weight <= 0 or own.over_quota_weight <= 0:
            continue
        over = max(0, usage.used(queue, resource) - rule.quota)
        after = max(0, usage.used(preemptor_queue, resource) + amount - own.quota)
        bound = over - rule.over_quota_weight / own.over_quota_weight * after
        bounds[resource] = int(bound) if bound >= 0 else -1
    return bounds


def _candidates(
    preemptor: Workload,
    running: Sequence[Victim],
    queues: QueueSet,
    usage: Usage,
    fair_share: bool = False,
) -> list[tuple[Victim, str]]:
    """The running workloads the rules allow to evict for ``preemptor``, with the rule."""
    mine = membership(preemptor, queues)
    if mine.refusal is not None:
        return []
    # in its own queue's quota; the ancestors' are checked with the victims evicted (work
    # reclaimed from a sibling gives a shared parent its room back)
    demand = preemptor.total_requests()
    in_quota = usage.quota_problem(mine.queue, demand, ancestors=False) is None
    fair: dict[str, bool] = {}
    out = []
    for victim in running:
        workload = victim.workload
        if workload.labels.get(LABEL_PREEMPTIBLE, "").lower() == "false":
            continue
        theirs = membership(workload, queues)
        if theirs.queue == mine.queue:
            if theirs.priority < mine.priority:
                out.append((victim, PREEMPT))
            continue
        if theirs.priority > mine.priority or theirs.queue is None:
            continue
        queue = queues.queues[theirs.queue]
        if not queue.reclaimable:
            continue
        if not _over(usage, theirs.queue):
            continue  # within its quota: never reclaimed
        if in_quota:
            out.append((victim, RECLAIM))
            continue
        if not fair_share or mine.queue is None:
            continue
        if theirs.queue not in fair:
            bounds = fair_bounds(theirs.queue, mine.queue, demand, queues, usage)
            fair[theirs.queue] = bool(bounds) and all(b > 0 for b in bounds.values())
        if fair[theirs.queue]:
            out.append((victim, FAIR_SHARE))
    return out


def _over(usage: Usage, queue: str) -> bool:
    rules = usage.rules(queue)
    return any(usage.used(queue, r) > rule.quota for r, rule in rules.items())


def find_victims(
    preemptor: Workload,
    fleet: Fleet,
    running: Sequence[Victim],
    queues: QueueSet,
    usage: Usage,
    *,
    policies: Sequence[PlacementPolicy] = (),
    seed: int = 0,
    time_limit: float = 0.5,
    fair_share: bool = False,
) -> Eviction | None:
    """The least disruptive eviction that lets ``preemptor`` be placed (see the module
    docstring), or ``None``. ``fleet`` is charged with ``running``; ``usage`` books it;
    ``fair_share``: over-quota work may reclaim towards the weighted fair share."""
    candidates = _candidates(preemptor, running, queues, usage, fair_share)
    return evict_among(
        preemptor,
        fleet,
        candidates,
        queues=queues,
        usage=usage,
        policies=policies,
        seed=seed,
        time_limit=time_limit,
    )


def evict_among(
    preemptor: Workload,
    fleet: Fleet,
    candidates: Sequence[tuple[Victim, str]],
    *,
    queues: QueueSet | None = None,
    usage: Usage | None = None,
    policies: Sequence[PlacementPolicy] = (),
    seed: int = 0,
    time_limit: float = 0.5,
    lost_at: float | None = None,
    caps: Mapping[str, Mapping[str, int]] | None = None,
) -> Eviction | None:
    """The least disruptive eviction among ``candidates`` (victims some rule already allowed,
    each with its reason) that lets ``preemptor`` be placed: the model of the module docstring
    on every cluster, the least (GPUs, workloads, priorities, ages) winning; ``None`` when no
    set of them makes room. Without ``queues`` only the room, slot and objective rows apply
    (no quota rows: the caller's rule chose the candidates, e.g. a reservation's,
    :mod:`placer.solver.reservation_preemption`). With ``lost_at`` (the time of the eviction,
    on the victims' ``started`` clock) a first objective stage comes before the others: the
    least work thrown away, ``Σ_v d_v (lost_at − started_v) x_v`` in GPU-minutes (work
    without a checkpoint starts over). ``caps``: per victim queue, the most of each resource
    its evicted work may give up (``Σ_{v ∈ q} d_{v,r} x_v ≤ caps_{q,r}``; fair-share
    rebalancing's bound, :mod:`placer.solver.rebalance`)."""
    if not candidates:
        return None
    queues = queues if queues is not None else QueueSet()
    usage = usage if usage is not None else Usage(queues)
    mine = membership(preemptor, queues)
    demand = preemptor.total_requests()
    best: tuple[tuple[int, ...], Eviction] | None = None
    by_cluster: dict[str, list[tuple[Victim, str]]] = {}
    for victim, rule in candidates:
        by_cluster.setdefault(victim.placement.cluster, []).append((victim, rule))
    for cluster in fleet.clusters:
        here = by_cluster.get(cluster.name)
        if not here or not cluster.reachable:
            continue
        found = _on_cluster(
            preemptor,
            mine.queue if mine.queue in queues else None,  # (a label naming no queue given)
            demand,
            fleet,
            cluster.name,
            here,
            queues,
            usage,
            (policies, seed, time_limit, lost_at, caps or {}),
        )
        if found is not None and (best is None or found[0] < best[0]):
            best = found
    return best[1] if best is not None else None


def _ranks(values: Sequence[float]) -> list[int]:
    """Dense ranks, 0 for the least value; equal values share a rank."""
    position = {value: rank for rank, value in enumerate(sorted(set(values)))}
    return [position[value] for value in values]


def _on_cluster(
    preemptor: Workload,
    queue: str | None,
    demand: Mapping[str, int],
    fleet: Fleet,
    name: str,
    here: list[tuple[Victim, str]],
    queues: QueueSet,
    usage: Usage,
    knobs: tuple[
        Sequence[PlacementPolicy], int, float, float | None, Mapping[str, Mapping[str, int]]
    ],
) -> tuple[tuple[int, ...], Eviction] | None:
    policies, seed, time_limit, lost_at, caps = knobs
    cluster = fleet.cluster(name)
    free = cluster.free()
    free_milli = sum(sum(node_devices(n)) for n in cluster.nodes if n.usable)
    requests = [v.workload.total_requests() for v, _ in here]
    gpu = [_milli(r) for r in requests]
    priorities = _ranks([float(membership(v.workload, queues).priority) for v, _ in here])
    ages = _ranks([-v.started for v, _ in here])  # 0: the youngest
    # GPU-minutes each has run (thrown away if evicted), when the caller weighs them first
    lost = (
        [round(gpu[i] * max(0.0, lost_at - v.started) / 60_000) for i, (v, _) in enumerate(here)]
        if lost_at is not None
        else None
    )
    cuts: list[list[int]] = []
    for _ in range(MAX_ROUNDS):
        found = _solve_model(
            demand,
            (free, free_milli, _Nodes.of(preemptor, cluster.nodes)),
            requests,
            gpu,
            priorities,
            ages,
            here,
            queue,
            queues,
            usage,
            cuts,
            seed,
            time_limit,
            lost,
            caps,
        )
        if found is None:
            return None
        chosen, plan = found
        placement = _realise(
            preemptor, fleet, name, [here[i][0] for i in chosen], policies, seed, plan
        )
        if placement is None:
            cuts.append(chosen)
            continue
        needed = chosen  # the model's optimum: no victim can stay (see the module docstring)
        victims = tuple(
            Victimised(
                workload=here[i][0].workload.ref,
                cluster=name,
                reason=here[i][1],
                gpu_milli=gpu[i],
            )
            for i in sorted(needed)
        )
        key = (
            sum(lost[i] for i in needed) if lost is not None else 0,
            sum(gpu[i] for i in needed),
            len(needed),
            sum(priorities[i] for i in needed),
            sum(ages[i] for i in needed),
        )
        return key, Eviction(
            preemptor=preemptor.ref, cluster=name, victims=victims, placement=placement
        )
    return None


@dataclass(frozen=True)
class _Run:
    """The preemptor's pods of one component: what one pod asks on a node (every resource but
    shared-GPU thousandths, ``pods`` = 1, GPUs as whole devices), how many, and the nodes it
    may use (selector, affinity, taints)."""

    requests: Mapping[str, int]
    count: int
    nodes: frozenset[str]
    #: thousandths of one device each pod shares (``GPU_SHARE``; 0: none).
    share: int = 0


@dataclass(frozen=True)
class _Nodes:
    """What the node rows need: per usable node, what is free of each resource the preemptor's
    pods ask (GPUs: the wholly free devices), and the preemptor's pods as runs."""

    free: Mapping[str, Mapping[str, int]]
    runs: tuple[_Run, ...]
    #: per usable node, the free thousandths of each device (:func:`node_devices`), when a
    #: run shares devices.
    devices: Mapping[str, tuple[int, ...]]

    @classmethod
    def of(cls, preemptor: Workload, nodes: Sequence[Node]) -> _Nodes:
        usable = [n for n in nodes if n.usable]
        runs = []
        for component in preemptor.components:
            if not component.replicas:
                continue
            asks = {r: a for r, a in component.pod.requests.items() if a > 0 and r != GPU_SHARE}
            asks[PODS] = 1
            eligible = frozenset(n.name for n in usable if node_mismatch(component.pod, n) is None)
            share = component.pod.requests.get(GPU_SHARE, 0)
            runs.append(_Run(asks, component.replicas, eligible, max(0, share)))
        resources = {r for run in runs for r in run.requests}
        free: dict[str, dict[str, int]] = {}
        for node in usable:
            left = node.free
            free[node.name] = {
                r: (
                    sum(1 for d in node_devices(node) if d >= 1000)
                    if r == GPU
                    else node.free_pods
                    if r == PODS
                    else left.get(r, 0)
                )
                for r in resources
            }
        shared = any(run.share for run in runs)
        devices = {n.name: node_devices(n) for n in usable} if shared else {}
        return cls(free=free, runs=tuple(runs), devices=devices)


def _node_rows(
    model: cp_model.CpModel,
    x: Sequence[cp_model.IntVar],
    here: Sequence[tuple[Victim, str]],
    nodes: _Nodes,
) -> dict[tuple[str, int], cp_model.IntVar]:
    """Node-level rows for the preemptor's pods: ``s_{n,k}`` pods of run ``k`` on node ``n``
    (only where run ``k`` may go), ``Σ_k a_{k,r} s_{n,k} ≤ F_{n,r} + Σ_v h_{v,n,r} x_v`` for
    every resource ``r`` the pods ask (``F_{n,r}`` free on the node — for GPUs its wholly free
    devices —, ``h_{v,n,r}`` what victim ``v``'s pods hold there, ``pods`` counted as 1 a pod)
    and ``Σ_n s_{n,k} ≥ count_k``. A run of shared-GPU pods (``σ_k`` thousandths each) is also
    counted per device (:func:`_device_rows`). The aggregate rows cannot tell 8 GPUs on one
    node from 1 on each of eight, nor a node whose GPUs are free from one whose CPUs are: with
    these rows the set the model chooses packs, as far as the placement policies allow.
    Returns the slots ``s_{n,k}`` by (node, run): the model's packing (:func:`_plan_placement`).
    """
    slots_by: dict[tuple[str, int], cp_model.IntVar] = {}
    if not nodes.runs:
        return slots_by
    resources = {r for run in nodes.runs for r in run.requests}
    held: dict[str, list[tuple[int, dict[str, int]]]] = {}
    for i, (victim, _) in enumerate(here):
        per_node: dict[str, dict[str, int]] = {}
        for pod in victim.placement.pods:
            into = per_node.setdefault(pod.node, {})
            into[PODS] = into.get(PODS, 0) + 1
            for r in resources:
                if r != PODS and pod.requests.get(r, 0) > 0:
                    into[r] = into.get(r, 0) + pod.requests[r]
        for name, amounts in per_node.items():
            held.setdefault(name, []).append((i, amounts))
    placed: list[list[cp_model.IntVar]] = [[] for _ in nodes.runs]
    for name, free in nodes.free.items():
        here_held = held.get(name, [])
        most = {r: free[r] + sum(a.get(r, 0) for _, a in here_held) for r in resources}
        slots: list[tuple[_Run, cp_model.IntVar, int]] = []
        for k, run in enumerate(nodes.runs):
            if name not in run.nodes:
                continue
            top = min([run.count, *(most[r] // a for r, a in run.requests.items())])
            if top <= 0:
                continue
            slot = model.new_int_var(0, top, f"s-{name}-{k}")
            slots.append((run, slot, top))
            slots_by[name, k] = slot
            placed[k].append(slot)
        if not slots:
            continue
        shared = [(run, slot) for run, slot, _ in slots if run.share]
        if shared:
            _device_rows(model, x, here, name, nodes.devices[name], shared)
        for r in resources:
            asked = [
                (run.requests[r], slot, top) for run, slot, top in slots if run.requests.get(r)
            ]
            if sum(c * top for c, _, top in asked) <= free[r]:
                continue  # holds with nothing evicted
            freed = [(a[r], x[i]) for i, a in here_held if a.get(r, 0)]
            model.add(
                sum(c * slot for c, slot, _ in asked) <= free[r] + sum(c * v for c, v in freed)
            )
    for k, run in enumerate(nodes.runs):
        model.add(sum(placed[k]) >= run.count)
    return slots_by


def _device_rows(
    model: cp_model.CpModel,
    x: Sequence[cp_model.IntVar],
    here: Sequence[tuple[Victim, str]],
    name: str,
    devices: Sequence[int],
    shared: Sequence[tuple[_Run, cp_model.IntVar]],
) -> None:
    """The device rows of node ``name`` for runs of shared-GPU pods: ``y_{d,k}`` pods of run
    ``k`` on device ``d``, ``Σ_k σ_k y_{d,k} ≤ f_d + Σ_v m_{v,d} x_v`` (``f_d`` the device's
    free thousandths, ``m_{v,d}`` what victim ``v``'s pods use of it: 1000 a whole GPU, the
    share of a shared pod, by the devices their assignments record; a victim's whole GPUs
    without a record free as many whole devices of their own) and ``s_{n,k} = Σ_d y_{d,k}``:
    a shared pod needs its thousandths on one device, not spread over the node's."""
    capacity: list[tuple[int, list[tuple[int, int]]]] = [(f, []) for f in devices]
    for i, (victim, _) in enumerate(here):
        for pod in victim.placement.pods:
            if pod.node != name:
                continue
            whole = pod.requests.get(GPU, 0)
            share = pod.requests.get(GPU_SHARE, 0)
            if pod.devices:
                for d in pod.devices[:whole]:
                    if 0 <= d < len(devices):
                        capacity[d][1].append((i, 1000))
                if share and 0 <= pod.devices[-1] < len(devices):
                    capacity[pod.devices[-1]][1].append((i, share))
            else:
                capacity.extend((0, [(i, 1000)]) for _ in range(whole))
    per_run: list[list[cp_model.IntVar]] = [[] for _ in shared]
    for d, (free, freed) in enumerate(capacity):
        most = max(0, free) + sum(m for _, m in freed)
        row = []
        for k, (run, _) in enumerate(shared):
            top = min(run.count, most // run.share)
            if top <= 0:
                continue
            y = model.new_int_var(0, top, f"y-{name}-{d}-{k}")
            row.append(run.share * y)
            per_run[k].append(y)
        if row:
            model.add(sum(row) <= free + sum(m * x[i] for i, m in freed))
    for k, (_, slot) in enumerate(shared):
        model.add(slot == sum(per_run[k]))


def _solve_model(
    demand: Mapping[str, int],
    room: tuple[Mapping[str, int], int, _Nodes],
    requests: list[dict[str, int]],
    gpu: list[int],
    priorities: list[int],
    ages: list[int],
    here: list[tuple[Victim, str]],
    queue: str | None,
    queues: QueueSet,
    usage: Usage,
    cuts: list[list[int]],
    seed: int,
    time_limit: float,
    lost: list[int] | None = None,
    caps: Mapping[str, Mapping[str, int]] | None = None,
) -> tuple[list[int], Plan] | None:
    """The victims of the model's optimum (module docstring) and its packing of the
    preemptor's pods (``s_{n,k}``), or ``None`` when no set obeys the rows."""
    free, free_milli, nodes = room
    model = cp_model.CpModel()
    x = [model.new_bool_var(f"x{i}") for i in range(len(here))]
    for resource, amount in demand.items():
        if resource in (GPU, GPU_SHARE):
            continue  # counted together, in thousandths of a device, below
        short = amount - free.get(resource, 0)
        if short > 0:
            model.add(sum(requests[i].get(resource, 0) * x[i] for i in range(len(x))) >= short)
    short_milli = _milli(demand) - free_milli
    if short_milli > 0:
        model.add(sum(gpu[i] * x[i] for i in range(len(x))) >= short_milli)
    slots = _node_rows(model, x, here, nodes)
    # reclaim only what is over quota, per victim queue
    reclaimed: dict[str, list[int]] = {}
    for i, (victim, kind) in enumerate(here):
        if kind == RECLAIM:
            theirs = membership(victim.workload, queues).queue
            if theirs is not None:
                for ancestor in queues.chain(theirs):
                    reclaimed.setdefault(ancestor.name, []).append(i)
    # fair-share reclaim only down to the preemptor's weighted over-quota share
    shared: dict[str, list[int]] = {}
    for i, (victim, kind) in enumerate(here):
        theirs = membership(victim.workload, queues).queue
        if kind == FAIR_SHARE and theirs is not None:
            shared.setdefault(theirs, []).append(i)
    for name, members in shared.items():
        assert queue is not None
        for resource, bound in fair_bounds(name, queue, demand, queues, usage).items():
            taken = sum(requests[i].get(resource, 0) * x[i] for i in members)
            model.add(taken <= max(0, bound))
    # the caller's caps per victim queue (fair-share rebalancing)
    capped: dict[str, list[int]] = {}
    for i, (victim, _) in enumerate(here):
        theirs = membership(victim.workload, queues).queue
        if caps and theirs is not None and theirs in caps:
            capped.setdefault(theirs, []).append(i)
    for name, members in capped.items():
        for resource, cap in (caps or {})[name].items():
            model.add(sum(requests[i].get(resource, 0) * x[i] for i in members) <= max(0, cap))
    mine = {q.name for q in queues.chain(queue)} if queue is not None else set()
    for name, members in reclaimed.items():
        if name in mine:
            continue  # a shared ancestor: moving work inside it changes nothing there
        for resource, rule in queues.queues[name].resources.items():
            over = max(0, usage.used(name, resource) - rule.quota)
            model.add(sum(requests[i].get(resource, 0) * x[i] for i in members) <= over)
    # the preemptor's own limits, with its queue's evicted work given back
    for ancestor in queues.chain(queue) if queue is not None else ():
        under = [
            i
            for i, (victim, _) in enumerate(here)
            if (q := membership(victim.workload, queues).queue) is not None
            and ancestor.name in {a.name for a in queues.chain(q)}
        ]
        for resource, rule in ancestor.resources.items():
            if rule.limit is None or not demand.get(resource):
                continue
            excess = usage.used(ancestor.name, resource) + demand[resource] - rule.limit
            if excess > 0:
                model.add(sum(requests[i].get(resource, 0) * x[i] for i in under) >= excess)
    # reclaiming across an ancestor: it must be within its quota once the victims under it are
    # gone (victims that are all under it, siblings, do not change its use)
    takers = [i for i, (_, kind) in enumerate(here) if kind == RECLAIM]
    for ancestor in queues.chain(queue)[1:] if takers and queue is not None else ():
        under = [
            i
            for i in takers
            if (q := membership(here[i][0].workload, queues).queue) is not None
            and ancestor.name in {a.name for a in queues.chain(q)}
        ]
        outside = [i for i in takers if i not in under]
        if not outside:
            continue
        crossing = model.new_bool_var(f"across-{ancestor.name}")
        model.add_max_equality(crossing, [x[i] for i in outside])
        for resource, rule in ancestor.resources.items():
            if not demand.get(resource):
                continue
            excess = usage.used(ancestor.name, resource) + demand[resource] - rule.quota
            if excess > 0:
                given = sum(requests[i].get(resource, 0) * x[i] for i in under)
                model.add(given >= excess).only_enforce_if(crossing)
    for cut in cuts:  # no subset of a set that did not pack packs: evict something else too
        model.add(sum(x[i] for i in range(len(x)) if i not in set(cut)) >= 1)
    stages = [
        *([[(lost[i], x[i]) for i in range(len(x))]] if lost is not None else []),
        [(gpu[i], x[i]) for i in range(len(x))],
        [(1, x[i]) for i in range(len(x))],
        [(priorities[i], x[i]) for i in range(len(x))],
        [(ages[i], x[i]) for i in range(len(x))],
    ]
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    # the LP of every row at the root: with the node rows, the default linearization proves
    # nothing in time on a loaded cluster of ~100 nodes and ~90 candidates (bound 0)
    solver.parameters.linearization_level = 2
    solver.parameters.max_time_in_seconds = min(STAGE_SECONDS, max(MIN_STAGE_SECONDS, time_limit))
    found: tuple[list[int], Plan] | None = None
    for terms in stages:
        objective = sum(weight * var for weight, var in terms)
        model.minimize(objective)
        status = solver.solve(model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return found
        value = round(solver.objective_value)
        chosen = [i for i in range(len(x)) if solver.value(x[i])]
        plan = {key: count for key, slot in slots.items() if (count := solver.value(slot)) > 0}
        found = (chosen, plan)
        if status != cp_model.OPTIMAL:
            break  # keep the best found: the next stages need this one proven
        model.add(objective == value)
    return found


def _realise(
    preemptor: Workload,
    fleet: Fleet,
    cluster: str,
    victims: Sequence[Victim],
    policies: Sequence[PlacementPolicy],
    seed: int,
    plan: Plan | None = None,
) -> Placement | None:
    """The preemptor placed in ``cluster`` once ``victims`` are released, or ``None``: by
    placer's packer, else (``plan``: the victim model's ``s_{n,k}``) as the model packed it —
    the packer, best fit one pod shape after another, misses packings of gangs of several
    shapes that the node rows find (:func:`_plan_placement`)."""
    freed = release(fleet, [v.placement for v in victims])
    others = {c.name: "not the cluster of this eviction" for c in fleet.clusters}
    others.pop(cluster, None)
    decision = solve(
        [preemptor],
        freed,
        policies=policies,
        solver="greedy",
        time_limit=1.0,
        seed=seed,
        exclusions={0: others},
    )
    if decision.placements:
        return decision.placements[0]
    if plan is None or not _plan_allowed(preemptor, cluster, policies):
        return None
    return _plan_placement(preemptor, freed.cluster(cluster), plan)


def _plan_allowed(preemptor: Workload, cluster: str, policies: Sequence[PlacementPolicy]) -> bool:
    """Whether a placement from the model's plan may stand: the plan knows the pods' nodes
    (selectors, affinities, taints) but not the placement policies, topology domains, nor a
    pinned or avoided cluster — a preemptor with any of those is left to the packer."""
    if preemptor.topology or preemptor.avoid_clusters or policy_for(preemptor, policies):
        return False
    return preemptor.pinned_cluster in (None, cluster)


def _plan_placement(preemptor: Workload, cluster: Cluster, plan: Plan) -> Placement | None:
    """The preemptor's pods on ``cluster`` (its victims released) as the plan places them —
    ``plan[n, k]`` pods of run ``k`` (:class:`_Nodes`' runs: the components with replicas, in
    order) on node ``n`` — each pod checked to fit where it goes and given its devices as
    placer's packer gives them; ``None`` when one does not fit."""
    runs = [c for c in preemptor.components if c.replicas]
    names = resource_names([c.pod for c in runs])
    state = ClusterState(cluster, names)
    row = {name: i for i, name in enumerate(state.node_names)}
    pods: list[PodAssignment] = []
    for k, component in enumerate(runs):
        shape = PodShape.of(component.pod, names)
        index = 0
        for (name, run), count in sorted(plan.items(), key=lambda item: row[item[0][0]]):
            node = row[name]
            if run != k or count <= 0:
                continue
            if not state.fits(shape, np.array([node]))[0] or state.copies(shape, node) < count:
                return None
            for devices in state.place_many(shape, node, count):
                pods.append(
                    PodAssignment(
                        component=component.name,
                        instance=component.instance,
                        index=index,
                        node=name,
                        requests=component.pod.requests,
                        devices=devices,
                    )
                )
                index += 1
        if index != component.replicas:
            return None
    return Placement(
        workload=preemptor.ref,
        cluster=cluster.name,
        pods=tuple(pods),
        requests=pods_requests(pods) if preemptor.elastic else preemptor.total_requests(),
    )
