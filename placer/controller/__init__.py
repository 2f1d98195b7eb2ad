"""``placer controller``: the placement controller on a hub cluster.

Users create workloads on a hub cluster (``placer.dev/queue`` label, or selected by a
PlacementPolicy on the hub); the controller decides them in batches against the members' live
capacity, dispatches each to its member cluster, records the outcome on the hub object, mirrors
the member's status back, moves work off members lost for longer than a grace period, and
deletes member copies when the hub object goes. Several replicas elect a leader with a Lease.

Modules, by concept (pure first, then I/O):

* :mod:`~placer.controller.settings` — :class:`ControllerSettings` and its groups;
* :mod:`~placer.controller.records` — the record on hub objects, the marks on copies, object
  accessors;
* :mod:`~placer.controller.reconcile` — what to do about one object or copy, as pure
  functions, and the :class:`Backoff` arithmetic;
* :mod:`~placer.controller.hubconfig` — hub definitions and PlacementPolicies, read;
* :mod:`~placer.controller.fanout` — a decision split into parts dispatched at once;
* :mod:`~placer.controller.metrics`, :mod:`~placer.controller.logs` — observability;
* :mod:`~placer.controller.informer` — a cached watch of one kind on one cluster;
* the state, one object each: :mod:`~placer.controller.workqueue` (the loop's queue),
  :mod:`~placer.controller.pending` (objects waiting for a cycle),
  :mod:`~placer.controller.hubcache` (the hub's objects, definitions, policies),
  :mod:`~placer.controller.members` (the members' clients, health, copies),
  :mod:`~placer.controller.capacity` (the members' capacity and ledgers, kept by watches);
* :mod:`~placer.controller.hubwrites` — hub writes that keep the hub cache current;
* :mod:`~placer.controller.reconciler` — the loop: reconcile objects, judge copies;
* :mod:`~placer.controller.actions` — single-object actions (worker threads);
* :mod:`~placer.controller.cycles` — placement cycles (the cycle thread);
* :mod:`~placer.controller.leader` — Lease-based leader election;
* :mod:`~placer.controller.events` — Kubernetes Events, aggregated;
* :mod:`~placer.controller.server` — ``/healthz``, ``/readyz``, ``/metrics``, ``/v1/...``;
* :mod:`~placer.controller.controller` — :class:`Controller`, which composes them.
"""

from placer.controller.controller import Controller
from placer.controller.metrics import Metrics
from placer.controller.server import Endpoints, HttpServer
from placer.controller.settings import BackoffSettings, ControllerSettings, LeaseSettings

__all__ = [
    "BackoffSettings",
    "Controller",
    "ControllerSettings",
    "Endpoints",
    "HttpServer",
    "LeaseSettings",
    "Metrics",
]
