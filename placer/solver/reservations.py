"""Reservations with backfill: a gang that has waited too long gets nodes held for it.

Without them a gang needing most of a cluster starves: whenever some of the cluster frees up,
smaller work arriving meanwhile takes it, and the gang's cluster is never free enough at once.
A *reservation* gives the gang a cluster, a set of nodes and a start time; from then on other
work may use those nodes only when it will be done before that start (*backfill*).

Model
=====
* A pending workload ``g`` **qualifies** when it has waited at least ``after_s``
  (:class:`ReservationPolicy`) or its priority is at least ``priority``; at most
  ``max_reservations`` are held at once, given longest waiting first (highest priority first).
* Running work ``j`` holds its pods until its **expected end** ``e_j`` = start + expected run
  time (:func:`expected_runtime`: the annotation ``placer.dev/expected-runtime``, the object's
  ``spec.activeDeadlineSeconds``, or in a simulation the trace's recorded run time); an end in
  the past counts as now; work without an estimate never ends as far as planning knows.
* :func:`plan` — the **earliest start**: for each cluster ``c``, the fleet as it will be at
  ``t`` is ``F_c(t)`` = the cluster now, minus the pods of running work with ``e_j ≤ t``,
  minus the nodes of reservations held before this one until they are expected to be done
  (their start plus their gang's expected run time; forever without one). ``F_c(t)`` only
  gains room as ``t`` grows, so the first ``t`` among now and the ``e_j`` (and earlier
  reservations' ends) at which the gang is placed on ``F_c(t)`` by the solver is found by
  bisection. The reservation is the cluster with the least such ``t`` (then fleet order),
  ``start_s = t`` and ``nodes`` = the nodes that placement used.
* :func:`backfill_view` — the rule every decision then follows: each reserved node carries
  the taint ``placer.dev/reserved=<gang>:NoSchedule`` of the first reservation holding it (a
  later one sharing the node starts there after that gang's expected end); a workload
  tolerates it (may use the node) when it is the reservation's own gang, or when it has an
  expected run time ``d`` and ``now + d ≤ start_s``. A gang may thus use the nodes it shares
  with reservations planned after it (planned around it), never their other nodes. Work
  without an estimate never tolerates it. The solver's own
  eligibility rules (taints and tolerations, :func:`placer.podspec.node_mismatch`) then keep
  everything else off, and explain it in its reasons.

* :func:`horizon_view` — the **drain horizon** ``H`` (``horizon_s``, optional): the nodes of
  one cluster ``c*`` (``horizon_cluster``, else the one with the most GPUs) carry the taint
  ``placer.dev/drain-horizon=<c*>:NoSchedule``, tolerated by work with an expected run time
  ``d ≤ H`` and by nothing else. Everything started on ``c*`` is thus expected to end within
  ``H``, so a reservation planned there starts within ``H`` of being planned (with exact
  estimates) and no eviction is needed for it; the cost is that longer work has one cluster
  fewer. Big gangs are held to the same rule: a long one would keep ``c*`` from draining for
  the next.

Why backfill never delays a reservation: the gang's nodes at ``start_s`` hold exactly what
planning assumed — the work running at planning time that is expected to still run then —
because everything else on them ends by ``start_s``. With exact estimates the gang fits
there at ``start_s``; a wrong estimate can delay it, and then the reservation is planned again.

Lifecycle: a reservation is released when its gang is placed or no longer pending (deleted),
and planned again when it *expires* (:func:`expired`: a decision at or after its start plus
``grace_s`` still could not start the gang — an estimate was wrong) or when the fleet changed
under it (:func:`stale`: a reserved node gone or cordoned, its cluster unreachable).

Preemption: with ``preempt_after_s`` a reserved gang that waited too long is started by
evicting running work (:mod:`placer.solver.reservation_preemption`); reservations never
evict otherwise.

Pure: no I/O, no clock; times are seconds on the caller's clock (the simulator's, or Unix
time in the controller).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from placer.model import (
    Cluster,
    Fleet,
    Placement,
    Taint,
    Toleration,
    Workload,
    WorkloadRef,
)
from placer.policy import PlacementPolicy
from placer.solver.charging import release
from placer.solver.decide import solve
from placer.solver.state import gpu_milli

__all__ = [
    "ANNOTATION_EXPECTED_RUNTIME",
    "TAINT_HORIZON",
    "TAINT_RESERVED",
    "Reservation",
    "ReservationPolicy",
    "RunningWork",
    "backfill_view",
    "expected_runtime",
    "expired",
    "horizon_cluster",
    "horizon_view",
    "may_backfill",
    "parse_runtime",
    "plan",
    "qualifies",
    "stale",
]

#: how long a workload is expected to run once started (``2h``, ``90m``, ``1h30m``, ``3600``).
ANNOTATION_EXPECTED_RUNTIME = "placer.dev/expected-runtime"
#: the taint a reserved node carries inside a decision (never on a real node).
TAINT_RESERVED = "placer.dev/reserved"
#: the taint of the drain-horizon cluster's nodes inside a decision (never on a real node).
TAINT_HORIZON = "placer.dev/drain-horizon"

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


@dataclass(frozen=True)
class ReservationPolicy:
    """When gangs get reservations, and how many at once."""

    #: a pending workload waiting at least this long (seconds) qualifies.
    after_s: float = 3600.0
    #: a pending workload with at least this priority qualifies at once (``None``: by wait only).
    priority: int | None = None
    #: only workloads asking at least this many GPUs (whole or shared, in GPUs) qualify: the
    #: big gangs that starve without, not small work that waits because the fleet is full.
    min_gpus: float = 0.0
    #: reservations held at the same time (1 is EASY backfill's one reservation).
    max_reservations: int = 1
    #: how long past its start a reservation holds while its gang still cannot start (an
    #: estimate was wrong) before it is planned again.
    grace_s: float = 0.0
    #: the solver that checks where the gang fits (one gang on one cluster: greedy is exact
    #: enough and fast).
    solver: str = "greedy"
    time_limit: float = 1.0
    #: a reserved gang that has waited this long (seconds since it arrived) while its start
    #: is still ahead starts at once, evicting running work of a lower priority or smaller
    #: size (:mod:`placer.solver.reservation_preemption`); ``None``: reservations never evict.
    preempt_after_s: float | None = None
    #: ... unless its planned start is at most this far ahead (seconds): that is waited for.
    preempt_slack_s: float = 3600.0
    #: a *drain horizon* (seconds; ``None``: none): one cluster (``horizon_cluster``, else the
    #: one with the most GPUs) takes only work expected to run at most this long, so that it
    #: always empties for a big gang within about this long without evicting anything
    #: (:func:`horizon_view`).
    horizon_s: float | None = None
    #: the cluster the drain horizon keeps (``None``: the one with the most GPUs).
    horizon_cluster: str | None = None

    def __post_init__(self) -> None:
        if self.after_s < 0 or not math.isfinite(self.after_s):
            raise ValueError(f"reservations: after_s must be 0 or positive, got {self.after_s}")
        if self.max_reservations < 1:
            raise ValueError(
                f"reservations: max_reservations must be at least 1, got {self.max_reservations}"
            )
        if self.grace_s < 0:
            raise ValueError(f"reservations: grace_s must be 0 or positive, got {self.grace_s}")
        if self.preempt_after_s is not None and (
            self.preempt_after_s < 0 or not math.isfinite(self.preempt_after_s)
        ):
            raise ValueError(
                "reservations: preempt_after_s must be 0 or positive (seconds a reserved gang "
                f"waits before running work is evicted for it), got {self.preempt_after_s}"
            )
        if self.preempt_slack_s < 0 or not math.isfinite(self.preempt_slack_s):
            raise ValueError(
                f"reservations: preempt_slack_s must be 0 or positive, got {self.preempt_slack_s}"
            )
        horizon = self.horizon_s
        if horizon is not None and (horizon <= 0 or not math.isfinite(horizon)):
            raise ValueError(
                "reservations: horizon_s must be positive (seconds the drain-horizon cluster's "
                f"work may be expected to run), got {self.horizon_s}"
            )


@dataclass(frozen=True)
class Reservation:
    """Nodes held for a gang from ``start_s`` on."""

    workload: WorkloadRef
    cluster: str
    nodes: tuple[str, ...]
    #: the earliest start planned: when the running work on ``nodes`` is expected to be gone.
    start_s: float
    #: when it was planned.
    planned_s: float
    #: why the gang got it (``waited 2.0 h >= 1.0 h``, ``priority 100 >= 100``).
    reason: str
    #: the gang's own expected run time (``None``: unknown), for reservations planned after it.
    runtime_s: float | None = None

    @property
    def taint(self) -> Taint:
        return Taint(key=TAINT_RESERVED, value=str(self.workload), effect="NoSchedule")

    @property
    def toleration(self) -> Toleration:
        return Toleration(key=TAINT_RESERVED, value=str(self.workload), effect="NoSchedule")

    @property
    def end_s(self) -> float:
        """When the gang is expected to be done if it starts on time (``inf``: unknown)."""
        return math.inf if self.runtime_s is None else self.start_s + self.runtime_s


@dataclass(frozen=True)
class RunningWork:
    """A placement holding capacity, and when it is expected to end (``None``: unknown)."""

    placement: Placement
    end_s: float | None


# --------------------------------------------------------------------------------------------
# expected run times


def parse_runtime(text: str) -> float:
    """Seconds from ``3600``, ``90s``, ``5m``, ``2h``, ``1d`` or Go's ``1h30m``.

    Raises:
        ValueError: not a positive duration.
    """
    cleaned = text.strip().lower()
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhd]?)", cleaned)
    rebuilt = "".join(number + unit for number, unit in parts)
    if not parts or rebuilt != cleaned or (len(parts) > 1 and any(not u for _, u in parts)):
        raise ValueError(f"{text!r} is not a duration (3600, 90s, 5m, 2h, 1h30m)")
    seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{text!r} is not a positive duration")
    return seconds


def expected_runtime(
    annotations: Mapping[str, str], spec: Mapping[str, object] | None = None
) -> float | None:
    """A workload's expected run time in seconds, or ``None`` when it gives none.

    The annotation ``placer.dev/expected-runtime`` first, then the root object's
    ``spec.activeDeadlineSeconds`` (a Job's or a Pod's hard limit: it cannot run longer).

    Raises:
        ValueError: the annotation is not a duration, or activeDeadlineSeconds is not a
            positive integer (the message names which).
    """
    text = annotations.get(ANNOTATION_EXPECTED_RUNTIME)
    if text is not None:
        try:
            return parse_runtime(str(text))
        except ValueError as error:
            raise ValueError(f"annotation {ANNOTATION_EXPECTED_RUNTIME}: {error}") from None
    if spec is not None and spec.get("activeDeadlineSeconds") is not None:
        value = spec["activeDeadlineSeconds"]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(
                f"spec.activeDeadlineSeconds must be a positive integer, got {value!r}"
            )
        return float(value)
    return None


# --------------------------------------------------------------------------------------------
# who qualifies, and the rule of backfill


def qualifies(workload: Workload, waited_s: float, policy: ReservationPolicy) -> str | None:
    """Why a pending workload earns a reservation (``None``: it does not)."""
    if policy.min_gpus and gpu_milli(workload.total_requests()) < policy.min_gpus * 1000:
        return None
    if policy.priority is not None and workload.priority >= policy.priority:
        return f"priority {workload.priority} >= {policy.priority}"
    if waited_s >= policy.after_s:
        return f"waited {_hours(waited_s)} >= {_hours(policy.after_s)}"
    return None


def may_backfill(runtime_s: float | None, now: float, reservation: Reservation) -> bool:
    """Whether work starting ``now`` and expected to run ``runtime_s`` may use the reserved
    nodes: only when it is known to be done by the reservation's start."""
    return runtime_s is not None and now + runtime_s <= reservation.start_s


def backfill_view(
    fleet: Fleet,
    workloads: Sequence[Workload],
    runtimes: Sequence[float | None],
    reservations: Sequence[Reservation],
    now: float,
) -> tuple[Fleet, list[Workload]]:
    """The fleet and workloads a decision at ``now`` takes, reservations applied.

    ``reservations`` in the order they were planned. A reserved node carries the taint of the
    first reservation holding it (reservations planned one after another may share nodes: a
    later one starts there only after the earlier gang is expected to be done, so whoever may
    use the node before the earlier start may use it before the later one too); each workload
    tolerates the taints of the reservations it may use: those it may backfill
    (:func:`may_backfill`) and, for a reservation's gang, its own — with the nodes it shares
    with reservations planned after it (they were planned around its expected run: a gang
    starting late delays them, never the reverse), but not their other nodes.
    Workloads that tolerate nothing are returned as they are.
    """
    if not reservations:
        return fleet, list(workloads)
    tainted: dict[str, dict[str, list[Taint]]] = {}
    for reservation in reservations:
        nodes = tainted.setdefault(reservation.cluster, {})
        for name in reservation.nodes:
            nodes.setdefault(name, [reservation.taint])
    clusters = tuple(
        _tainted(cluster, tainted[cluster.name]) if cluster.name in tainted else cluster
        for cluster in fleet.clusters
    )
    viewed = []
    for workload, runtime in zip(workloads, runtimes, strict=True):
        allowed = tuple(
            r.toleration
            for r in reservations
            if r.workload == workload.ref or may_backfill(runtime, now, r)
        )
        viewed.append(_tolerating(workload, allowed) if allowed else workload)
    return replace(fleet, clusters=clusters), viewed


def horizon_cluster(fleet: Fleet, policy: ReservationPolicy) -> str | None:
    """The cluster the policy's drain horizon keeps: ``policy.horizon_cluster`` when it is in
    the fleet, else the reachable cluster with the most GPUs (fleet order on a tie);
    ``None`` without a horizon."""
    if policy.horizon_s is None:
        return None
    names = [c.name for c in fleet.clusters]
    if policy.horizon_cluster is not None:
        return policy.horizon_cluster if policy.horizon_cluster in names else None
    reachable = [c for c in fleet.clusters if c.reachable and c.nodes]
    if not reachable:
        return None
    return max(
        reachable, key=lambda c: sum(n.allocatable.get("nvidia.com/gpu", 0) for n in c.nodes)
    ).name


def horizon_view(
    fleet: Fleet,
    workloads: Sequence[Workload],
    runtimes: Sequence[float | None],
    policy: ReservationPolicy,
) -> tuple[Fleet, list[Workload]]:
    """The drain horizon applied to a decision (module docstring): the nodes of
    :func:`horizon_cluster` carry the taint ``placer.dev/drain-horizon=<cluster>:NoSchedule``,
    tolerated only by work expected to run at most ``policy.horizon_s`` (big gangs included:
    a long one there would keep the cluster from draining for the next). Work without an
    estimate never tolerates it. Without a horizon: ``fleet`` and ``workloads`` as they are."""
    name = horizon_cluster(fleet, policy)
    if name is None or policy.horizon_s is None:
        return fleet, list(workloads)
    taint = Taint(key=TAINT_HORIZON, value=name, effect="NoSchedule")
    toleration = Toleration(key=TAINT_HORIZON, value=name, effect="NoSchedule")
    clusters = tuple(
        _tainted(c, {n.name: [taint] for n in c.nodes}) if c.name == name else c
        for c in fleet.clusters
    )
    viewed = [
        _tolerating(w, (toleration,)) if r is not None and r <= policy.horizon_s else w
        for w, r in zip(workloads, runtimes, strict=True)
    ]
    return replace(fleet, clusters=clusters), viewed


def _tainted(cluster: Cluster, taints: Mapping[str, list[Taint]]) -> Cluster:
    nodes = tuple(
        replace(node, taints=(*node.taints, *taints[node.name])) if node.name in taints else node
        for node in cluster.nodes
    )
    return replace(cluster, nodes=nodes)


def _tolerating(workload: Workload, tolerations: tuple[Toleration, ...]) -> Workload:
    components = tuple(
        replace(c, pod=replace(c.pod, tolerations=(*c.pod.tolerations, *tolerations)))
        for c in workload.components
    )
    return replace(workload, components=components)


# --------------------------------------------------------------------------------------------
# planning


def plan(
    workload: Workload,
    fleet: Fleet,
    running: Sequence[RunningWork],
    now: float,
    *,
    reason: str,
    runtime_s: float | None = None,
    held: Sequence[Reservation] = (),
    policies: Sequence[PlacementPolicy] = (),
    policy: ReservationPolicy | None = None,
    seed: int = 0,
) -> Reservation | None:
    """The reservation giving ``workload`` its earliest start (see the module docstring), or
    ``None`` when no cluster will ever hold it as far as the estimates tell (work without an
    estimate in the way, or it fits nowhere even empty).

    ``running``: the placements holding capacity in ``fleet`` and their expected ends;
    ``held``: reservations already granted (their nodes are off limits until they are done).
    """
    policy = policy or ReservationPolicy()
    best: tuple[float, int, Placement] | None = None
    for position, cluster in enumerate(fleet.clusters):
        if not cluster.reachable or not cluster.nodes:
            continue
        found = _earliest(workload, cluster, running, now, held, policies, policy, seed)
        if found is not None and (best is None or found[0] < best[0]):
            best = (found[0], position, found[1])
    if best is None:
        return None
    start, _, placement = best
    return Reservation(
        workload=workload.ref,
        cluster=placement.cluster,
        nodes=tuple(sorted({pod.node for pod in placement.pods})),
        start_s=start,
        planned_s=now,
        reason=reason,
        runtime_s=runtime_s,
    )


def _earliest(
    workload: Workload,
    cluster: Cluster,
    running: Sequence[RunningWork],
    now: float,
    held: Sequence[Reservation],
    policies: Sequence[PlacementPolicy],
    policy: ReservationPolicy,
    seed: int,
) -> tuple[float, Placement] | None:
    """The first time the workload fits on ``cluster`` as it will be, and the placement."""
    here = [w for w in running if w.placement.cluster == cluster.name]
    blocking = [r for r in held if r.cluster == cluster.name]
    ending = sorted(
        {max(now, w.end_s) for w in here if w.end_s is not None}
        | {max(now, r.end_s) for r in blocking if math.isfinite(r.end_s)}
        | {now}
    )

    def at(t: float) -> Placement | None:
        gone = [w.placement for w in here if w.end_s is not None and max(now, w.end_s) <= t]
        later = release(Fleet(clusters=(cluster,)), gone) if gone else Fleet(clusters=(cluster,))
        closed = {n for r in blocking if r.end_s > t for n in r.nodes}
        if closed:
            only = later.clusters[0]
            nodes = tuple(n for n in only.nodes if n.name not in closed)
            later = Fleet(clusters=(replace(only, nodes=nodes),))
        decision = solve(
            [workload],
            later,
            policies=policies,
            solver=policy.solver,
            time_limit=policy.time_limit,
            seed=seed,
        )
        return decision.placements[0] if decision.placements else None

    return _first(ending, at)


def _first(
    times: Sequence[float], fits: Callable[[float], Placement | None]
) -> tuple[float, Placement] | None:
    """The first of ``times`` (ascending) at which ``fits`` answers, by bisection (room only
    grows with time), with the answer."""
    last = fits(times[-1])
    if last is None:
        return None
    low, high = 0, len(times) - 1  # fits(times[high]) is known to answer
    found = last
    while low < high:
        middle = (low + high) // 2
        answer = fits(times[middle])
        if answer is not None:
            high, found = middle, answer
        else:
            low = middle + 1
    return times[high], found


# --------------------------------------------------------------------------------------------
# lifecycle


def expired(reservation: Reservation, now: float, grace_s: float) -> str | None:
    """Why a reservation whose gang was just decided and still waits must be planned again:
    its start has come (plus ``grace_s``) and the gang could not start — an expected run time
    was too short (``None``: it stands)."""
    if now >= reservation.start_s + grace_s:
        return (
            f"expired: its start t={reservation.start_s:g}s came and the gang could not "
            "start (an expected run time was too short)"
        )
    return None


def stale(reservation: Reservation, fleet: Fleet) -> str | None:
    """Why a held reservation no longer matches the fleet (``None``: it stands): its cluster
    left or is unreachable, or one of its nodes is gone or cordoned."""
    try:
        cluster = fleet.cluster(reservation.cluster)
    except KeyError:
        return f"cluster {reservation.cluster} left the fleet"
    if not cluster.reachable:
        return f"cluster {reservation.cluster} is unreachable"
    usable = {n.name for n in cluster.nodes if n.usable}
    missing = [n for n in reservation.nodes if n not in usable]
    if missing:
        return f"node {missing[0]} of cluster {reservation.cluster} is gone or cordoned"
    return None


def _hours(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"
