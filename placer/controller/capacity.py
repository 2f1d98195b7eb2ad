"""The members' capacity kept by watches: what a placement cycle reads instead of gathering.

:class:`MemberCapacity` runs, per member, one :class:`~placer.controller.informer.Informer` per
kind that capacity gathering lists — Nodes, Pods (every phase: the in-flight ledger observes
finished pods too), ``resource.k8s.io/v1`` ResourceSlices and ResourceClaims — and one of the
ConfigMaps of placer's namespace there (the in-flight ledger's entries and the workload claims).
Each change feeds the member's :class:`~placer.fleet.livecluster.LiveCluster`, which keeps the
free capacity per node; a cycle then reads, per member, the cluster built from it
(:meth:`MemberCapacity.cluster`) and syncs the ledger from the caches
(:meth:`MemberCapacity.ledger_reads`): in steady state a cycle sends no LIST to the members.

The rules of gathering hold (:mod:`placer.fleet.gather`):

* a member is **unavailable** while any of its watches has failed (the reason is the one a
  gather gives for the same error: unreachable, 401, 403 with what to do) or has not listed
  yet, and is left out of decisions with that reason until the watch lists again. A member
  that goes away cuts the streams: the watch fails once its reconnects are spent
  (:data:`CAPACITY_WATCH`, about 2 s). One that starts refusing (expired credentials, a role
  taken away) is noticed when its watches are asked again, every :data:`WATCH_TIMEOUT`
  seconds (an open stream goes on); one that hangs when the stream's read times out
  (:data:`WATCH_TIMEOUT` + 15 s);
* a member that does not serve ``resource.k8s.io/v1`` has no DRA devices, and the claims count
  only where there are slices (a refused claims list leaves out only a member with slices);
* the counting is the gather's (:class:`~placer.fleet.livecluster.LiveCluster`);
* the ledger is synced before the capacity is read, as a gather does, and **both see the same
  state of the caches**: a cycle holds the member's changes while it does both
  (:meth:`MemberCapacity.holding`). An entry is retired by the pods its sync saw bound; had
  one of them gone before the capacity was read (a re-applied edit rolling the workload's
  pods), its room would be counted by neither, and the node look free while the workload's
  new pods wait for it.

The ledger's entries are read from the ConfigMap cache, and its workloads from the caches of
this hub's copies (``workloads``; a workload not found there is read with a GET). An entry this
process wrote less than :data:`WATCH_LAG` seconds ago and not yet shown by the watch is kept as
written, so that the cycles after a dispatch still charge it however many the watch lags (one
the watch showed and shows no more was removed) — also when the watch still shows the
workload's entry of an earlier decision, which the new one was written over.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from placer.accelerators import AcceleratorTable
from placer.controller.informer import Informer
from placer.controller.records import JSON
from placer.dispatch import Ledger
from placer.dispatch.claims import LABEL_CLAIMS, Claim, claims_from_configmaps
from placer.dispatch.ledger import (
    LABEL_IN_FLIGHT,
    LEDGER_NAMESPACE,
    InFlight,
    entries_from_configmap,
    read_entries,
)
from placer.dispatch.ledger.sync import ListedReads
from placer.errors import NotFoundError
from placer.fleet import ClusterSource, FleetConfig
from placer.fleet.devices import DRA_API_VERSION
from placer.fleet.gather import unavailable
from placer.fleet.livecluster import LiveCluster, compact_node, compact_pod
from placer.kube import KubeClient, OwnerWalker, WatchSettings
from placer.model import Cluster, WorkloadRef
from placer.objects import labels_of, name_key, name_of, version_of
from placer.podspec import pod_requests

__all__ = ["WATCH_LAG", "CachedReads", "MemberCapacity"]

log = logging.getLogger(__name__)

#: seconds an entry written by this process is kept while the watch has not shown it yet.
WATCH_LAG = 30.0
#: pod phases that hold no capacity.
_FINISHED = ("Succeeded", "Failed")
#: pods' requests kept per member for the ledger's observation (all dropped when full).
REQUESTS_KEPT = 50_000
#: ``timeoutSeconds`` of each capacity watch request: a member that starts refusing (401, 403:
#: an open stream goes on) is noticed when its watches are asked again, within this.
WATCH_TIMEOUT = 10
#: the capacity watches' settings (reconnects as the copies' watches).
CAPACITY_WATCH = WatchSettings(
    server_timeout=WATCH_TIMEOUT, reconnect_backoff=0.5, max_reconnects=2, allow_bookmarks=True
)
NODES = ("v1", "Node")
PODS = ("v1", "Pod")
SLICES = (DRA_API_VERSION, "ResourceSlice")
CLAIMS = (DRA_API_VERSION, "ResourceClaim")
CONFIGMAPS = ("v1", "ConfigMap")
#: the kinds whose watches must have listed for a member's capacity to be known.
CAPACITY_KINDS = (NODES, PODS, SLICES, CLAIMS)
#: ``workloads(cluster, api_version, kind)``: this hub's copies there, when listed.
Workloads = Callable[[str, str, str], Informer | None]


@dataclass
class _Member:
    live: LiveCluster
    #: held while a change is applied to ``live``, and while a cycle syncs the ledger and reads
    #: the capacity (:meth:`MemberCapacity.holding`): both see the same state.
    hold: threading.Lock = field(default_factory=threading.Lock)
    informers: dict[tuple[str, str], Informer] = field(default_factory=dict)
    #: (apiVersion, kind) -> why its watch failed (absent: it works).
    problems: dict[tuple[str, str], str] = field(default_factory=dict)
    #: ledger ConfigMap name -> (resourceVersion, its entries), parsed once per version.
    parsed: dict[str, tuple[str, list[InFlight]]] = field(default_factory=dict)
    #: pod -> (resourceVersion, its effective requests), read once per version.
    requests: dict[tuple[str, str], tuple[str, Mapping[str, int]]] = field(default_factory=dict)
    #: (workload, decision) of the entries the watch has shown -> when first shown (epoch s).
    shown: dict[tuple[WorkloadRef, str], float] = field(default_factory=dict)


class MemberCapacity:
    """The members' capacity and ledgers, kept by watches (see the module docstring).

    Args:
        config: the member clusters (labels, taints, accelerator table).
        accelerators: how GPU fractions and DRA devices are counted.
        watch: the watches' settings (default :data:`CAPACITY_WATCH`).
        on_change: called (informer thread) with the member's name after each change of its
            capacity objects.
        on_state: called (informer thread) with ``(member, reachable, reason)`` when one of its
            watches fails (``reason``) or lists (``""``), as ``Informer``'s ``on_state``.
        discovery_interval: seconds between looks for a kind a member does not serve.
        retry_interval: longest wait between attempts while a member does not answer.
    """

    def __init__(
        self,
        config: FleetConfig,
        accelerators: AcceleratorTable,
        *,
        watch: WatchSettings | None = None,
        on_change: Callable[[str], None] | None = None,
        on_state: Callable[[str, bool, str], None] | None = None,
        discovery_interval: float = 30.0,
        retry_interval: float = 10.0,
    ) -> None:
        self.config = config
        self.accelerators = accelerators
        self.watch_settings = watch
        self.discovery_interval = discovery_interval
        self.retry_interval = retry_interval
        self._on_change = on_change
        self._on_state = on_state
        self._lock = threading.Lock()
        self._members: dict[str, _Member] = {}
        self._first_synced = False

    # -- running ---------------------------------------------------------------------------------

    def start(self, clients: Mapping[str, KubeClient]) -> None:
        """Start watching every member that has a client."""
        for source in self.config.clusters:
            client = clients.get(source.name)
            if client is None:
                continue
            member = _Member(LiveCluster(source.name, self.accelerators))
            with self._lock:
                self._members[source.name] = member
            kinds: list[tuple[tuple[str, str], str | None, Callable[[JSON], JSON] | None]] = [
                (NODES, None, compact_node),
                (PODS, None, compact_pod),
                (SLICES, None, None),
                (CLAIMS, None, None),
                (CONFIGMAPS, LEDGER_NAMESPACE, None),
            ]
            for (api_version, kind), namespace, transform in kinds:
                informer = Informer(
                    client,
                    api_version,
                    kind,
                    on_change=self._changed,
                    on_state=self._state,
                    namespace=namespace,
                    transform=transform,
                    watch=self.watch_settings or CAPACITY_WATCH,
                    discovery_interval=self.discovery_interval,
                    retry_interval=self.retry_interval,
                )
                member.informers[(api_version, kind)] = informer
        for informer in self.informers():
            informer.start()

    def informers(self) -> list[Informer]:
        with self._lock:
            members = list(self._members.values())
        return [i for m in members for i in m.informers.values()]

    def stop(self) -> None:
        for informer in self.informers():
            informer.stop()

    def join(self, timeout: float | None = None) -> None:
        for informer in self.informers():
            informer.join(timeout)

    def first_sync(self, timeout: float) -> None:
        """The first time only: wait until every member's capacity watches have listed, at
        most ``timeout`` (a member that does not answer must not hold every cycle up)."""
        if self._first_synced:
            return
        self.wait_synced(timeout)
        self._first_synced = True

    def wait_synced(self, timeout: float) -> bool:
        """Wait until every member's capacity watches have listed (or ``timeout``)."""
        deadline = time.monotonic() + timeout
        for informer in self.informers():
            if (informer.api_version, informer.kind) not in CAPACITY_KINDS:
                continue
            if not informer.wait_synced(max(0.0, deadline - time.monotonic())):
                return False
        return True

    def changes(self) -> int:
        """Changes applied to the members' capacity objects so far (all members)."""
        with self._lock:
            members = list(self._members.values())
        return sum(m.live.changes for m in members)

    def pending_pods(self, name: str) -> list[JSON] | None:
        """Member ``name``'s ``Pending`` pods as its pod watch shows them, with their
        ``PodScheduled`` condition (``None``: not known, the watch has not listed)."""
        member = self._member(name)
        if member is None:
            return None
        pods = member.informers.get(("v1", "Pod"))
        if pods is None or not pods.synced:
            return None
        return member.live.pending_pods()

    def pods_left(self, name: str, pods: Iterable[tuple[str, str]]) -> set[tuple[str, str]] | None:
        """Which of ``pods`` ((namespace, name) keys) member ``name``'s pod watch still shows,
        not finished (``None``: not known, the watch has not listed)."""
        member = self._member(name)
        informer = member.informers.get(PODS) if member is not None else None
        if informer is None or not informer.synced:
            return None
        left = set()
        for namespace, pod_name in pods:
            pod = informer.get(namespace, pod_name)
            if pod is not None and (pod.get("status") or {}).get("phase") not in _FINISHED:
                left.add((namespace, pod_name))
        return left

    # -- what the informers say ------------------------------------------------------------------

    def _member(self, name: str) -> _Member | None:
        with self._lock:
            return self._members.get(name)

    def _changed(self, informer: Informer, old: JSON | None, new: JSON | None) -> None:
        member = self._member(informer.cluster)
        if member is None:
            return
        what = (informer.api_version, informer.kind)
        obj = new if new is not None else old
        if obj is None or what == CONFIGMAPS:
            return
        key = name_key(obj)
        with member.hold:
            if what == NODES:
                member.live.set_node(new, name=key[1])
            elif what == PODS:
                member.live.set_pod(key, new)
            elif what == SLICES:
                member.live.set_slice(key, new)
            else:
                member.live.set_claim(key, new)
        if self._on_change is not None:
            self._on_change(informer.cluster)

    def _state(self, informer: Informer, reachable: bool, reason: str) -> None:
        member = self._member(informer.cluster)
        if member is None:
            return
        what = (informer.api_version, informer.kind)
        with self._lock:
            if reason:
                member.problems[what] = reason
            else:
                member.problems.pop(what, None)
        if self._on_state is not None:
            self._on_state(informer.cluster, reachable, reason)

    # -- reading ---------------------------------------------------------------------------------

    @contextmanager
    def holding(self, name: str) -> Iterator[None]:
        """Member ``name``'s capacity objects unchanged while held (their watches' changes wait):
        a cycle syncs the ledger and reads the capacity under it, so that both see the same
        pods (module docstring)."""
        member = self._member(name)
        if member is None:
            yield
            return
        with member.hold:
            yield

    def cluster(self, source: ClusterSource) -> Cluster:
        """``source``'s capacity as the watches know it, or the member unavailable and why."""
        member = self._member(source.name)
        if member is None:
            return unavailable(source, source.problem or "no client for it")
        problem = self.problem(source.name)
        if problem:
            return unavailable(source, problem)
        return member.live.cluster(labels=source.labels, taints=source.taints)

    def room(self, cluster: Cluster) -> dict[str, int] | None:
        """``cluster.free()`` when ``cluster`` is the member's capacity as last read from the
        watches (kept node by node), else ``None``."""
        member = self._member(cluster.name)
        return member.live.room(cluster) if member is not None else None

    def problem(self, name: str) -> str:
        """Why ``name``'s capacity is not known now (``""``: it is)."""
        member = self._member(name)
        if member is None:
            return "no client for it"
        with self._lock:
            problems = dict(member.problems)
        with_slices = member.live.has_slices
        for what in CAPACITY_KINDS:
            if what == CLAIMS and not with_slices:
                continue
            if what in problems:
                return problems[what]
        for what in CAPACITY_KINDS:
            if what == CLAIMS and not with_slices:
                continue
            if not member.informers[what].synced:
                return f"its {what[1]} objects are not listed yet"
        return ""

    def ledger_reads(
        self,
        name: str,
        client: KubeClient,
        *,
        ledger: Ledger,
        workloads: Workloads,
        now: float,
    ) -> CachedReads | ListedReads:
        """Where ``name``'s ledger sync reads (the caches, or listing where they are not
        listed yet)."""
        member = self._member(name)
        if member is None:
            return ListedReads(client)
        return CachedReads(self, member, client, ledger=ledger, workloads=workloads, now=now)

    def _entries(self, member: _Member, configmaps: Iterable[JSON]) -> list[InFlight]:
        entries: list[InFlight] = []
        seen: set[str] = set()
        for item in configmaps:
            if labels_of(item).get(LABEL_IN_FLIGHT) != "true":
                continue
            name = name_of(item)
            version = version_of(item)
            seen.add(name)
            cached = member.parsed.get(name)
            if cached is None or cached[0] != version:
                found, bad = entries_from_configmap(item)
                for key in bad:
                    log.warning(
                        "cluster %s: skipping unreadable in-flight entry %s/%s",
                        member.live.name,
                        name,
                        key,
                    )
                cached = (version, found)
                member.parsed[name] = cached
            entries += cached[1]
        for name in [n for n in member.parsed if n not in seen]:
            del member.parsed[name]
        return entries


class CachedReads:
    """:class:`~placer.dispatch.ledger.sync.LedgerReads` from the watch caches (module
    docstring); what is not listed yet is listed."""

    def __init__(
        self,
        capacity: MemberCapacity,
        member: _Member,
        client: KubeClient,
        *,
        ledger: Ledger,
        workloads: Workloads,
        now: float,
    ) -> None:
        self._capacity = capacity
        self._member = member
        self._client = client
        self._ledger = ledger
        self._workloads = workloads
        self._now = now
        self._listed = ListedReads(client)
        self._configmaps = member.informers[CONFIGMAPS]
        self._pods = member.informers[PODS]

    def entries(self) -> list[InFlight]:
        if not self._configmaps.synced:
            return read_entries(self._client)
        entries = self._capacity._entries(self._member, self._configmaps.objects())
        cluster = self._member.live.name
        removed = self._ledger.removed(cluster, now=self._now, within=WATCH_LAG)
        if removed:
            # taken out by this process (an eviction, a deletion), still shown by a lagging
            # watch: gone (a later decision's entry, created after the removal, counts)
            entries = [
                e for e in entries if e.workload not in removed or e.created > removed[e.workload]
            ]
        shown = self._member.shown
        for entry in entries:
            shown.setdefault((entry.workload, entry.decision), self._now)
        for key in [k for k, when in shown.items() if self._now - when > 2 * WATCH_LAG]:
            del shown[key]
        known = {(e.workload, e.decision) for e in entries}
        newest: dict[WorkloadRef, float] = {}
        for e in entries:
            newest[e.workload] = max(e.created, newest.get(e.workload, e.created))
        written: list[InFlight] = []
        for entry in self._ledger.entries():
            if (
                entry.cluster == cluster
                and (entry.workload, entry.decision) not in known
                and (entry.workload, entry.decision) not in shown
                and 0 <= self._now - entry.created < WATCH_LAG
                and newest.get(entry.workload, entry.created) <= entry.created
            ):
                # written by this process, not shown by the watch yet (its event follows); one
                # the watch showed and no longer shows was removed. The workload's older entry
                # the watch still shows was written over (one entry per workload and member).
                written.append(entry)
        if written:
            over = {e.workload for e in written}
            entries = [e for e in entries if e.workload not in over] + written
        return entries

    def claims(self, now: float) -> Mapping[str, Claim]:
        if not self._configmaps.synced:
            return self._listed.claims(now)
        items = [o for o in self._configmaps.objects() if labels_of(o).get(LABEL_CLAIMS) == "true"]
        return {k: c for k, c in claims_from_configmaps(items).items() if c.live(now)}

    def workload(
        self, api_version: str, kind: str, namespace: str, name: str
    ) -> Mapping[str, Any] | None:
        informer = self._workloads(self._member.live.name, api_version, kind)
        if informer is not None and informer.synced:
            found = informer.get(namespace, name)
            if found is not None:
                return found
        try:
            return self._client.get(api_version, kind, name, namespace=namespace)
        except NotFoundError:  # not there, or its kind is not served
            return None

    def pods(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        if not self._pods.synced:
            return self._listed.pods(namespace)
        return self._member.live.pods_in(namespace)

    def requests(self, pod: Mapping[str, Any]) -> Mapping[str, int]:
        """A pod's effective requests, read once per version of the pod."""
        key = name_key(pod)
        version = version_of(pod)
        memo = self._member.requests
        found = memo.get(key)
        if found is None or found[0] != version or not version:
            if len(memo) > REQUESTS_KEPT:
                memo.clear()
            found = (version, pod_requests(pod["spec"], strict=False))
            memo[key] = found
        return found[1]

    def owners(self) -> OwnerWalker:
        """Owners looked for among this hub's copies first (a pod's Job is often one)."""
        return OwnerWalker(self._client, lookup=self._cached_owner)

    def _cached_owner(
        self, api_version: str, kind: str, namespace: str, name: str
    ) -> Mapping[str, Any] | None:
        informer = self._workloads(self._member.live.name, api_version, kind)
        if informer is None or not informer.synced:
            return None
        return informer.get(namespace, name)
