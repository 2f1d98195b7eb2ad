"""The controller's Prometheus metrics (``prometheus-client``), in a registry of their own.

Each :class:`Metrics` owns a fresh ``CollectorRegistry`` rather than the library's global one,
so several controllers can run in one process (tests, the benchmark) without clashing, and
``/metrics`` shows exactly the controller's series (plus the process collector when asked).

Series (all prefixed ``placer_``):

=====================================  =========  ==========================================
name                                   type       labels / meaning
=====================================  =========  ==========================================
``placements_total``                   counter    ``cluster``: copies dispatched by cycles
``unschedulable_total``                counter    ``reason``: attempts that found no cluster
``dispatch_errors_total``              counter    ``cluster``, ``reason``: failed applies
``failovers_total``                    counter    ``cluster``: workloads moved off a lost one
``rescheduled_total``                  counter    ``cluster``: workloads moved off a member
                                                  whose scheduler left their pods unschedulable
``stale_copies_deleted_total``         counter    ``cluster``
``invalid_objects_total``              counter    ``reason``: NoDefinition, InvalidWorkload...
``cycles_total``                       counter    placement cycles run
``reconciles_total``                   counter    hub objects reconciled (one per look)
``decision_seconds``                   histogram  solver time per cycle
``placement_latency_seconds``          histogram  hub creation seen → copy applied
``queue_depth``                        gauge      workloads waiting for a cycle
``unschedulable_waiting``              gauge      workloads waiting for capacity
``cluster_reachable``                  gauge      ``cluster``: 1 reachable, 0 not
``cluster_excluded``                   gauge      ``cluster``, ``reason``: 1 while the member is
                                                  left out of decisions (``Unreachable``,
                                                  ``Unauthorized``, ``Forbidden``, ``Error``)
``waiting_for_cluster``                gauge      ``cluster``: hub objects waiting because a
                                                  copy may be on that member, not listable
``leader``                             gauge      1 while this replica leads
``managed_workloads``                  gauge      hub objects with a placement record
``preemptions_total``                  counter    ``reason``: workloads evicted (``reclaim``,
                                                  ``preempt``, ``rebalance``, ``reservation``:
                                                  :mod:`~placer.controller.preemption`)
``queue_allocated``                    gauge      ``queue``, ``resource``: what placed work
                                                  uses of each resource the hub's Queue lists
                                                  (children included; cpu in cores, memory in
                                                  bytes)
``queue_quota``                        gauge      ``queue``, ``resource``: the Queue's quota
``queue_pending``                      gauge      ``queue``, ``resource``: what its workloads
                                                  waiting for a cycle ask
``reservations``                       gauge      ``cluster``: reservations held for waiting
                                                  gangs (:mod:`~placer.controller.reserving`)
``reservation_outcomes_total``         counter    ``outcome``: reservations made (``made``) and
                                                  ended (``placed``, ``gone``, ``replanned``)
=====================================  =========  ==========================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

__all__ = ["CONTENT_TYPE_LATEST", "Metrics", "exclusion_reason", "unschedulable_reason"]

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_DECISION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)


class Metrics:
    """Every series of the module docstring, registered in ``self.registry``."""

    def __init__(self, *, process: bool = False) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        if process:
            from prometheus_client import PLATFORM_COLLECTOR, PROCESS_COLLECTOR

            self.registry.register(PROCESS_COLLECTOR)
            self.registry.register(PLATFORM_COLLECTOR)
        r = self.registry
        self.placements = Counter(
            "placer_placements", "Workloads dispatched to a member", ["cluster"], registry=r
        )
        self.unschedulable = Counter(
            "placer_unschedulable",
            "Placement attempts that found no cluster, by reason",
            ["reason"],
            registry=r,
        )
        self.dispatch_errors = Counter(
            "placer_dispatch_errors",
            "Applies to a member that failed, by cluster and reason",
            ["cluster", "reason"],
            registry=r,
        )
        self.failovers = Counter(
            "placer_failovers",
            "Workloads re-placed because their member was lost",
            ["cluster"],
            registry=r,
        )
        self.rescheduled = Counter(
            "placer_rescheduled",
            "Workloads moved because their member left their pods unschedulable",
            ["cluster"],
            registry=r,
        )
        self.stale_deleted = Counter(
            "placer_stale_copies_deleted",
            "Stale member copies deleted",
            ["cluster"],
            registry=r,
        )
        self.invalid = Counter(
            "placer_invalid_objects",
            "Hub objects that cannot be placed as written, by reason",
            ["reason"],
            registry=r,
        )
        self.cycles = Counter("placer_cycles", "Placement cycles run", registry=r)
        self.reconciles = Counter(
            "placer_reconciles", "Hub objects reconciled (one per look at one)", registry=r
        )
        self.decision_seconds = Histogram(
            "placer_decision_seconds",
            "Solver time of one placement cycle",
            buckets=_DECISION_BUCKETS,
            registry=r,
        )
        self.latency = Histogram(
            "placer_placement_latency_seconds",
            "From the hub object first seen to its copy applied on a member",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "placer_queue_depth", "Workloads waiting for a placement cycle", registry=r
        )
        self.waiting = Gauge(
            "placer_unschedulable_waiting", "Workloads waiting for capacity", registry=r
        )
        self.reachable = Gauge(
            "placer_cluster_reachable",
            "Whether a member cluster answers (1) or not (0)",
            ["cluster"],
            registry=r,
        )
        self.excluded = Gauge(
            "placer_cluster_excluded",
            "1 while a member is left out of placement decisions, with the reason",
            ["cluster", "reason"],
            registry=r,
        )
        self.waiting_for = Gauge(
            "placer_waiting_for_cluster",
            "Hub objects waiting because a copy may be on a member that cannot be listed",
            ["cluster"],
            registry=r,
        )
        self.leader = Gauge("placer_leader", "1 while this replica is the leader", registry=r)
        self.managed = Gauge(
            "placer_managed_workloads", "Hub objects with a placement record", registry=r
        )

        self.preemptions = Counter(
            "placer_preemptions",
            "Placed workloads evicted for pending ones, by rule (reclaim, preempt, rebalance, "
            "reservation)",
            ["reason"],
            registry=r,
        )
        self.queue_allocated = Gauge(
            "placer_queue_allocated",
            "What placed work uses of a resource a hub Queue lists (children included)",
            ["queue", "resource"],
            registry=r,
        )
        self.queue_quota = Gauge(
            "placer_queue_quota",
            "A hub Queue's quota of a resource",
            ["queue", "resource"],
            registry=r,
        )
        self.queue_pending = Gauge(
            "placer_queue_pending",
            "What the workloads of a hub Queue waiting for placement ask of a resource",
            ["queue", "resource"],
            registry=r,
        )

        self.reservations = Gauge(
            "placer_reservations",
            "Reservations held for waiting gangs, by cluster",
            ["cluster"],
            registry=r,
        )
        self.reservation_outcomes = Counter(
            "placer_reservation_outcomes",
            "Reservations made (made) and ended (placed, gone, replanned)",
            ["outcome"],
            registry=r,
        )

    def set_queues(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """The queue gauges from :func:`placer.queues.report.queue_rows` rows (every series of
        a queue or resource no longer there is dropped)."""
        for gauge in (self.queue_allocated, self.queue_quota, self.queue_pending):
            gauge.clear()
        for row in rows:
            for resource, values in row["resources"].items():
                self.queue_allocated.labels(row["name"], resource).set(values["allocated"])
                self.queue_quota.labels(row["name"], resource).set(values["quota"])
                self.queue_pending.labels(row["name"], resource).set(values.get("pending", 0))

    def exposition(self) -> bytes:
        """The registry in Prometheus text format."""
        return bytes(generate_latest(self.registry))


def exclusion_reason(text: str) -> str:
    """A low-cardinality reason why a member is left out of decisions, from its problem text
    (a Kubernetes Status code or an unreachability, as :mod:`placer.kube.translate` words
    them)."""
    if re.search(r"\b401\b", text):
        return "Unauthorized"
    if re.search(r"\b403\b", text):
        return "Forbidden"
    lower = text.lower()
    if "unreachable" in lower or "timed out" in lower:
        return "Unreachable"
    return "Error"


def unschedulable_reason(reasons: dict[str, str] | None) -> str:
    """A low-cardinality reason for an unplaced workload from the solver's per-cluster words.

    Each cluster's text gets one category; the most hopeful cluster decides: capacity taken
    (``InsufficientCapacity``) beats a node mismatch (``NoMatchingNode``), which beats a policy
    or a pin (``PolicyExcluded``, ``Pinned``), which beats an unreachable member
    (``ClusterUnreachable``).
    """
    if not reasons:
        return "NoClusters"
    found = {_category(text.lower()) for text in reasons.values()}
    for name in _HOPE:
        if name in found:
            return name
    return "Other"


_HOPE = (
    "InsufficientCapacity",
    "NoMatchingNode",
    "PolicyExcluded",
    "Pinned",
    "ClusterUnreachable",
    "Other",
)


def _category(text: str) -> str:
    if "unreachable" in text:
        return "ClusterUnreachable"
    if "policy" in text:
        return "PolicyExcluded"
    if "pinned" in text:
        return "Pinned"
    capacity = ("free", "capacity", "room", "displaced", "fits, but", "pack", "allocatable")
    if any(w in text for w in capacity):
        return "InsufficientCapacity"
    if any(w in text for w in ("selector", "affinity", "taint", "no node", "cordon", "no nodes")):
        return "NoMatchingNode"
    return "Other"
