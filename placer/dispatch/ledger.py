"""The in-flight ledger: placements dispatched but not yet visible as pods on their cluster.

Why: capacity is gathered from nodes and the pods bound to them. Between the moment placer
applies a workload and the moment its framework has created the pods and the scheduler has
bound them, the cluster *looks* as free as before; a second decision in that window would
place onto the same GPUs (Karmada #1385: 20 Deployments submitted at once, 4 landed where 2
fit). Every decision therefore charges the fleet with the in-flight placements first
(:meth:`Ledger.charge`, through :func:`placer.solver.charge`).

Where the ledger lives — on the member cluster itself
------------------------------------------------------
ConfigMaps in namespace :data:`LEDGER_NAMESPACE` (``placer-system``) of the cluster the
workloads were placed on, labelled ``placer.dev/in-flight=true``; each data key
(:func:`entry_name` of the workload) holds one placement as JSON: workload, decision id,
creation and expiry time, and every pod with its node, requests and GPU devices. A dispatch
writes the entries of all its workloads for one cluster in one ConfigMap (chunks of at most
:data:`ENTRIES_PER_CONFIGMAP`; :func:`write_entries`), so reserving costs one request per
cluster, not one per workload; entries leave by key (:func:`remove_entries`) and a ConfigMap
goes when its last entry does.

* It is shared by every placer process — two users submitting from two laptops, a CI job and
  the controller — with no extra infrastructure, and read with **one list call per cluster**.
* It is written **before** the workloads are applied (reserve, then apply) and the entry is
  removed again if an apply fails, so no reader ever sees a placed workload without its
  reservation.
* It is read, on each member, **before** that member's nodes and pods are listed (in the
  gathering thread: :func:`placer.dispatch.submit.gather_charged`, the controller's gather).
  An entry is retired when its pods are seen bound; read after the capacity, pods bound
  between the two reads would be in neither and a decision would place onto their GPUs (two
  concurrent submissions put 51 GPUs on a 48-GPU cluster that way).
* It needs only namespaced rights in ``placer-system`` (get/list/create/update/patch/delete
  ConfigMaps, the claims of :mod:`placer.dispatch.claims` included), not cluster-wide ones; a
  process that cannot write it still dispatches and says so.
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
else any — so the charge shrinks exactly as the pods appear and nothing is counted twice. An
entry with nothing left charges nothing, and stays stored until it is :data:`OBSERVED_KEEP`
old: the read-back of a concurrent decision that gathered before those pods were bound (see
:mod:`placer.dispatch.dispatcher`) must still find it — deleted at once by some third reader,
it would be in neither the capacity that decision gathered nor the ledger it reads back.
Unbound (Pending) pods retire nothing: the gathered capacity does not include them yet.

*Not there*: an entry whose workload is not on its member — never applied (its decider died
or stepped back between reserving and applying, or its rollback was cut short), deleted
since, or placed there by another decision (another record) — stops counting, and is deleted,
at the next look, **unless its decider may still be about to apply it**. A dispatch takes the
workload's claim (:mod:`placer.dispatch.claims`) before it reserves and releases it only after
the apply, so an entry written under a claim (``claimed``) may still be applied exactly while
its decision holds a live claim for the workload on that member. A reader therefore reads the
entries, then the claims, then the workloads: a claim released before it was read means the
apply came earlier still and the workload read afterwards would show it. So an entry of a live
decider in the middle of its apply is kept, and one of a decider that died is retired once its
claim has expired (:data:`~placer.dispatch.claims.CLAIM_TTL`, 30 s, after its last renewal) —
or at once by a controller elected through the same Lease as the one that wrote it
(:class:`~placer.dispatch.claims.Succession`: leader election stops a predecessor before its
successor starts), which is what lets a restarted controller place at start-up instead of
waiting on its predecessor's reservations. An entry written without a claim (a member that
refused claims, an older placer) keeps the grace rule: dropped once older than
:data:`APPLY_GRACE`.

*Expired*: an entry older than its TTL (:data:`DEFAULT_TTL`, 10 minutes) no longer counts and
is deleted by the next reader — pods that never appeared after that long (no framework
controller on the member, a quota) must not block the capacity forever.

Known limits: two processes that gather at the same instant and both choose the same free
GPUs before either has written its reservation decide without seeing each other; the
dispatcher's read-back after reserving settles that. A decision dispatched more than
:data:`OBSERVED_KEEP` after it read the ledger could miss a placement observed and deleted
meanwhile (``placer submit`` and the controller dispatch within seconds of reading).
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from placer.dispatch.claims import Claim, Succession, claim_key, live_claims
from placer.dispatch.record import PlacementRecord
from placer.dispatch.storage import NAMESPACE, create_configmap, micro_time, parse_micro_time
from placer.errors import ConflictError, KubeError, NotFoundError
from placer.kube import KubeClient, OwnerWalker
from placer.model import Fleet, Placement, PodAssignment, WorkloadRef
from placer.podspec import pod_demand
from placer.solver import charge as charge_fleet

__all__ = [
    "APPLY_GRACE",
    "DEFAULT_TTL",
    "LABEL_IN_FLIGHT",
    "LEDGER_NAMESPACE",
    "OBSERVED_KEEP",
    "InFlight",
    "Ledger",
    "charge_known",
    "decode_entry",
    "delete_entry",
    "encode_entry",
    "entries_configmap",
    "entries_from_configmap",
    "entry_from_configmap",
    "entry_name",
    "entry_to_configmap",
    "observe",
    "read_entries",
    "remove_entries",
    "sync_cluster",
    "write_entries",
    "write_entry",
]

log = logging.getLogger(__name__)

LEDGER_NAMESPACE = NAMESPACE
LABEL_IN_FLIGHT = "placer.dev/in-flight"
#: seconds an entry counts at most.
DEFAULT_TTL = 600.0
#: seconds an entry may exist before its workload does (reserve, then apply), when it was not
#: written under a claim (a member refusing claims, or an older placer).
APPLY_GRACE = 120.0
#: seconds a fully observed entry stays stored (charging nothing), so that the read-back of a
#: concurrent decision made before its pods were bound still finds it.
OBSERVED_KEEP = 120.0
#: entries per ledger ConfigMap, and bytes of entry data (ConfigMaps hold at most 1 MiB).
ENTRIES_PER_CONFIGMAP = 250
CONFIGMAP_BYTES = 512 * 1024


@dataclass(frozen=True)
class InFlight:
    """One placement in flight: charged to its cluster's nodes until observed or expired."""

    placement: Placement
    decision: str
    #: epoch seconds.
    created: float
    expires: float
    #: the ledger ConfigMap holding it on its member (empty: not stored, or not known).
    store: str = field(default="", compare=False)
    #: written while its decider held the workload's claim on this member
    #: (:mod:`placer.dispatch.claims`): it is still to be applied only while that claim lives.
    claimed: bool = False

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
        claimed: bool = False,
    ) -> InFlight:
        created = time.time() if now is None else now
        return cls(placement, decision, created, created + ttl, claimed=claimed)


def entry_name(ref: WorkloadRef) -> str:
    """The key of ``ref``'s entry: its data key in a ledger ConfigMap, and the name of the
    ConfigMap :func:`write_entry` stores it in alone (one entry per workload and cluster)."""
    key = f"{ref.api_version}/{ref.kind}/{ref.namespace}/{ref.name}"
    return "inflight-" + hashlib.sha256(key.encode()).hexdigest()[:24]


def encode_entry(entry: InFlight) -> str:
    """The JSON text of an entry (as stored in a ConfigMap's data)."""
    p = entry.placement
    ref = p.workload
    pods = [
        [pod.component, pod.instance, pod.index, pod.node, dict(pod.requests), list(pod.devices)]
        for pod in p.pods
    ]
    data: dict[str, Any] = {
        "workload": {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "namespace": ref.namespace,
            "name": ref.name,
        },
        "cluster": p.cluster,
        "decision": entry.decision,
        "created": micro_time(entry.created),
        "expires": micro_time(entry.expires),
        "requests": dict(p.requests),
        "pods": pods,
    }
    if entry.claimed:
        data["claimed"] = True
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


def decode_entry(text: str, *, store: str = "") -> InFlight | None:
    """The entry of :func:`encode_entry`'s text, or ``None`` when it is unreadable."""
    try:
        data = json.loads(text)
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
        created = parse_micro_time(data["created"])
        expires = parse_micro_time(data["expires"])
        if created is None or expires is None:
            return None
        placement = Placement(ref, str(data["cluster"]), pods, requests)
        decision = str(data.get("decision", ""))
        claimed = data.get("claimed") is True
        return InFlight(placement, decision, created, expires, store, claimed)
    except (ValueError, KeyError, TypeError):
        return None


def entries_configmap(name: str, entries: Sequence[InFlight]) -> dict[str, Any]:
    """A ledger ConfigMap named ``name`` holding ``entries`` (data key: :func:`entry_name`)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": LEDGER_NAMESPACE,
            "labels": {LABEL_IN_FLIGHT: "true"},
        },
        "data": {entry_name(e.workload): encode_entry(e) for e in entries},
    }


def entry_to_configmap(entry: InFlight) -> dict[str, Any]:
    """The ConfigMap that stores ``entry`` alone (named :func:`entry_name`)."""
    return entries_configmap(entry_name(entry.workload), [entry])


def entries_from_configmap(obj: Mapping[str, Any]) -> tuple[list[InFlight], list[str]]:
    """The readable entries of a ledger ConfigMap, and the data keys that are not."""
    store = str((obj.get("metadata") or {}).get("name", ""))
    entries: list[InFlight] = []
    bad: list[str] = []
    for key, text in (obj.get("data") or {}).items():
        entry = decode_entry(str(text), store=store)
        if entry is None:
            bad.append(str(key))
        else:
            entries.append(entry)
    return entries, bad


def entry_from_configmap(obj: Mapping[str, Any]) -> InFlight | None:
    """The entry of a single-entry ledger ConfigMap, or ``None`` when it is unreadable."""
    entries, bad = entries_from_configmap(obj)
    return entries[0] if len(entries) == 1 and not bad else None


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


def write_entry(client: KubeClient, entry: InFlight, *, field_manager: str = "placer") -> InFlight:
    """Store ``entry`` alone in its own ConfigMap (named :func:`entry_name`); idempotent.

    Creates :data:`LEDGER_NAMESPACE` when it is missing. Returns the entry with its ``store``.
    Raises :class:`KubeError` when the cluster refuses.
    """
    body = entry_to_configmap(entry)
    try:
        create_configmap(client, body, field_manager)
    except ConflictError:  # written before (a retry): this entry replaces it
        client.apply(body, field_manager=field_manager, force=True)
    return replace(entry, store=body["metadata"]["name"])


def write_entries(
    client: KubeClient,
    entries: Sequence[InFlight],
    *,
    name: str,
    field_manager: str = "placer",
) -> list[InFlight]:
    """Store ``entries`` in as few ConfigMaps as fit (at most :data:`ENTRIES_PER_CONFIGMAP`
    entries and :data:`CONFIGMAP_BYTES` of data each) — one request for a whole dispatch to a
    cluster instead of one per workload. Each ConfigMap is new: ``NAME-<random>``, so that
    concurrent writers (parts of one decision dispatched in parallel) never share one.

    Returns the entries with their ``store``. Raises :class:`KubeError` when the cluster
    refuses (entries of chunks written before the failure stay; they are dropped by readers
    once :data:`APPLY_GRACE` has passed without their workload).
    """
    stored: list[InFlight] = []
    chunk: list[InFlight] = []
    size = 0

    def flush() -> None:
        nonlocal chunk, size
        if not chunk:
            return
        for attempt in range(3):
            store = f"{name}-{secrets.token_hex(4)}"
            try:
                create_configmap(client, entries_configmap(store, chunk), field_manager)
                break
            except ConflictError:
                if attempt == 2:
                    raise
        stored.extend(replace(e, store=store) for e in chunk)
        chunk, size = [], 0

    for entry in entries:
        text = len(encode_entry(entry))
        if chunk and (len(chunk) >= ENTRIES_PER_CONFIGMAP or size + text > CONFIGMAP_BYTES):
            flush()
        chunk.append(entry)
        size += text
    flush()
    return stored


def remove_entries(client: KubeClient, store: str, refs: Iterable[WorkloadRef]) -> None:
    """Take the entries of ``refs`` out of ledger ConfigMap ``store``; delete it once empty.

    Gone already is fine (another reader cleaned up).
    """
    keys = {entry_name(ref): None for ref in refs}
    if not keys:
        return
    try:
        result = client.patch("v1", "ConfigMap", store, {"data": keys}, namespace=LEDGER_NAMESPACE)
    except NotFoundError:
        return
    if not (result or {}).get("data"):
        client.delete("v1", "ConfigMap", store, namespace=LEDGER_NAMESPACE, missing_ok=True)


def delete_entry(client: KubeClient, ref: WorkloadRef) -> None:
    """Remove the entry of ``ref`` from ``client``'s cluster, wherever it is stored (one list
    call to find it); gone already is fine."""
    key = entry_name(ref)
    listed = client.list(
        "v1", "ConfigMap", namespace=LEDGER_NAMESPACE, label_selector=f"{LABEL_IN_FLIGHT}=true"
    )
    for item in listed.items:
        if key in (item.get("data") or {}):
            remove_entries(client, str(item["metadata"]["name"]), [ref])


def read_entries(client: KubeClient) -> list[InFlight]:
    """Every readable entry stored on ``client``'s cluster (one list call)."""
    listed = client.list(
        "v1", "ConfigMap", namespace=LEDGER_NAMESPACE, label_selector=f"{LABEL_IN_FLIGHT}=true"
    )
    entries: list[InFlight] = []
    for item in listed.items:
        found, bad = entries_from_configmap(item)
        for key in bad:
            name = (item.get("metadata") or {}).get("name")
            log.warning(
                "cluster %s: skipping unreadable in-flight entry %s/%s", client.name, name, key
            )
        entries += found
    return entries


def sync_cluster(
    client: KubeClient,
    *,
    now: float | None = None,
    delete: bool = True,
    succession: Succession | None = None,
) -> list[InFlight]:
    """The entries of ``client``'s cluster, reconciled with what it shows (module docstring,
    "When an entry stops counting"): the ones that still count, and fully observed ones kept
    for :data:`OBSERVED_KEEP` (they charge nothing; they are *known*, for the read-back).

    One list of entries; one of claims when an entry was written under a claim; then per
    namespace holding entries one list of the workload kinds' roots and one of pods (skipped
    when nothing is in flight) — in this order, so that a claim released after its apply is
    never missed together with the object it was released for. Retired entries are deleted
    from the cluster (``delete=False`` leaves them, e.g. for dry runs). ``succession``: the
    caller is an elected controller; claims of its predecessors protect nothing.
    """
    when = time.time() if now is None else now
    entries = read_entries(client)
    keep: list[InFlight] = []
    done: list[InFlight] = []
    live: list[InFlight] = []
    for entry in entries:
        (done if entry.expired(when) else live).append(entry)
    claims: Mapping[str, Claim] | None = None
    if any(entry.claimed for entry in live):
        try:
            claims = live_claims(client, now=when)
        except KubeError as err:  # the grace rule decides for them
            log.info("cluster %s: claims not read: %s", client.name, err)
    roots: dict[tuple[str, str, str], dict[str, Mapping[str, Any]]] = {}
    pods_by_ns: dict[str, list[Mapping[str, Any]]] = {}
    owners = OwnerWalker(client)
    for entry in live:
        ref = entry.workload
        key = (ref.api_version, ref.kind, ref.namespace)
        if key not in roots:
            roots[key] = _list_by_name(client, *key)
        root = roots[key].get(ref.name)
        record = PlacementRecord.from_object(root) if root is not None else None
        if record is None or record.decision != entry.decision:
            # not applied (yet), deleted, or superseded by another decision's placement
            if _may_still_apply(entry, claims, succession, when):
                keep.append(entry)
            else:
                done.append(entry)
            continue
        assert root is not None
        if ref.namespace not in pods_by_ns:
            pods_by_ns[ref.namespace] = _list_pods(client, ref.namespace)
        uid = str((root.get("metadata") or {}).get("uid", ""))
        seen = [
            (str(pod["spec"].get("nodeName", "")), pod_demand(pod["spec"], strict=False).requests)
            for pod in pods_by_ns[ref.namespace]
            if _counted(pod) and (_uid(pod) == uid or owners.owned_by(pod, uid))
        ]
        updated = observe(entry, seen) if seen else entry
        if updated.placement.pods or when - entry.created < OBSERVED_KEEP:
            keep.append(updated)
        else:
            done.append(updated)
    if delete:
        by_store: dict[str, list[WorkloadRef]] = {}
        for entry in done:
            by_store.setdefault(entry.store, []).append(entry.workload)
        for store, refs in by_store.items():
            try:
                remove_entries(client, store, refs)
            except KubeError as err:  # someone else's cleanup, or no right to delete: harmless
                log.info("cluster %s: in-flight entries not deleted: %s", client.name, err)
    return keep


def _may_still_apply(
    entry: InFlight,
    claims: Mapping[str, Claim] | None,
    succession: Succession | None,
    now: float,
) -> bool:
    """Whether the decider of an entry whose workload is not (or no longer) there may still
    apply it: it holds the workload's claim for that decision (entries written under a claim,
    claims read); otherwise, the entry is younger than :data:`APPLY_GRACE`."""
    if entry.claimed and claims is not None:
        claim = claims.get(claim_key(entry.workload))
        if claim is None or claim.decision != entry.decision:
            return False
        return succession is None or not succession.succeeds(claim)
    return now - entry.created <= APPLY_GRACE


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
