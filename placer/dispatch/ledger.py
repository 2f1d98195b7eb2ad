"""The in-flight ledger: placements dispatched but not yet visible as pods on their cluster.

Why: capacity is gathered from nodes and the pods bound to them. Between the moment placer
applies a workload and the moment its framework has created the pods and the scheduler has
bound them, the cluster *looks* as free as before; a second decision in that window would
place onto the same GPUs (Karmada #1385: 20 Deployments submitted at once, 4 landed where 2
fit). Every decision therefore charges the fleet with the in-flight placements first
(:meth:`Ledger.charge`, through :func:`placer.solver.charge`).

Where the ledger lives — on the member cluster itself
------------------------------------------------------
One small ConfigMap per in-flight placement, in namespace :data:`LEDGER_NAMESPACE`
(``placer-system``) of the cluster the workload was placed on, labelled
``placer.dev/in-flight=true``; ``data.entry`` holds the placement as JSON: workload, decision
id, creation and expiry time, and every pod with its node, requests and GPU devices.

* It is shared by every placer process — two users submitting from two laptops, a CI job and
  the controller — with no extra infrastructure, and read with **one list call per cluster**.
* It is written **before** the workload is applied (reserve, then apply) and deleted again if
  the apply fails, so no reader ever sees a placed workload without its reservation.
* It needs only namespaced rights in ``placer-system`` (create/list/delete ConfigMaps), not
  cluster-wide ones; a process that cannot write it still dispatches and says so.
* A local state file was rejected: it would protect one user's back-to-back commands only,
  not the platform team's many submitters, and would outlive clusters it no longer matches.

The controller keeps the same entries in process (:class:`Ledger`) and syncs with the members.

When an entry stops counting
----------------------------
*Observed*, pod by pod (:func:`observe`): a pod of the workload counts as observed once it
exists on the member **and** is bound to a node (``spec.nodeName``) or has finished — from
then on capacity gathering sees it (a bound pod's requests are in its node's ``requested``;
a finished one no longer uses anything). Pods belong to the workload when their owner chain
reaches the root object (spec section 7.2: any owner reference with the root's uid, else the
controller reference followed up to 6 levels); a workload that is a bare Pod is its own pod.
Each observed pod retires one planned pod of the entry — the one on the same node with the
same requests if there is one, else one with the same requests, else one on the same node,
else any — so the charge shrinks exactly as the pods appear and nothing is counted twice; an
entry with nothing left is deleted. Unbound
(Pending) pods retire nothing: the gathered capacity does not include them yet.

*Expired*: an entry older than its TTL (:data:`DEFAULT_TTL`, 10 minutes) no longer counts and
is deleted by the next reader — pods that never appeared after that long (no framework
controller on the member, a quota, a crash between reserve and apply) must not block the
capacity forever. An entry whose workload no longer exists on the member (deleted, or its
apply failed and the rollback was interrupted) is dropped once it is older than
:data:`APPLY_GRACE` (the time an apply may take after its reservation).

Known limit: two processes that gather at the same instant and both choose the same free
GPUs before either has written its reservation can still collide; the window is the time
between gathering and reserving (milliseconds to a second), not the minutes until pods appear.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from placer.errors import KubeError, NotFoundError
from placer.inventory.owners import OwnerWalker
from placer.kube import KubeClient
from placer.model import Fleet, Placement, PodAssignment, WorkloadRef
from placer.podspec import pod_demand
from placer.solver import charge as charge_fleet

__all__ = [
    "APPLY_GRACE",
    "DEFAULT_TTL",
    "LABEL_IN_FLIGHT",
    "LEDGER_NAMESPACE",
    "InFlight",
    "Ledger",
    "charge_known",
    "delete_entry",
    "entry_from_configmap",
    "entry_name",
    "entry_to_configmap",
    "observe",
    "read_entries",
    "sync_cluster",
    "write_entry",
]

log = logging.getLogger(__name__)

LEDGER_NAMESPACE = "placer-system"
LABEL_IN_FLIGHT = "placer.dev/in-flight"
#: seconds an entry counts at most.
DEFAULT_TTL = 600.0
#: seconds an entry may exist before its workload does (reserve, then apply).
APPLY_GRACE = 60.0


def _ts(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_ts(text: object) -> float | None:
    if not isinstance(text, str):
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    return None


@dataclass(frozen=True)
class InFlight:
    """One placement in flight: charged to its cluster's nodes until observed or expired."""

    placement: Placement
    decision: str
    #: epoch seconds.
    created: float
    expires: float

    @property
    def cluster(self) -> str:
        return self.placement.cluster

    @property
    def workload(self) -> WorkloadRef:
        return self.placement.workload

    def expired(self, now: float) -> bool:
        return now >= self.expires

    @classmethod
    def new(
        cls,
        placement: Placement,
        decision: str,
        *,
        now: float | None = None,
        ttl: float = DEFAULT_TTL,
    ) -> InFlight:
        created = time.time() if now is None else now
        return cls(placement, decision, created, created + ttl)


def entry_name(ref: WorkloadRef) -> str:
    """The ConfigMap name of ``ref``'s entry (one per workload and cluster)."""
    key = f"{ref.api_version}/{ref.kind}/{ref.namespace}/{ref.name}"
    return "inflight-" + hashlib.sha256(key.encode()).hexdigest()[:24]


def entry_to_configmap(entry: InFlight) -> dict[str, Any]:
    """The ConfigMap that stores ``entry`` on its member cluster."""
    p = entry.placement
    ref = p.workload
    pods = [
        [pod.component, pod.instance, pod.index, pod.node, dict(pod.requests), list(pod.devices)]
        for pod in p.pods
    ]
    data = {
        "workload": {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "namespace": ref.namespace,
            "name": ref.name,
        },
        "cluster": p.cluster,
        "decision": entry.decision,
        "created": _ts(entry.created),
        "expires": _ts(entry.expires),
        "requests": dict(p.requests),
        "pods": pods,
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": entry_name(ref),
            "namespace": LEDGER_NAMESPACE,
            "labels": {LABEL_IN_FLIGHT: "true"},
            "annotations": {"placer.dev/workload": str(ref)},
        },
        "data": {"entry": json.dumps(data, separators=(",", ":"), sort_keys=True)},
    }


def entry_from_configmap(obj: Mapping[str, Any]) -> InFlight | None:
    """The entry stored in a ledger ConfigMap, or ``None`` when it is unreadable."""
    try:
        data = json.loads(str((obj.get("data") or {}).get("entry", "")))
        w = data["workload"]
        ref = WorkloadRef(str(w["apiVersion"]), str(w["kind"]), str(w["namespace"]), str(w["name"]))
        pods = tuple(
            PodAssignment(
                component=str(c),
                instance=str(i),
                index=int(x),
                node=str(n),
                requests={str(k): int(v) for k, v in dict(r).items()},
                devices=tuple(int(d) for d in devs),
            )
            for c, i, x, n, r, devs in data["pods"]
        )
        requests = {str(k): int(v) for k, v in dict(data.get("requests") or {}).items()}
        created = _parse_ts(data["created"])
        expires = _parse_ts(data["expires"])
        if created is None or expires is None:
            return None
        placement = Placement(ref, str(data["cluster"]), pods, requests)
        return InFlight(placement, str(data.get("decision", "")), created, expires)
    except (ValueError, KeyError, TypeError):
        return None


class Ledger:
    """The in-flight placements known to this process, by cluster and workload (thread-safe).

    ``placer submit`` fills it from the members (:func:`sync_cluster`) before deciding; the
    controller keeps one for its lifetime, adds every dispatch to it and syncs it with the
    members every cycle.
    """

    def __init__(self, entries: Iterable[InFlight] = ()) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, WorkloadRef], InFlight] = {}
        for entry in entries:
            self._entries[(entry.cluster, entry.workload)] = entry

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def add(self, entry: InFlight) -> None:
        """Record (or replace) the entry of ``entry.workload`` on ``entry.cluster``."""
        with self._lock:
            self._entries[(entry.cluster, entry.workload)] = entry

    def discard(self, cluster: str, ref: WorkloadRef) -> None:
        """Forget the entry of ``ref`` on ``cluster`` (no error when there is none)."""
        with self._lock:
            self._entries.pop((cluster, ref), None)

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
    nodes = {c.name: {n.name for n in c.nodes} for c in fleet.clusters if c.reachable}
    chargeable = []
    for placement in placements:
        known = nodes.get(placement.cluster)
        if not known:
            continue
        pods = tuple(p for p in placement.pods if p.node in known)
        if pods:
            chargeable.append(replace(placement, pods=pods))
    return charge_fleet(fleet, chargeable) if chargeable else fleet


# --------------------------------------------------------------------------------------------
# observation (pure)


def observe(entry: InFlight, observed: Sequence[tuple[str, Mapping[str, int]]]) -> InFlight:
    """``entry`` with one planned pod retired per observed pod ``(node, requests)``.

    Matching order per observed pod: same node and requests, same requests, same node, any
    (see the module docstring). The placement's total ``requests`` shrink with the pods.
    """
    left = list(entry.placement.pods)
    retired: list[PodAssignment] = []
    pending = list(observed)
    for match in (_same_node_and_requests, _same_requests, _same_node, _any):
        still = []
        for node, requests in pending:
            index = next((i for i, pod in enumerate(left) if match(pod, node, requests)), None)
            if index is None:
                still.append((node, requests))
            else:
                retired.append(left.pop(index))
        pending = still
        if not pending or not left:
            break
    if not retired:
        return entry
    total = dict(entry.placement.requests)
    for pod in retired:
        for name, amount in pod.requests.items():
            total[name] = max(0, total.get(name, 0) - amount)
    placement = replace(entry.placement, pods=tuple(left), requests=total)
    return replace(entry, placement=placement)


def _same_node_and_requests(pod: PodAssignment, node: str, requests: Mapping[str, int]) -> bool:
    return pod.node == node and dict(pod.requests) == dict(requests)


def _same_requests(pod: PodAssignment, node: str, requests: Mapping[str, int]) -> bool:
    return dict(pod.requests) == dict(requests)


def _same_node(pod: PodAssignment, node: str, requests: Mapping[str, int]) -> bool:
    return pod.node == node


def _any(pod: PodAssignment, node: str, requests: Mapping[str, int]) -> bool:
    return True


# --------------------------------------------------------------------------------------------
# member-side storage


def write_entry(client: KubeClient, entry: InFlight, *, field_manager: str = "placer") -> None:
    """Store ``entry`` on ``client``'s cluster (server-side apply: idempotent).

    Creates :data:`LEDGER_NAMESPACE` when it is missing. Raises :class:`KubeError` when the
    cluster refuses.
    """
    body = entry_to_configmap(entry)
    try:
        client.apply(body, field_manager=field_manager, force=True)
    except NotFoundError:
        client.ensure_namespace(LEDGER_NAMESPACE, labels={"placer.dev/placed-by": "placer"})
        client.apply(body, field_manager=field_manager, force=True)


def delete_entry(client: KubeClient, ref: WorkloadRef) -> None:
    """Remove the entry of ``ref`` from ``client``'s cluster (gone already is fine)."""
    client.delete("v1", "ConfigMap", entry_name(ref), namespace=LEDGER_NAMESPACE, missing_ok=True)


def read_entries(client: KubeClient) -> list[InFlight]:
    """Every readable entry stored on ``client``'s cluster (one list call)."""
    listed = client.list(
        "v1", "ConfigMap", namespace=LEDGER_NAMESPACE, label_selector=f"{LABEL_IN_FLIGHT}=true"
    )
    entries = []
    for item in listed.items:
        entry = entry_from_configmap(item)
        if entry is None:
            name = (item.get("metadata") or {}).get("name")
            log.warning("cluster %s: skipping unreadable in-flight entry %s", client.name, name)
            continue
        entries.append(entry)
    return entries


def sync_cluster(
    client: KubeClient, *, now: float | None = None, delete: bool = True
) -> list[InFlight]:
    """The entries of ``client``'s cluster that still count, reconciled with what it shows.

    One list of entries, then per namespace holding entries one list of the workload kinds'
    roots and one of pods (skipped when nothing is in flight). Expired entries, entries whose
    workload is gone after :data:`APPLY_GRACE` and fully observed entries are deleted from
    the cluster (``delete=False`` leaves them, e.g. for dry runs).
    """
    when = time.time() if now is None else now
    entries = read_entries(client)
    keep: list[InFlight] = []
    done: list[InFlight] = []
    live: list[InFlight] = []
    for entry in entries:
        (done if entry.expired(when) else live).append(entry)
    roots: dict[tuple[str, str, str], dict[str, Mapping[str, Any]]] = {}
    pods_by_ns: dict[str, list[Mapping[str, Any]]] = {}
    owners = OwnerWalker(client)
    for entry in live:
        ref = entry.workload
        key = (ref.api_version, ref.kind, ref.namespace)
        if key not in roots:
            roots[key] = _list_by_name(client, *key)
        root = roots[key].get(ref.name)
        if root is None:
            if when - entry.created > APPLY_GRACE:
                done.append(entry)
            else:
                keep.append(entry)
            continue
        if ref.namespace not in pods_by_ns:
            pods_by_ns[ref.namespace] = _list_pods(client, ref.namespace)
        uid = str((root.get("metadata") or {}).get("uid", ""))
        seen = [
            (str(pod["spec"].get("nodeName", "")), pod_demand(pod["spec"]).requests)
            for pod in pods_by_ns[ref.namespace]
            if _counted(pod) and (_uid(pod) == uid or owners.owned_by(pod, uid))
        ]
        updated = observe(entry, seen) if seen else entry
        (keep if updated.placement.pods else done).append(updated)
    if delete:
        for entry in done:
            try:
                delete_entry(client, entry.workload)
            except KubeError as err:  # someone else's cleanup, or no right to delete: harmless
                log.info("cluster %s: in-flight entry not deleted: %s", client.name, err)
    return keep


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


def _counted(pod: Mapping[str, Any]) -> bool:
    """A pod gathering already accounts for: bound to a node, or finished."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return False
    phase = (pod.get("status") or {}).get("phase")
    return bool(spec.get("nodeName")) or phase in ("Succeeded", "Failed")


def _list_by_name(
    client: KubeClient, api_version: str, kind: str, namespace: str
) -> dict[str, Mapping[str, Any]]:
    try:
        items = client.list(api_version, kind, namespace=namespace).items
    except NotFoundError:  # the kind is not served (any more): nothing of it exists
        return {}
    return {str((o.get("metadata") or {}).get("name")): o for o in items}


def _list_pods(client: KubeClient, namespace: str) -> list[Mapping[str, Any]]:
    return list(client.list("v1", "Pod", namespace=namespace).items)
