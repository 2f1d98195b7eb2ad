"""What the controller knows of the member clusters: clients, health, exclusions, copies.

:class:`MembersView` holds, per member,

* its **client** (opened once) and its **health**: reachable or not since when, and why not
  (:class:`~placer.controller.reconcile.Health`; only a gather says a member is reachable
  again, since it lists what placement needs);
* the **listing problems** of its copies, per kind (401, 403, an error: the member answers but
  its copies of that kind cannot be listed), and the **exclusions** they and unreadable
  in-flight ledgers cause (:meth:`MembersView.exclude`: the member is left out of decisions,
  with its reason, in ``placer_cluster_excluded``);
* the **informers of this hub's copies**, per kind in use (label ``placer.dev/hub``), and the
  **phase** of each copy through its definition (cached per copy version);

and per hub object (by uid), **where a copy may be unseen**: the members this leader dispatched
it to, or anywhere for an object already on the hub when this leader started (an earlier
leader may have dispatched it) — :meth:`MembersView.suspects` — and the members an object
**waits for** (``WaitingForCluster``) because a copy may be there and cannot be listed.

:meth:`MembersView.forget` drops what it holds about a hub object gone and names its copies,
which are stale now. It locks ``lock`` (its own by default; the controller passes the lock its
state objects share).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from placer.controller.informer import Change, Informer
from placer.controller.metrics import Metrics, exclusion_reason
from placer.controller.reconcile import Health
from placer.controller.records import JSON, LABEL_HUB, CopyRef, hub_uid_of
from placer.definitions import Catalog, phases_of
from placer.errors import PlacerError
from placer.fleet import FleetConfig
from placer.kube import ClientSettings, KubeClient, open_client
from placer.model import Fleet, WorkloadRef
from placer.objects import name_key, version_of

__all__ = ["PHASES", "MembersView", "StateChange"]

log = logging.getLogger(__name__)

#: copy phases cached at most (all dropped when full).
PHASES = 50_000
#: ``callback(informer, reachable, reason)`` of a copy informer (see :class:`Informer`).
StateChange = Callable[[Informer, bool, str], None]
_UNKNOWN = Health(False, 0.0, False)


class MembersView:
    """The members as the controller sees them (see the module docstring).

    Args:
        config: the member clusters.
        hub: this hub's name (the ``placer.dev/hub`` label of its copies).
        metrics: where reachability and exclusions are shown.
        on_copy: called for each change of a copy (informer thread).
        on_state: called when a copy informer fails or lists (informer thread).
        discovery_interval: seconds between looks for kinds a member does not serve yet.
        retry_interval: longest wait between attempts to list a member that does not answer.
        clock: monotonic seconds.
        lock: the lock to hold (default: a new one).
    """

    def __init__(
        self,
        config: FleetConfig,
        hub: str,
        metrics: Metrics,
        *,
        on_copy: Change,
        on_state: StateChange,
        discovery_interval: float = 30.0,
        retry_interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        lock: threading.RLock | None = None,
    ) -> None:
        self.config = config
        self.names: tuple[str, ...] = config.names
        self.hub = hub
        self.metrics = metrics
        self._on_copy = on_copy
        self._on_state = on_state
        self.discovery_interval = discovery_interval
        self.retry_interval = retry_interval
        self._clock = clock
        self._lock = lock if lock is not None else threading.RLock()
        self.clients: dict[str, KubeClient] = {}
        self._health: dict[str, Health] = {}
        #: (member, apiVersion, kind) -> (why its copies cannot be listed, since when).
        self._listing: dict[tuple[str, str, str], tuple[str, float]] = {}
        #: member -> why it is left out of decisions though it was gathered.
        self._excluded: dict[str, str] = {}
        self._informers: dict[tuple[str, str, str], Informer] = {}
        #: (cluster, kind, namespace, name) of a copy -> (resourceVersion, phase).
        self._phases: dict[tuple[str, str, str, str], tuple[str, str]] = {}
        #: hub object uid -> members this leader dispatched it to (or tried).
        self._touched: dict[str, set[str]] = {}
        #: uids of hub objects listed when this leader started.
        self._inherited: set[str] = set()
        #: hub object -> the members its ``WaitingForCluster`` condition names.
        self._blocked: dict[WorkloadRef, tuple[str, ...]] = {}

    # -- clients ---------------------------------------------------------------------------------

    def open(self, settings: ClientSettings) -> None:
        """Open a client per member; a member that cannot be used is unreachable from now."""
        now = self._clock()
        for source in self.config.clusters:
            if source.problem or source.kubeconfig is None:
                self._health[source.name] = Health(False, now, False)
                log.warning(
                    "member %s cannot be used: %s",
                    source.name,
                    source.problem or "no kubeconfig",
                    extra={"event": "member-problem", "cluster": source.name},
                )
                continue
            try:
                self.clients[source.name] = open_client(
                    source.kubeconfig, source.context, name=source.name, settings=settings
                )
                self._health[source.name] = Health(True, now, False)
            except PlacerError as err:
                self._health[source.name] = Health(False, now, False)
                log.warning(
                    "member %s cannot be used: %s",
                    source.name,
                    err,
                    extra={"event": "member-problem", "cluster": source.name},
                )
            self.metrics.reachable.labels(source.name).set(
                1 if self._health[source.name].reachable else 0
            )

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    # -- health ----------------------------------------------------------------------------------

    def health(self, cluster: str) -> Health:
        with self._lock:
            return self._health.get(cluster, Health())

    def set_health(self, cluster: str, reachable: bool, reason: str = "") -> bool:
        """Record whether ``cluster`` is reachable (``reason``: why not); returns whether that
        changed."""
        with self._lock:
            current = self._health.get(cluster, Health())
            if current.reachable == reachable:
                if not reachable and reason and reason != current.problem:
                    self._health[cluster] = replace(current, problem=reason)
                return False
            self._health[cluster] = Health(
                reachable, self._clock(), current.synced, "" if reachable else reason
            )
        self.metrics.reachable.labels(cluster).set(1 if reachable else 0)
        log.log(
            logging.INFO if reachable else logging.WARNING,
            "member %s is %s%s",
            cluster,
            "reachable" if reachable else "unreachable",
            f": {reason}" if reason else "",
            extra={"event": "member-health", "cluster": cluster},
        )
        return True

    def lost(self, now: float, grace_period: float) -> set[str]:
        """Members unreachable for at least ``grace_period``."""
        with self._lock:
            return {
                c
                for c, h in self._health.items()
                if not h.reachable and now - h.since >= grace_period
            }

    def set_listing(self, cluster: str, api_version: str, kind: str, reason: str) -> bool:
        """Record why ``cluster``'s copies of a kind cannot be listed (``""``: they are);
        returns whether that changed between listable and not."""
        key = (cluster, api_version, kind)
        with self._lock:
            before = self._listing.get(key)
            if reason:
                since = before[1] if before is not None else self._clock()
                self._listing[key] = (reason, since)
            else:
                self._listing.pop(key, None)
            return (before is None) != (not reason)

    def exclude(self, gathered: Fleet, unreadable: Mapping[str, str]) -> Fleet:
        """The fleet to decide on: members gathered but not fully listable are left out.

        A member whose in-flight ledger (``unreadable``), or whose copies of a kind in use,
        cannot be listed (401, 403, an error) gets ``reachable=False`` with the reason: its free
        room and the copies there are not known, so nothing is placed there until it can be
        listed (the gather's own failures are already unreachable). Says so in the log when it
        changes and in ``placer_cluster_excluded``.
        """
        with self._lock:
            listing = dict(self._listing)
        problems: dict[str, str] = dict(unreadable)
        for (member, api_version, kind), (reason, _) in sorted(listing.items()):
            if member not in problems:
                problems[member] = f"its {kind} objects ({api_version}) cannot be listed: {reason}"
        clusters = []
        excluded: dict[str, str] = {}
        for cluster in gathered.clusters:
            if not cluster.reachable:
                excluded[cluster.name] = cluster.reason
            elif cluster.name in problems:
                excluded[cluster.name] = problems[cluster.name]
                cluster = replace(cluster, reachable=False, reason=problems[cluster.name])
            clusters.append(cluster)
        with self._lock:
            before, self._excluded = self._excluded, excluded
        for name in sorted(set(before) | set(excluded)):
            old, new = before.get(name), excluded.get(name)
            if old == new:
                continue
            if old is not None:
                self.metrics.excluded.remove(name, exclusion_reason(old))
            if new is not None:
                self.metrics.excluded.labels(name, exclusion_reason(new)).set(1)
                if name in problems:  # (the gather's failures are logged as member health)
                    log.warning(
                        "member %s is left out of placement decisions: %s",
                        name,
                        new,
                        extra={"event": "member-excluded", "cluster": name},
                    )
            else:
                log.info(
                    "member %s is used for placement decisions again",
                    name,
                    extra={"event": "member-included", "cluster": name},
                )
        return replace(gathered, clusters=tuple(clusters))

    # -- copies ----------------------------------------------------------------------------------

    def watch(self, cluster: str, api_version: str, kind: str) -> Informer | None:
        """The informer of this hub's copies of a kind on ``cluster``, started if need be
        (``None`` when the member has no client)."""
        key = (cluster, api_version, kind)
        with self._lock:
            existing = self._informers.get(key)
            if existing is not None:
                return existing
            client = self.clients.get(cluster)
            if client is None:
                return None
            informer = Informer(
                client,
                api_version,
                kind,
                on_change=self._on_copy,
                on_state=self._on_state,
                label_selector=f"{LABEL_HUB}={self.hub}",
                watch=client.settings.watch,
                discovery_interval=self.discovery_interval,
                retry_interval=self.retry_interval,
            )
            self._informers[key] = informer
        informer.start()
        return informer

    def watch_all(self, api_version: str, kind: str) -> None:
        """Watch this hub's copies of a kind on every member."""
        for cluster in self.names:
            self.watch(cluster, api_version, kind)

    def informer(self, cluster: str, api_version: str, kind: str) -> Informer | None:
        with self._lock:
            return self._informers.get((cluster, api_version, kind))

    def informers(self) -> list[Informer]:
        with self._lock:
            return list(self._informers.values())

    def view(self, ref: WorkloadRef, uid: str) -> tuple[dict[str, JSON], dict[str, Health]]:
        """The copies of hub object ``ref`` (of ``uid``) by member, where they are listed, and
        every member's health for its kind (listed or not, and why not)."""
        copies: dict[str, JSON] = {}
        health: dict[str, Health] = {}
        with self._lock:
            for cluster in self.names:
                state = self._health.get(cluster, _UNKNOWN)
                informer = self._informers.get((cluster, ref.api_version, ref.kind))
                synced = informer is not None and informer.synced
                listing = self._listing.get((cluster, ref.api_version, ref.kind))
                if not state.reachable:
                    problem = (state.problem or "unreachable", state.since)
                else:
                    problem = listing or ("", 0.0)
                health[cluster] = replace(
                    state, synced=synced, problem=problem[0], problem_since=problem[1]
                )
                if informer is not None and synced:
                    copy = informer.get(ref.namespace, ref.name)
                    if copy is not None and hub_uid_of(copy) == uid:
                        copies[cluster] = copy
        return copies, health

    def copies_of(self, ref: WorkloadRef, uid: str) -> list[CopyRef]:
        """The copies of hub object ``ref`` (of ``uid``) listed on any member."""
        found = []
        with self._lock:
            informers = list(self._informers.items())
        for (cluster, api_version, kind), informer in informers:
            if (api_version, kind) != (ref.api_version, ref.kind):
                continue
            copy = informer.get(ref.namespace, ref.name)
            if copy is not None and hub_uid_of(copy) == uid:
                found.append(CopyRef.on(cluster, ref))
        return found

    def remember(self, cluster: str, ref: WorkloadRef, copy: Mapping[str, Any]) -> None:
        """Put a copy just applied in the cache (its watch event follows)."""
        informer = self.informer(cluster, ref.api_version, ref.kind)
        if informer is not None:
            informer.remember(copy)

    def forget_copy(self, cluster: str, ref: WorkloadRef) -> None:
        """Drop a copy just deleted from the cache."""
        informer = self.informer(cluster, ref.api_version, ref.kind)
        if informer is not None:
            informer.forget(ref.namespace, ref.name)

    def phase_of(self, cluster: str, copy: Mapping[str, Any], catalog: Catalog) -> str:
        """The copy's phase through its definition, cached per copy (latest version only)."""
        namespace, name = name_key(copy)
        key = (cluster, str(copy.get("kind")), namespace, name)
        version = version_of(copy)
        with self._lock:
            cached = self._phases.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        try:
            phase = ",".join(phases_of(copy, catalog))
        except PlacerError:
            phase = ""
        if phase == "Undefined":
            phase = ""
        with self._lock:
            if len(self._phases) > PHASES:
                self._phases.clear()
            self._phases[key] = (version, phase)
        return phase

    def clear_phases(self) -> None:
        """The definitions changed: phases are read again."""
        with self._lock:
            self._phases.clear()

    # -- where copies may be unseen --------------------------------------------------------------

    def inherit(self, uid: str) -> None:
        """Hub object ``uid`` was on the hub when this leader started: a copy may be anywhere."""
        with self._lock:
            self._inherited.add(uid)

    def dispatched(self, uid: str, clusters: Iterable[str]) -> None:
        """Hub object ``uid`` was dispatched (or tried) to ``clusters``."""
        with self._lock:
            self._touched.setdefault(uid, set()).update(clusters)

    def suspects(self, uid: str) -> set[str] | None:
        """Where a copy of an unrecorded ``uid`` may be unseen: the members it was dispatched
        to, ``None`` for any member (see :func:`~placer.controller.reconcile.reconcile`)."""
        with self._lock:
            if uid in self._inherited:
                return None
            return set(self._touched.get(uid, ()))

    def seen_everywhere(self, uid: str) -> None:
        """Every member's copies were listed: no copy of ``uid`` is unseen anywhere."""
        with self._lock:
            self._inherited.discard(uid)

    # -- objects waiting for members -------------------------------------------------------------

    def waits_for(self, ref: WorkloadRef) -> tuple[str, ...]:
        """The members ``ref`` was last said to wait for."""
        with self._lock:
            return self._blocked.get(ref, ())

    def block(self, ref: WorkloadRef, clusters: tuple[str, ...]) -> None:
        """``ref`` was said to wait for ``clusters`` (its condition and Event are written)."""
        with self._lock:
            self._blocked[ref] = clusters

    def unblock(self, ref: WorkloadRef) -> None:
        with self._lock:
            self._blocked.pop(ref, None)

    def blocked_counts(self) -> dict[str, int]:
        """Per member, how many hub objects wait for it."""
        with self._lock:
            counts = dict.fromkeys(self.names, 0)
            for clusters in self._blocked.values():
                for cluster in clusters:
                    counts[cluster] = counts.get(cluster, 0) + 1
        return counts

    # -- forgetting ------------------------------------------------------------------------------

    def forget(self, ref: WorkloadRef, uid: str) -> list[CopyRef]:
        """Hub object ``ref`` (of ``uid``) is gone: drop what is held about it; its copies
        listed anywhere, to judge as stale (one listed meanwhile was not judged as such)."""
        stale = self.copies_of(ref, uid) if uid else []
        with self._lock:
            if uid:
                self._touched.pop(uid, None)
                self._inherited.discard(uid)
            self._blocked.pop(ref, None)
            for cluster in self.names:
                self._phases.pop((cluster, ref.kind, ref.namespace, ref.name), None)
        return stale

    def sizes(self) -> dict[str, int]:
        """How many hub objects are held as dispatched-to, inherited, waiting for a member."""
        with self._lock:
            return {
                "touched": len(self._touched),
                "inherited": len(self._inherited),
                "blocked": len(self._blocked),
            }
