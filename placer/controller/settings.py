"""The controller's settings: grouped, documented dataclasses with safe defaults.

One :class:`ControllerSettings` is built by the CLI (or a test) and passed down; nothing in the
controller reads globals or the environment. Defaults suit production; tests shorten the
windows, the grace period and the lease to seconds.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from placer.solver.rebalance import RebalancePolicy
    from placer.solver.reservations import ReservationPolicy

__all__ = [
    "BackoffSettings",
    "ControllerSettings",
    "LeaseSettings",
    "default_identity",
    "hub_id",
]


@dataclass(frozen=True)
class LeaseSettings:
    """Leader election with a ``coordination.k8s.io/v1`` Lease on the hub (client-go's rules)."""

    #: the Lease's name.
    name: str = "placer-controller"
    #: the Lease's namespace on the hub.
    namespace: str = "placer-system"
    #: seconds a lease is valid after its last renewal; a standby takes over once it has seen
    #: no renewal for this long.
    duration: float = 15.0
    #: seconds within which the leader must renew, or it steps down (less than ``duration``).
    renew_deadline: float = 10.0
    #: seconds between attempts to acquire or renew.
    retry_period: float = 2.0


@dataclass(frozen=True)
class BackoffSettings:
    """How unschedulable workloads wait before the next attempt."""

    #: seconds before the first retry; doubles per failed attempt.
    initial: float = 5.0
    #: the longest wait between attempts.
    maximum: float = 300.0


@dataclass(frozen=True)
class ControllerSettings:
    """Everything the placement controller needs to know besides the clusters themselves."""

    #: the hub's name on member copies (``placer.dev/hub`` label): a label value, so that
    #: several hubs can share members without touching each other's copies.
    hub: str = "hub"
    #: this process's identity in the Lease (pod name in a Deployment).
    identity: str = field(default_factory=lambda: default_identity({}))
    #: seconds pending workloads are collected before a placement cycle decides them together.
    batch_window: float = 1.0
    #: most workloads decided in one cycle (the rest wait for the next one).
    max_batch: int = 2000
    #: seconds a member cluster may be unreachable before its workloads are placed elsewhere.
    grace_period: float = 300.0
    #: seconds between capacity checks while workloads wait for room (and health checks of the
    #: members while nothing is pending).
    resync_interval: float = 30.0
    #: seconds an in-flight placement is charged against capacity when its workload is not yet
    #: seen running on the member (pods can take this long to show up).
    ledger_ttl: float = 300.0
    #: seconds the solver may spend on one cycle's decision.
    solve_time_limit: float = 1.0
    #: solver name (``placer.solver.SOLVERS``).
    solver: str = "cpsat"
    #: with Queues on the hub, evict placed work for pending work the queues entitle (reclaim
    #: and preempt: :mod:`placer.controller.preemption`).
    preemption: bool = True
    #: with preemption: fair-share rebalancing (:mod:`placer.solver.rebalance`) in every cycle
    #: after the reclaims — over-share queues' over-quota work evicted for under-share
    #: queues' pending work while the over-quota split is off the weights by more than the
    #: policy's tolerance; ``None``: off.
    rebalance: RebalancePolicy | None = None
    #: seconds between looks for kinds the hub does not serve yet (CRD installed later).
    discovery_interval: float = 30.0
    #: threads writing records on the hub and carrying out single-object actions.
    workers: int = 8
    #: parts a decision is dispatched in concurrently (each part: one thread per cluster).
    dispatch_parts: int = 4
    #: namespaces whose objects are never placed (besides the Lease's namespace).
    ignored_namespaces: tuple[str, ...] = ("kube-system", "kube-public", "kube-node-lease")
    #: create a missing namespace on the member (the workload's namespace).
    create_namespaces: bool = True
    #: seconds a gather of one member may take (and the first listing of its watches).
    gather_timeout: float = 10.0
    #: how a cycle knows the members' capacity: ``watch`` (informer caches kept by watches,
    #: :mod:`placer.controller.capacity`) or ``list`` (every cycle lists every member).
    capacity: str = "watch"
    lease: LeaseSettings = field(default_factory=LeaseSettings)
    backoff: BackoffSettings = field(default_factory=BackoffSettings)
    #: leader election; off only for tests and single-replica setups that want none.
    leader_election: bool = True
    #: reservations with backfill for gangs that wait (:mod:`placer.controller.reserving`);
    #: ``None``: off.
    reservations: ReservationPolicy | None = None

    @property
    def hub_connections(self) -> int:
        """Connections to keep to the hub: a watch per kind (catalog, definitions, policies),
        the workers, the cycle, the leader election."""
        return self.workers + 40

    def __post_init__(self) -> None:
        problems = []
        if not self.batch_window >= 0:
            problems.append("batch window must be >= 0")
        if not self.grace_period > 0:
            problems.append("grace period must be > 0")
        if not self.lease.renew_deadline < self.lease.duration:
            problems.append("lease renew deadline must be shorter than the lease duration")
        if not 0 < self.lease.retry_period < self.lease.renew_deadline:
            problems.append("lease retry period must be positive and below the renew deadline")
        if not self.workers >= 1:
            problems.append("workers must be >= 1")
        if not self.dispatch_parts >= 1:
            problems.append("dispatch parts must be >= 1")
        if self.capacity not in CAPACITY_MODES:
            problems.append(f"capacity must be one of {', '.join(CAPACITY_MODES)}")
        if self.rebalance is not None and not self.preemption:
            problems.append("rebalancing evicts placed work: it needs preemption on")
        if not _LABEL_VALUE.fullmatch(self.hub):
            problems.append(f"hub name {self.hub!r} is not a valid label value")
        if problems:
            raise ValueError("; ".join(problems))


#: the ways a cycle may know the members' capacity (``ControllerSettings.capacity``).
CAPACITY_MODES = ("watch", "list")
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def hub_id(text: str) -> str:
    """A valid label value derived from ``text`` (a context name): ``kind-hub`` stays."""
    cleaned = re.sub(r"[^-A-Za-z0-9_.]", "-", text).strip("-_.")[:63].rstrip("-_.")
    return cleaned or "hub"


def default_identity(environ: Mapping[str, str]) -> str:
    """``POD_NAME`` from ``environ`` when set (a Deployment passes it), else ``hostname-pid``."""
    pod = environ.get("POD_NAME")
    return pod or f"{socket.gethostname()}-{os.getpid()}"
