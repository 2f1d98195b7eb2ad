"""Virtual fleet realism: workloads applied to a virtual cluster get pods, nodes and a status.

A loopback API server stores objects and runs no controller. For ``placer fleet up``, ``make
demo`` and end-to-end tests to behave like a real fleet — capacity really decreases after a
submission, ``placer get`` shows ``Running``, ``placer describe`` shows pods on nodes — each
virtual cluster gets a reactor (:class:`Realism`) that plays the framework controller,
kube-scheduler and kubelet for every workload kind of the catalog:

* **registration**: every catalog kind that is not built in is served (a CRD per root kind,
  :func:`register_catalog_kinds`), so a workload of any catalog type can be applied, and so
  are the kinds the gang schedulers placer hands workloads to define
  (:func:`register_scheduler_kinds`: Volcano's and scheduler-plugins' PodGroups, KAI's
  ``run.ai/v1alpha1`` Karta, the queues: Volcano's and KAI's Queues — ``default`` and
  ``default-queue`` there — and Kueue's LocalQueue), as on a member where they are installed;
* **pods**: when a workload is created or resumed, its pods are materialised from its
  definition (:func:`placer.definitions.decompose`): every pod-bearing component instance ×
  replicas, from the instance's pod template, with an owner reference to the workload
  (``controller: true``, so owner scoping and garbage collection work), the template's labels
  plus the labels the framework would set (:func:`placer.definitions.expected_pod_labels`);
* **binding**: each pod is bound to a node that fits it (requests within the node's free
  capacity — GPUs per device, as gathering counts them: a whole GPU needs a device wholly
  free, a share of one device (``placer.dev/gpu-milli``, a Run:ai / KAI fraction) one device
  with that much left —, a free pod slot, node selector, required affinity, taints, cordon,
  readiness, as :func:`placer.podspec.node_mismatch` checks) — the node of the placement record's
  pod-to-node plan (``placer.dev/pod-nodes``) when it fits, else the first that fits in name
  order; a pod that fits nowhere stays ``Pending`` (``Unschedulable``), as with a real scheduler;
  bound pods are ``Running`` and Ready. The pods' scheduler is played as it binds
  (:mod:`placer.virtual.scheduling`): kube-scheduler one pod at a time, a gang scheduler
  (``schedulerName`` kai-scheduler, volcano, coscheduling's) a pod group whole or not at all,
  honouring the PodGroups' ``minMember`` and KAI's queue label. With an arrival ``window``
  (seconds), the pods of workloads created within it are bound together, interleaved as
  their controllers would create them side by side — where two gangs can deadlock under
  kube-scheduler. Pods left waiting are tried again when room appears (a pod deleted, a node
  changed), first in line, as a scheduler retries its unschedulable pods: a gang waiting whole
  starts when the one holding the room goes; a waiting pod keeps the time it began waiting;
* **status**: the workload's status follows its pods, as its controller's would: once every
  pod is Running and Ready it is set so that its definition's status mapping reports
  ``Running`` (checked with :func:`placer.definitions.phases_of` before it is written; kinds whose
  running status cannot be produced keep no status); while some pod waits (unschedulable, a
  gang half bound, KAI without a queue label, an arrival window) a Job reports its pods active
  and only the bound ones ``ready``, other kinds what their controllers report then, with the
  counts they keep (a Deployment's ready replicas, a RayCluster's ready workers), as their
  definition maps to ``Initializing`` — never ``Running`` (:func:`waiting_status`);
* **deletion**: deleting the workload deletes its pods (owner-reference garbage collection of
  the store); suspending it (its definition's status reports ``Suspended``/``Suspending``)
  deletes its pods too, and resuming materialises them again;
* **changes**: a change of the workload's spec (a new ``metadata.generation``: ``placer
  submit`` of a changed manifest) replaces its pods with the new spec's, as a framework rolls
  its pods (all at once here).

Not modelled: intermediate objects (a JobSet's Jobs, a Deployment's ReplicaSet: pods are owned
by the workload directly), completion, and DRA allocation (pods naming ResourceClaimTemplates
get no ResourceClaim: the devices they would hold stay free in the ResourceSlices' count).
"""

from __future__ import annotations

import copy
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from placer.definitions import (
    Catalog,
    Decomposition,
    Definition,
    decompose,
    expected_pod_labels,
    phases_of,
)
from placer.errors import PlacerError
from placer.fleet.capacity import PodTally, cluster_from_api
from placer.model import GPU_SHARE, Cluster, Node, PodDemand
from placer.objects import (
    annotations_of,
    generation_of,
    labels_of,
    meta,
    name_key,
    name_of,
    namespace_of,
    owner_references_of,
    uid_of,
)
from placer.podspec import node_mismatch
from placer.quantity import GPU, PODS
from placer.simulate.capacity import node_free_devices
from placer.testing import ApiServer, StatusError, Store, WriteEvent
from placer.timestamps import rfc3339
from placer.virtual.crds import crd_facts
from placer.virtual.scheduling import Ask, assign
from placer.virtual.seeding import running_pod_status

__all__ = [
    "Realism",
    "catalog_kinds",
    "realism_setup",
    "register_catalog_kinds",
    "register_scheduler_kinds",
    "running_status",
    "waiting_status",
    "workload_status",
]

log = logging.getLogger(__name__)

_PLAN_ANNOTATION = "placer.dev/pod-nodes"
_VOLCANO_GROUP = "scheduling.k8s.io/group-name"
_COSCHEDULING_GROUP = "scheduling.x-k8s.io/pod-group"
_KAI_QUEUE = "kai.scheduler/queue"
_NAME = re.compile(r"[^a-z0-9-]+")
_SUSPENDED = ("Suspended", "Suspending")
#: seconds between a pod going (or a node changing) and the waiting pods' next try, without
#: an arrival window (the other pods of a deleted workload go meanwhile).
_RETRY_DELAY = 0.05


def catalog_kinds(catalog: Catalog) -> list[tuple[str, str, str]]:
    """``(group, version, kind)`` of every root kind the catalog covers, sorted."""
    kinds = {
        (d.target.group, d.target.version, d.target.kind) for d in catalog.definitions if d.target
    }
    return sorted(kinds)


def register_catalog_kinds(store: Store, catalog: Catalog) -> int:
    """Serve every catalog root kind the store does not serve yet, as its framework's CRD
    declares it (:mod:`placer.virtual.crds`: short names, printer columns); returns how many
    were added."""
    served = {(r.group, r.version, r.kind) for r in store.resources()}
    added = 0
    for group, version, kind in catalog_kinds(catalog):
        if (group, version, kind) in served:
            continue
        if not group:  # a core kind the loopback server does not know: cannot be a CRD
            continue
        facts = crd_facts(group, kind)
        store.register_resource(
            group,
            version,
            kind,
            short_names=facts.short_names,
            categories=facts.categories,
            printer_columns=facts.printer_columns,
        )
        added += 1
    return added


def register_scheduler_kinds(store: Store) -> None:
    """Serve the kinds of the gang schedulers placer hands workloads to (not yet served), with
    the queues their installations create: Volcano's ``default`` Queue, and a KAI Queue
    ``default-queue`` (the one placer names when no queue maps)."""
    served = {(r.group, r.version, r.kind) for r in store.resources()}
    for group, version, kind, namespaced in (
        ("scheduling.volcano.sh", "v1beta1", "PodGroup", True),
        ("scheduling.volcano.sh", "v1beta1", "Queue", False),
        ("scheduling.x-k8s.io", "v1alpha1", "PodGroup", True),
        ("run.ai", "v1alpha1", "Karta", False),
        ("scheduling.run.ai", "v2", "Queue", False),
        ("kueue.x-k8s.io", "v1beta1", "LocalQueue", True),
    ):
        if (group, version, kind) not in served:
            store.register_resource(group, version, kind, namespaced=namespaced)
    queues = [
        ("scheduling.volcano.sh/v1beta1", "default", {"weight": 1, "reclaimable": True}),
        ("scheduling.run.ai/v2", "default-queue", {}),
    ]
    store.seed(
        {"apiVersion": api, "kind": "Queue", "metadata": {"name": name}, "spec": spec}
        for api, name, spec in queues
        if not store.list(f"queues.{api.split('/')[0]}")
    )


def realism_setup(
    catalog: Catalog | None = None, *, pods: bool = True, window: float = 0.0
) -> Callable[[Cluster, ApiServer], None]:
    """A :class:`placer.virtual.fleet.VirtualFleet` ``setup`` hook: register the catalog's kinds
    on every cluster and (``pods=True``) add the :class:`Realism` reactor (``window``: its
    arrival window, seconds)."""
    chosen = catalog or Catalog.builtin()

    def setup(cluster: Cluster, server: ApiServer) -> None:
        register_catalog_kinds(server.store, chosen)
        register_scheduler_kinds(server.store)
        if pods:
            server.store.add_reactor(Realism(chosen, name=cluster.name, window=window))

    return setup


class Realism:
    """The reactor of one virtual cluster (see the module docstring).

    Args:
        catalog: the definitions; workloads of other kinds are left alone.
        name: the cluster's name (for logs).
        window: seconds the pods of workloads created one after another wait to be bound
            together (0: each workload's pods are bound as it is created).
    """

    def __init__(self, catalog: Catalog, *, name: str = "", window: float = 0.0) -> None:
        self.catalog = catalog
        self.window = window
        #: pods arrived and not bound yet (window > 0), with the store they live in.
        self._arrived: list[tuple[Store, Ask]] = []
        #: pods their scheduler left waiting, by (store, pod name): tried again when room
        #: appears (a pod deleted, a node changed), as a scheduler retries unschedulable pods.
        self._waiting: dict[tuple[int, str], tuple[Store, Ask]] = {}
        #: stores whose waiting pods the next pass tries again.
        self._retry: dict[int, Store] = {}
        self._timer: threading.Timer | None = None
        self.name = name
        self._kinds = {(g, k) for g, _, k in catalog_kinds(catalog)}
        self._lock = threading.Lock()
        #: one scheduling pass at a time (each reads the free room, then binds).
        self._binding = threading.RLock()
        #: uids of workloads whose pods exist -> the generation they were made for.
        self._materialised: dict[str, object] = {}
        #: uids of those workloads -> the workload (with the status last written) and its
        #: decomposition, and (ready pods, pods) that status was written for.
        self._workloads: dict[str, tuple[Mapping[str, Any], Decomposition, tuple[int, int]]] = {}

    def __call__(self, event: WriteEvent) -> None:
        rt = event.resource
        if rt.group == "" and ((rt.kind == "Pod" and event.type == "DELETED") or rt.kind == "Node"):
            self._room_changed(event.store)
        if (rt.group, rt.kind) not in self._kinds:
            return
        obj = event.object
        uid = uid_of(obj)
        if rt.kind == "Pod" and owner_references_of(obj):
            return  # a controller's pod (ours, bound by a scheduling pass), not a bare Pod
        if event.type == "DELETED":
            with self._lock:
                self._materialised.pop(uid, None)
                self._workloads.pop(uid, None)
            return
        try:
            decomposition = decompose(obj, self.catalog)
            # from the spec alone: the status is this controller's own (it writes Suspended)
            phases = phases_of({**obj, "status": {}}, decomposition.definition)
        except PlacerError as err:
            log.info(
                "cluster %s: %s/%s not materialised: %s", self.name, rt.kind, name_of(obj), err
            )
            return
        suspended = any(p in _SUSPENDED for p in phases)
        generation = (obj.get("metadata") or {}).get("generation")
        with self._lock:
            done = uid in self._materialised
            changed = done and self._materialised[uid] != generation
            if suspended and done:
                del self._materialised[uid]
                self._workloads.pop(uid, None)
            elif not suspended and (not done or changed):
                self._materialised[uid] = generation
            else:
                return
        if suspended or changed:
            _delete_pods(event.store, obj, uid)
        if suspended:
            status = suspended_status(obj, decomposition)
            if status is not None:  # its pods are gone: what its controller would report
                _write_status(event.store, obj, status, replace=True)
        if not suspended:
            self._materialise(event.store, obj, decomposition)

    # ----------------------------------------------------------------------------------------

    def _materialise(self, store: Store, obj: Mapping[str, Any], d: Decomposition) -> None:
        namespace = namespace_of(obj) or "default"
        plan = _plan(obj)
        root_is_pod = d.ref.api_version == "v1" and d.ref.kind == "Pod"
        if root_is_pod:
            planned = plan.get(d.components[0].label, ("",)) if d.components else ("",)
            node = _bind(_nodes(store), d.components[0].pod, planned[0]) if d.components else ""
            _bind_root_pod(store, obj, node)
            return
        pods: list[dict[str, Any]] = []
        asks: list[Ask] = []
        for component in d.components:
            planned = plan.get(component.label, ())
            group, min_member, blocked = _pod_group(store, obj, d, component)
            scheduler = str((component.template.get("spec") or {}).get("schedulerName") or "")
            for index in range(component.replicas):
                pod = _pod(
                    obj,
                    d.definition,
                    namespace,
                    component.name,
                    component.instance,
                    index,
                    component.template,
                    "",
                )
                pods.append(pod)
                asks.append(
                    Ask(
                        key=name_of(pod),
                        workload=uid_of(obj),
                        demand=component.pod,
                        planned=planned[index] if index < len(planned) else "",
                        scheduler=scheduler,
                        group=group,
                        min_member=min_member,
                        blocked=blocked,
                    )
                )
        if self.window > 0:
            for pod in pods:
                pod["status"] = {"phase": "Pending"}  # arrived, not looked at yet
            if pods:
                store.seed(pods)
            self._arrive(store, asks)
        else:
            with self._binding:
                bound = assign(_nodes(store), asks, _bind)
                if pods:
                    store.seed([_bound(pod, *bound[name_of(pod)]) for pod in pods])
                self._note_waiting(store, asks, bound)
        with self._lock:  # in place of what it had (a suspension's conditions)
            self._workloads[uid_of(obj)] = (obj, d, (-1, -1))
        self._sync_status(store, uid_of(obj))

    def _sync_status(self, store: Store, uid: str) -> None:
        """Write workload ``uid``'s status from its pods, as its controller would: ``Running``
        once every pod runs and is ready, else what it reports while pods wait (a Job: its pods
        active, ``ready`` only those Running and Ready; other kinds: no running status)."""
        with self._lock:
            entry = self._workloads.get(uid)
        if entry is None:
            return
        obj, d, written = entry
        pods = [
            p
            for p in store.list("pods", namespace_of(obj) or None)
            if any(r.get("uid") == uid for r in owner_references_of(p))
        ]
        counts = (sum(_ready(p) for p in pods), sum(c.replicas for c in d.components))
        if counts == written:
            return
        status = workload_status(obj, d, *counts)
        if status is None:
            return
        _write_status(store, obj, status, replace=True)
        with self._lock:
            if uid in self._workloads:
                self._workloads[uid] = ({**obj, "status": status}, d, counts)

    def _arrive(self, store: Store, asks: Iterable[Ask]) -> None:
        """Queue pods for the next pass (which starts ``window`` seconds after the first)."""
        with self._lock:
            self._arrived += [(store, ask) for ask in asks]
            self._start_pass()

    def flush(self) -> None:
        """Bind now the pods waiting for the arrival window to end (the window cut short: for
        tests and demos that change the cluster between a dispatch and its binding)."""
        with self._lock:
            timer = self._timer
        if timer is not None:
            timer.cancel()
        self._pass()

    def _room_changed(self, store: Store) -> None:
        """A pod went or a node changed: the pods waiting on ``store`` are tried again at the
        next pass (soon: room freed by a deleted gang is seen once all its pods are gone)."""
        with self._lock:
            if not any(key[0] == id(store) for key in self._waiting):
                return
            self._retry[id(store)] = store
            self._start_pass()

    def _start_pass(self) -> None:
        if self._timer is None:  # (under self._lock)
            self._timer = threading.Timer(self.window or _RETRY_DELAY, self._pass)
            self._timer.daemon = True
            self._timer.start()

    def _pass(self) -> None:
        """Bind the pods that arrived in the window together (their scheduler's way), after
        the pods still waiting from earlier passes (they asked first)."""
        with self._lock:
            arrived, self._arrived = self._arrived, []
            retry, self._retry = self._retry, {}
            self._timer = None
        by_store: dict[int, tuple[Store, list[Ask]]] = {}
        for store in retry.values():
            by_store.setdefault(id(store), (store, []))
        for store, ask in arrived:
            by_store.setdefault(id(store), (store, []))[1].append(ask)
        with self._binding:
            for store, new in by_store.values():
                pods = {
                    name_of(p): p
                    for p in store.list("pods")
                    if not (p.get("spec") or {}).get("nodeName")
                }
                with self._lock:
                    for gone in [
                        k for k in self._waiting if k[0] == id(store) and k[1] not in pods
                    ]:
                        del self._waiting[gone]  # deleted (or bound elsewhere) meanwhile
                    waiting = [
                        ask for (key, _), (_, ask) in self._waiting.items() if key == id(store)
                    ]
                asks = [*waiting, *(a for a in new if a.key not in {w.key for w in waiting})]
                asks = [a for a in asks if a.key in pods]
                bound = assign(_nodes(store), asks, _bind)
                for name, (node, why) in bound.items():
                    pod = pods[name]
                    changed = _bound(pod, node, why)
                    if changed != pod:
                        store.put(changed)
                self._note_waiting(store, asks, bound)
                for uid in dict.fromkeys(a.workload for a in asks):
                    self._sync_status(store, uid)

    def _note_waiting(
        self, store: Store, asks: Iterable[Ask], bound: Mapping[str, tuple[str, str]]
    ) -> None:
        """Remember the pods of ``asks`` left waiting; forget the ones bound."""
        with self._lock:
            for ask in asks:
                key = (id(store), ask.key)
                if bound.get(ask.key, ("", ""))[0]:
                    self._waiting.pop(key, None)
                else:
                    self._waiting[key] = (store, ask)


# --------------------------------------------------------------------------------------------
# pods and nodes


def _pod_group(
    store: Store, obj: Mapping[str, Any], d: Decomposition, component: Any
) -> tuple[str, int, str]:
    """``(pod group, minMember, why its scheduler ignores it)`` of a component's pods, as its
    scheduler would see them (:mod:`placer.virtual.scheduling`)."""
    template = component.template
    spec = template.get("spec") or {}
    scheduler = str(spec.get("schedulerName") or "")
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    annotations = dict((template.get("metadata") or {}).get("annotations") or {})
    count = sum(c.replicas for c in d.components)
    for key, source, resource in (
        (_VOLCANO_GROUP, annotations, "podgroups.scheduling.volcano.sh"),
        (_COSCHEDULING_GROUP, labels, "podgroups.scheduling.x-k8s.io"),
    ):
        group = source.get(key)
        if group:
            try:
                found = store.get(resource, str(group), namespace_of(obj) or "default")
                minimum = int((found.get("spec") or {}).get("minMember") or count)
            except (StatusError, KeyError, ValueError, TypeError):
                minimum = count  # no PodGroup (yet): the scheduler waits for all
            return str(group), minimum, ""
    if scheduler == "kai-scheduler":
        queue = labels.get(_KAI_QUEUE) or labels_of(obj).get(_KAI_QUEUE)
        blocked = "" if queue else f"no {_KAI_QUEUE} label: KAI schedules only a queue's pods"
        for gang in d.gangs:
            if component.label in gang.members or component.name in gang.members:
                # named as KAI's pod grouper names the PodGroup of a top owner
                group = f"pg-{name_of(obj)}-{uid_of(obj)}"
                group += f"-{gang.name}" if len(d.gangs) > 1 else ""
                return group, gang.min_member, blocked
        return "", 1, blocked
    return "", 1, ""


def _bound(pod: dict[str, Any], node: str, why: str) -> dict[str, Any]:
    """``pod`` bound to ``node`` (Running), or Pending with its scheduler's ``why`` (a pod
    already waiting keeps the time it started waiting, as a condition's lastTransitionTime)."""
    now = rfc3339()
    spec = dict(pod.get("spec") or {})
    if node:
        spec["nodeName"] = node
        status = running_pod_status(spec, node=node, pod=name_of(pod), now=now)
    else:
        since = next(
            (
                c.get("lastTransitionTime")
                for c in (pod.get("status") or {}).get("conditions") or ()
                if c.get("type") == "PodScheduled" and c.get("status") == "False"
            ),
            None,
        )
        status = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": why,
                    "lastTransitionTime": since or now,
                }
            ],
        }
    return {**pod, "spec": spec, "status": status}


def _plan(obj: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    text = annotations_of(obj).get(_PLAN_ANNOTATION)
    if not isinstance(text, str):
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(data, Mapping):
        return {}
    return {str(k): tuple(str(n) for n in v) for k, v in data.items() if isinstance(v, list)}


class _Free:
    """Nodes and what is still free on them, updated as pods are bound: scalar resources, pod
    slots and each GPU device's free thousandths, as gathering counts them
    (:mod:`placer.fleet.capacity`): a whole GPU takes a device at 1000 (lowest index first), a
    share of one device (``placer.dev/gpu-milli``) the fullest device it fits on."""

    def __init__(self, nodes: Iterable[Node]) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.free: dict[str, dict[str, int]] = {}
        self.devices: dict[str, list[int]] = {}
        for node in self.nodes.values():
            free = {k: v for k, v in node.free.items() if k not in (GPU, GPU_SHARE)}
            free[PODS] = node.free_pods
            self.free[node.name] = free
            self.devices[node.name] = list(node_free_devices(node))

    def save(self) -> object:
        return copy.deepcopy((self.free, self.devices))

    def restore(self, saved: object) -> None:
        self.free, self.devices = cast(
            tuple[dict[str, dict[str, int]], dict[str, list[int]]], saved
        )

    def fits(self, name: str, pod: PodDemand) -> bool:
        node = self.nodes.get(name)
        if node is None or node_mismatch(pod, node) is not None:
            return False
        free = self.free[name]
        if free.get(PODS, 0) < 1:
            return False
        if any(
            free.get(r, 0) < amount
            for r, amount in pod.requests.items()
            if amount > 0 and r not in (GPU, GPU_SHARE)
        ):
            return False
        return _gpu_devices(self.devices[name], pod) is not None

    def take(self, name: str, pod: PodDemand) -> None:
        free = self.free[name]
        free[PODS] = free.get(PODS, 0) - 1
        for resource, amount in pod.requests.items():
            if resource not in (GPU, GPU_SHARE):
                free[resource] = free.get(resource, 0) - amount
        devices = self.devices[name]
        share = pod.requests.get(GPU_SHARE, 0)
        for i in _gpu_devices(devices, pod) or ():
            devices[i] = devices[i] - share if share > 0 else 0


def _gpu_devices(devices: list[int], pod: PodDemand) -> list[int] | None:
    """The devices ``pod``'s GPUs would take (``[]``: it asks for none; ``None``: they are
    not free): its whole GPUs the first devices at 1000, a share the fullest that fits."""
    whole = max(0, pod.requests.get(GPU, 0))
    share = max(0, pod.requests.get(GPU_SHARE, 0))
    taken: list[int] = []
    if whole:
        taken = [i for i, left in enumerate(devices) if left >= 1000][:whole]
        if len(taken) < whole:
            return None
    if share:
        fitting = [(left, i) for i, left in enumerate(devices) if left >= share and i not in taken]
        if not fitting:
            return None
        taken.append(min(fitting)[1])
    return taken


def _nodes(store: Store) -> _Free:
    tally = PodTally()
    tally.add_all(store.list("pods"))
    cluster = cluster_from_api("virtual", store.list("nodes"), tally)
    return _Free(cluster.nodes)


def _bind(free: _Free, pod: PodDemand, planned: str) -> str:
    """The node for ``pod``: the planned one if it fits, else the first that fits, else ``""``."""
    candidates = ([planned] if planned else []) + sorted(free.nodes)
    for name in candidates:
        if free.fits(name, pod):
            free.take(name, pod)
            return name
    return ""


def _pod_name(*parts: str) -> str:
    text = "-".join(p for p in parts if p).lower()
    text = _NAME.sub("-", text).strip("-")
    return text[:253].rstrip("-") or "pod"


def _pod(
    root: Mapping[str, Any],
    definition: Definition,
    namespace: str,
    component: str,
    instance: str,
    index: int,
    template: Mapping[str, Any],
    node: str,
) -> dict[str, Any]:
    name = name_of(root)
    template_meta = meta(template)
    labels = {str(k): str(v) for k, v in (template_meta.get("labels") or {}).items()}
    labels.update(
        expected_pod_labels(
            definition, component, instance, workload_name=name, replica_index=index
        )
    )
    spec = dict(template.get("spec") or {})
    metadata: dict[str, Any] = {
        "name": _pod_name(name, component, instance, str(index)),
        "namespace": namespace,
        "labels": labels,
        "ownerReferences": [
            {
                "apiVersion": root.get("apiVersion"),
                "kind": root.get("kind"),
                "name": name,
                "uid": uid_of(root) or None,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if template_meta.get("annotations"):
        metadata["annotations"] = dict(template_meta["annotations"])
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    return _bound(pod, node, "0 nodes are available: no node fits the pod (virtual scheduler)")


def _bind_root_pod(store: Store, obj: Mapping[str, Any], node: str) -> None:
    pod = dict(obj)
    spec = dict(pod.get("spec") or {})
    if node:
        spec["nodeName"] = node
        now = rfc3339()
        pod["status"] = running_pod_status(spec, node=node, pod=name_of(pod), now=now)
    else:
        pod["status"] = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        }
    pod["spec"] = spec
    store.put(pod)


def _delete_pods(store: Store, obj: Mapping[str, Any], uid: str) -> None:
    namespace = namespace_of(obj) or None
    for pod in store.list("pods", namespace):
        if any(r.get("uid") == uid for r in owner_references_of(pod)):
            try:
                store.delete("pods", name_of(pod), namespace)
            except StatusError:
                pass


# --------------------------------------------------------------------------------------------
# status


def _replicas(obj: Mapping[str, Any], default: int) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and value >= 0 else default


def _candidates(obj: Mapping[str, Any], d: Decomposition) -> list[dict[str, Any]]:
    """Statuses that the kind's controller would report for a running workload."""
    group = d.definition.target.group if d.definition.target else ""
    kind = d.ref.kind
    pods = sum(c.replicas for c in d.components)
    replicas = _replicas(obj, 1)
    generation = generation_of(obj) or 1
    now = rfc3339()
    ready = [{"type": "Ready", "status": "True", "reason": "Ready", "lastTransitionTime": now}]
    known: dict[tuple[str, str], list[dict[str, Any]]] = {
        ("apps", "Deployment"): [
            {
                "observedGeneration": generation,
                "replicas": replicas,
                "readyReplicas": replicas,
                "availableReplicas": replicas,
                "updatedReplicas": replicas,
                "conditions": [
                    {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                    {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
                ],
            }
        ],
        ("apps", "StatefulSet"): [
            {
                "observedGeneration": generation,
                "replicas": replicas,
                "readyReplicas": replicas,
                "availableReplicas": replicas,
                "updatedReplicas": replicas,
                "currentReplicas": replicas,
                "currentRevision": f"{name_of(obj)}-1",
                "updateRevision": f"{name_of(obj)}-1",
            }
        ],
        ("batch", "Job"): [{"active": pods, "ready": pods, "startTime": now}],
        ("batch", "CronJob"): [{"lastScheduleTime": now}],
        ("jobset.x-k8s.io", "JobSet"): [
            {
                "replicatedJobsStatus": [
                    {
                        "name": c.instance or c.name,
                        "active": 1,
                        "ready": 1,
                        "failed": 0,
                        "succeeded": 0,
                        "suspended": 0,
                    }
                    for c in d.components
                ]
                or [{"name": "main", "active": 1, "ready": 1, "failed": 0}],
            }
        ],
        ("kubeflow.org", "PyTorchJob"): [_conditions(now, "Created", "Running")],
        ("kubeflow.org", "MPIJob"): [_conditions(now, "Created", "Running")],
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): [
            {
                "replicas": replicas,
                "readyReplicas": replicas,
                "updatedReplicas": replicas,
                "conditions": [{"type": "Available", "status": "True", "lastTransitionTime": now}],
            }
        ],
        ("ray.io", "RayCluster"): [{"state": "ready", "readyWorkerReplicas": max(0, pods - 1)}],
        ("ray.io", "RayJob"): [{"jobStatus": "RUNNING", "jobDeploymentStatus": "Running"}],
        ("ray.io", "RayService"): [
            {"conditions": [{"type": "Ready", "status": "True", "reason": "NonZeroServeEndpoints"}]}
        ],
        ("apps.nvidia.com", "NIMCache"): [{"state": "InProgress"}],
        ("apps.nvidia.com", "NIMService"): [{"state": "Ready"}],
        ("grove.io", "PodCliqueSet"): [{"availableReplicas": replicas, "replicas": replicas}],
        ("milvus.io", "Milvus"): [{"status": "Healthy"}],
        ("nvidia.com", "DynamoGraphDeployment"): [{"state": "successful"}],
        ("serving.kserve.io", "InferenceService"): [
            {"conditions": [{"type": "PredictorReady", "status": "True"}, *ready]}
        ],
        ("agents.x-k8s.io", "Sandbox"): [{"conditions": ready}],
    }
    candidates = list(known.get((group, kind), []))
    candidates.append({"conditions": ready})
    candidates.append({"phase": "Running"})
    candidates.append(_from_mapping(d.definition, now))
    return [c for c in candidates if c]


def _conditions(now: str, *types: str) -> dict[str, Any]:
    return {
        "conditions": [
            {"type": t, "status": "True", "reason": t, "lastTransitionTime": now} for t in types
        ]
    }


def _from_mapping(definition: Definition, now: str, phase: str = "Running") -> dict[str, Any]:
    """A status built from the first ``byConditions`` or ``byPhase`` of ``phase``'s mapping
    (generic fallback), where the definition reads them from a field of ``status``."""
    status = definition.root.status
    if status is None:
        return {}
    for matcher in status.mappings.get(phase, ()):
        if matcher.by_conditions and status.conditions is not None:
            field = _status_field(status.conditions.path)
            if field is None:
                continue
            items = [
                {
                    status.conditions.type_field: c.type,
                    status.conditions.status_field: c.status or "True",
                    **({status.conditions.reason_field: c.reason} if c.reason else {}),
                    "lastTransitionTime": now,
                }
                for c in matcher.by_conditions
            ]
            return {field: items}
        if matcher.by_phase is not None and status.phase_path is not None:
            field = _status_field(status.phase_path)
            if field is not None:
                return {field: matcher.by_phase}
    return {}


def _status_field(path: str) -> str | None:
    """``X`` of a jq path ``.status.X``, else ``None``."""
    parts = path.strip().lstrip(".").split(".")
    return parts[1] if len(parts) == 2 and parts[0] == "status" and parts[1] else None


def _ready(pod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` is Running and Ready (what a controller's ``ready`` counts)."""
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )


def workload_status(
    obj: Mapping[str, Any], d: Decomposition, ready: int, pods: int
) -> dict[str, Any] | None:
    """The status ``obj``'s controller reports with ``ready`` of its ``pods`` pods Running and
    Ready: :func:`running_status` when all are; otherwise a Job's counts (``active`` its pods,
    ``ready`` the ready ones), for other kinds :func:`waiting_status` (never ``Running``);
    ``None``: leave the status as it is (a kind whose running status cannot be produced)."""
    if ready >= pods:
        return running_status(obj, d)
    group = d.definition.target.group if d.definition.target else ""
    if (group, d.ref.kind) == ("batch", "Job"):
        return {"active": pods, "ready": ready, "startTime": rfc3339()}
    return waiting_status(obj, d, ready, pods)


def waiting_status(
    obj: Mapping[str, Any], d: Decomposition, ready: int, pods: int
) -> dict[str, Any]:
    """A status for ``obj`` while only ``ready`` of its ``pods`` pods run: what its
    controller reports then (the counts it keeps: ready replicas, ready workers), checked with
    :func:`placer.definitions.phases_of` — the first candidate its definition maps to
    ``Initializing``, else the first it maps to a phase that is neither ``Running`` nor
    ``Undefined``, else an empty status."""
    fallback: dict[str, Any] | None = None
    for candidate in _waiting_candidates(obj, d, ready, pods):
        try:
            phases = phases_of({**obj, "status": candidate}, d.definition)
        except PlacerError:
            continue
        if "Running" in phases or phases == ("Undefined",):
            continue
        if "Initializing" in phases:
            return candidate
        fallback = candidate if fallback is None else fallback
    return fallback if fallback is not None else {}


def _waiting_candidates(
    obj: Mapping[str, Any], d: Decomposition, ready: int, pods: int
) -> list[dict[str, Any]]:
    """Statuses the kind's controller would report while some of its pods wait."""
    group = d.definition.target.group if d.definition.target else ""
    replicas = _replicas(obj, 1)
    generation = generation_of(obj) or 1
    now = rfc3339()
    # ready replicas of a replicated kind: its ready pods when a replica is one pod (a
    # Deployment), else as many replicas as the ready pods make whole (an LWS group of 4: an
    # estimate, the realism does not track which replica a pod belongs to)
    whole = min(replicas, ready) if replicas == pods else min(replicas, ready * replicas // pods)
    revision = f"{name_of(obj)}-1"
    known: dict[tuple[str, str], list[dict[str, Any]]] = {
        ("apps", "Deployment"): [
            {
                "observedGeneration": generation,
                "replicas": replicas,
                "readyReplicas": whole,
                "availableReplicas": whole,
                "updatedReplicas": replicas,
                "unavailableReplicas": replicas - whole,
                "conditions": [
                    {
                        "type": "Available",
                        "status": "False",
                        "reason": "MinimumReplicasUnavailable",
                        "lastTransitionTime": now,
                    },
                    {
                        "type": "Progressing",
                        "status": "True",
                        "reason": "ReplicaSetUpdated",
                        "lastTransitionTime": now,
                    },
                ],
            }
        ],
        ("apps", "StatefulSet"): [
            {  # OrderedReady: the pod after the ready ones is created and waits
                "observedGeneration": generation,
                "replicas": min(replicas, whole + 1),
                "readyReplicas": whole,
                "availableReplicas": whole,
                "currentReplicas": min(replicas, whole + 1),
                "updatedReplicas": min(replicas, whole + 1),
                "currentRevision": revision,
                "updateRevision": revision,
            }
        ],
        ("jobset.x-k8s.io", "JobSet"): [
            {
                "replicatedJobsStatus": [
                    {
                        "name": c.instance or c.name,
                        "active": 0,
                        "ready": 0,
                        "failed": 0,
                        "succeeded": 0,
                        "suspended": 0,
                    }
                    for c in d.components
                ]
            }
        ],
        ("kubeflow.org", "PyTorchJob"): [_conditions(now, "Created")],
        ("kubeflow.org", "MPIJob"): [_conditions(now, "Created")],
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): [
            {
                "replicas": replicas,
                "readyReplicas": whole,
                "updatedReplicas": replicas,
                "conditions": [
                    {"type": "Progressing", "status": "True", "lastTransitionTime": now},
                    {"type": "Available", "status": "False", "lastTransitionTime": now},
                ],
            }
        ],
        ("ray.io", "RayCluster"): [
            {
                "desiredWorkerReplicas": max(0, pods - 1),
                "readyWorkerReplicas": max(0, ready - 1),
                "availableWorkerReplicas": max(0, ready - 1),
            }
        ],
        ("ray.io", "RayJob"): [{"jobDeploymentStatus": "Initializing"}],
        ("grove.io", "PodCliqueSet"): [{"availableReplicas": whole, "replicas": replicas}],
    }
    candidates = list(known.get((group, d.ref.kind), []))
    candidates.append(_from_mapping(d.definition, now, "Initializing"))
    candidates.append(_from_mapping(d.definition, now, "Pending"))
    return [c for c in candidates if c]


def running_status(obj: Mapping[str, Any], d: Decomposition) -> dict[str, Any] | None:
    """A status for ``obj`` that its definition maps to ``Running``, or ``None``."""
    for candidate in _candidates(obj, d):
        trial = {**obj, "status": candidate}
        try:
            phases = phases_of(trial, d.definition)
        except PlacerError:
            continue
        if "Running" in phases:
            return candidate
    return None


def suspended_status(obj: Mapping[str, Any], d: Decomposition) -> dict[str, Any] | None:
    """A status for ``obj``, its pods gone, that its definition maps to ``Suspended`` (and no
    longer to ``Running``), from the ``suspended`` mapping's conditions; ``None`` when there is
    none."""
    candidate = _from_mapping(d.definition, rfc3339(), "Suspended")
    if not candidate:
        return None
    try:
        phases = phases_of({**obj, "status": candidate}, d.definition)
    except PlacerError:
        return None
    return candidate if "Suspended" in phases and "Running" not in phases else None


def _write_status(
    store: Store, obj: Mapping[str, Any], status: Mapping[str, Any], *, replace: bool = False
) -> None:
    """Patch ``obj``'s status with ``status`` (``replace``: the fields not in it removed)."""
    if replace:
        old = obj.get("status") or {}
        status = {**dict.fromkeys(old), **status}
    namespace, name = name_key(obj)
    resource = f"{obj.get('kind')}"
    api_version = str(obj.get("apiVersion", ""))
    group = api_version.rpartition("/")[0]
    try:
        rt = next(
            r
            for r in store.resources()
            if r.group == group and r.kind == resource and r.api_version == api_version
        )
    except StopIteration:
        return
    try:
        store.patch(
            rt,
            name,
            {"status": dict(status)},
            namespace=namespace or None,
            subresource="status" if rt.status else None,
        )
    except StatusError as err:  # deleted meanwhile, or no status subresource: nothing to show
        log.info("status of %s/%s not written: %s", obj.get("kind"), name, err)
