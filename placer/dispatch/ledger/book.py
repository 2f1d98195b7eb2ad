"""The in-memory book of in-flight entries, and charging them to a fleet (no I/O).

``placer submit`` fills a :class:`Ledger` from the members
(:func:`~placer.dispatch.ledger.sync.sync_cluster`) before deciding; the controller keeps one
for its lifetime. Charging is the solver's arithmetic (:func:`placer.solver.charge`), skipping
what the fleet has no node for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import replace

from placer.dispatch.ledger.entry import InFlight
from placer.model import Fleet, Placement, WorkloadRef
from placer.solver import charge as charge_fleet
from placer.solver.charging import release as release_fleet

__all__ = ["Ledger", "charge_known", "release_known"]


class Ledger:
    """The in-flight placements known to this process, by cluster and workload (thread-safe).

    ``placer submit`` fills it from the members (:func:`sync_cluster`) before deciding; the
    controller keeps one for its lifetime, adds every dispatch to it and syncs it with the
    members every cycle.
    """

    def __init__(self, entries: Iterable[InFlight] = ()) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, WorkloadRef], InFlight] = {}
        #: (cluster, workload) -> when this process took its entry out (:meth:`discard`).
        self._removed: dict[tuple[str, WorkloadRef], float] = {}
        for entry in entries:
            self._entries[(entry.cluster, entry.workload)] = entry

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def add(self, entry: InFlight) -> None:
        """Record (or replace) the entry of ``entry.workload`` on ``entry.cluster``."""
        with self._lock:
            self._entries[(entry.cluster, entry.workload)] = entry
            self._removed.pop((entry.cluster, entry.workload), None)

    def discard(self, cluster: str, ref: WorkloadRef) -> None:
        """Forget the entry of ``ref`` on ``cluster`` (no error when there is none), and
        remember when (:meth:`removed`)."""
        with self._lock:
            self._entries.pop((cluster, ref), None)
            self._removed[(cluster, ref)] = time.time()

    def removed(self, cluster: str, *, now: float, within: float) -> dict[WorkloadRef, float]:
        """The workloads whose entry on ``cluster`` this process took out in the last
        ``within`` seconds, with when: an entry of theirs created before then that a lagging
        watch still shows is gone (older removals are forgotten)."""
        with self._lock:
            for key in [k for k, when in self._removed.items() if now - when > within]:
                del self._removed[key]
            return {ref: when for (c, ref), when in self._removed.items() if c == cluster}

    def replace_cluster(self, cluster: str, entries: Iterable[InFlight]) -> None:
        """Make ``entries`` the whole ledger of ``cluster`` (after a sync)."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == cluster]:
                del self._entries[key]
            for entry in entries:
                self._entries[(cluster, entry.workload)] = entry

    def entries(self, *, now: float | None = None) -> list[InFlight]:
        """Unexpired entries (all entries when ``now`` is ``None``), in insertion order."""
        with self._lock:
            items = list(self._entries.values())
        return items if now is None else [e for e in items if not e.expired(now)]

    def get(self, cluster: str, ref: WorkloadRef) -> InFlight | None:
        with self._lock:
            return self._entries.get((cluster, ref))

    def placements(self, *, now: float | None = None) -> list[Placement]:
        """The placements still charged (unexpired entries with pods left)."""
        when = time.time() if now is None else now
        return [e.placement for e in self.entries(now=when) if e.placement.pods]

    def charge(self, fleet: Fleet, *, now: float | None = None) -> Fleet:
        """``fleet`` with every unexpired entry's remaining pods charged to their nodes.

        Entries on clusters the fleet does not have or could not reach, and pods on nodes that
        are gone, are skipped: there is nothing to charge them to.
        """
        return charge_known(fleet, self.placements(now=now))


def charge_known(fleet: Fleet, placements: Iterable[Placement]) -> Fleet:
    """``fleet`` with ``placements`` charged, skipping pods it has no node for.

    Placements on clusters the fleet lacks or could not reach, and pods on nodes that are
    gone (or without a node: snapshot-free decisions), have nothing to be charged to.
    """
    chargeable = _on_known_nodes(fleet, placements)
    return charge_fleet(fleet, chargeable) if chargeable else fleet


def release_known(fleet: Fleet, placements: Iterable[Placement]) -> Fleet:
    """``fleet`` with ``placements`` taken off again (an updated copy's pods), skipping pods
    it has no node for, as :func:`charge_known` does."""
    known = _on_known_nodes(fleet, placements)
    return release_fleet(fleet, known) if known else fleet


def _on_known_nodes(fleet: Fleet, placements: Iterable[Placement]) -> list[Placement]:
    """``placements`` cut to the pods on nodes of reachable clusters of ``fleet``."""
    nodes = {c.name: {n.name for n in c.nodes} for c in fleet.clusters if c.reachable}
    found = []
    for placement in placements:
        known = nodes.get(placement.cluster)
        if not known:
            continue
        pods = tuple(p for p in placement.pods if p.node in known)
        if pods:
            found.append(replace(placement, pods=pods))
    return found
