"""The object store behind a loopback API server: state, write rules, history and watches.

One :class:`Store` holds everything a cluster's API would: typed objects per resource, one global
``resourceVersion`` counter (bumped once per effective write, never on a no-op), a bounded
per-resource event history for watches, consistent list snapshots for ``limit``/``continue``, and
the registry of served resource types. The HTTP layer is a thin translation onto its ``do_*``
methods; tests and the virtual fleet use the public in-process methods (:meth:`Store.get`,
:meth:`Store.create`, :meth:`Store.seed`, ...), which go through the same rules and feed the same
watches.

Design choices, and why:

* **Immutable stored objects.** A write builds a new dict and stores it; stored dicts are never
  mutated afterwards. Watch history, list snapshots and in-flight responses can therefore share
  references without copying, which is what makes 5,000-pod lists and seeds cheap. In-process
  callers always get copies.
* **One lock.** All state sits behind one re-entrant lock; watch streams wait on a condition of
  that lock. Writes are short, so contention is no concern at test scale.
* **Synchronous controllers.** What real controllers do asynchronously happens inside the write
  that triggers it: namespace deletion removes the namespace's content, deleting an owner
  deletes its dependents (background propagation; ``Orphan`` strips the owner reference instead),
  a CustomResourceDefinition is served (``Established``) as soon as it is stored. No other
  controller runs: no scheduler, kubelet, Deployment or Job controller. Use reactors
  (:meth:`Store.add_reactor`) to play their part.
* **Hooks.** Admission callbacks see every write before it is stored and may deny it with a
  :class:`~placer.testing.StatusError` or return a mutated object. Reactors see every committed
  write after the store lock is released and may write through the store themselves; they run
  synchronously, in the writing thread, before the HTTP response is sent, so a test that applies
  a workload sees the reactor's objects as soon as the apply returns.

What is not modelled: ``resourceVersionMatch=Exact`` for anything but the current version, pod
graceful deletion (pods go at once; seed objects with ``deletionTimestamp`` to model terminating
pods), field ownership of non-apply writes (see :func:`placer.testing._patch.apply_config`),
foreground deletion (treated as background), conversion between served versions (the stored
object is shown with the requested ``apiVersion``), shared storage of core and
``events.k8s.io`` events (two separate resources here), RBAC (one token may do everything;
inject 403s with :meth:`Faults.fail`), and the limit on objects per list a real server may
ignore for ``resourceVersion=0`` (``limit`` is always honoured).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import logging
import random
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar, cast

import yaml

from placer.testing._crds import (
    CRD_GROUP,
    crd_document,
    crd_identity,
    crd_status,
    established_at,
    guess_plural,
    served_types,
    version_document,
)
from placer.testing._patch import apply_config, json_patch, merge_patch, strategic_merge_patch
from placer.testing._resources import Registry, ResourceType
from placer.testing._selectors import FieldSelector, LabelSelector
from placer.testing._status import StatusError, cause, invalid
from placer.testing._validation import (
    check_namespace_match,
    default_from_schema,
    default_on_create,
    validate,
)

__all__ = ["AdmissionRequest", "Store", "WriteEvent"]

log = logging.getLogger(__name__)

JsonObj = dict[str, Any]
JsonObjs = list[JsonObj]
Key = tuple[str, str]
_T = TypeVar("_T")
_Pending = list[tuple[str, ResourceType, JsonObj, JsonObj | None]]
PatchType = Literal["merge", "json", "strategic", "apply"]

#: Namespaces every cluster starts with.
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: Content types of PATCH bodies, by patch type.
PATCH_CONTENT_TYPES: Mapping[str, PatchType] = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+json": "apply",
}
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_MAX_SNAPSHOTS = 64
_MAX_REACTOR_DEPTH = 32
_CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this response "
    "to retrieve the remainder of the results. Continuing with the provided token results in an "
    "inconsistent list - objects that were created, modified, or deleted between the time the "
    "first chunk was returned and now may show up in the list."
)


def _clone(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {k: _clone(v) for k, v in value.items()}
    if kind is list:
        return [_clone(v) for v in value]
    return value


def clone(value: _T) -> _T:
    """Deep copy of JSON-like data (dicts, lists, scalars); several times faster than deepcopy."""
    return cast(_T, _clone(value))


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _kindless(obj: JsonObj) -> JsonObj:
    """A built-in list item: the real server leaves ``kind`` and ``apiVersion`` out."""
    return {k: v for k, v in obj.items() if k != "apiVersion" and k != "kind"}


def now_rfc3339() -> str:
    """The current time as Kubernetes serialises timestamps (second precision, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class ListQuery:
    """The options of a list request (query parameters of the same names)."""

    label_selector: str | None = None
    field_selector: str | None = None
    limit: int | None = None
    continue_token: str | None = None
    resource_version: str | None = None
    resource_version_match: str | None = None


@dataclass(frozen=True)
class WriteEvent:
    """A committed write, as reactors see it.

    Attributes:
        type: ``ADDED``, ``MODIFIED`` or ``DELETED``.
        resource: the resource type written.
        object: the object after the write (for ``DELETED``: its last state); a copy.
        old: the object before the write (``None`` for ``ADDED``); a copy.
        store: the store, for reactors that write back.
    """

    type: str
    resource: ResourceType
    object: JsonObj
    old: JsonObj | None
    store: Store


@dataclass(frozen=True)
class AdmissionRequest:
    """A write about to be stored, as admission callbacks see it.

    Attributes:
        operation: ``CREATE``, ``UPDATE`` or ``DELETE``.
        resource: the resource type written.
        subresource: ``"status"`` or ``None``.
        name: object name.
        namespace: object namespace (``None`` for cluster-scoped objects).
        object: the object as it would be stored (``None`` for ``DELETE``); a copy the callback
            may change and return to mutate the write.
        old_object: the stored object before the write (``None`` for ``CREATE``); a copy.
        dry_run: the request is a dry run (nothing will be stored).
    """

    operation: str
    resource: ResourceType
    subresource: str | None
    name: str
    namespace: str | None
    object: JsonObj | None
    old_object: JsonObj | None
    dry_run: bool


_Events = list["_Event"]
_ResourceTypes = list[ResourceType]

#: An admission callback: raise :class:`StatusError` to deny, return an object to mutate.
Admission = Callable[[AdmissionRequest], Mapping[str, Any] | None]
#: A reactor: called after every committed write.
Reactor = Callable[[WriteEvent], None]
_Admissions = list[Admission]
_Reactors = list[Reactor]


@dataclass(frozen=True)
class _Event:
    rv: int
    type: str
    obj: JsonObj
    prev: JsonObj | None


class _Collection:
    """Objects of one resource (all versions), plus its recent event history and the cached
    JSON encoding of current objects (by uid; the entry keeps the object it encodes)."""

    def __init__(self) -> None:
        self.objects: dict[Key, JsonObj] = {}
        self.encoded: dict[str, tuple[JsonObj, bytes]] = {}
        self.history: list[_Event] = []
        self.compacted_rv = 0

    def events_after(self, rv: int) -> list[_Event]:
        index = bisect.bisect_right(self.history, rv, key=_event_rv)
        return self.history[index:]


def _event_rv(event: _Event) -> int:
    return event.rv


@dataclass
class _Snapshot:
    storage_key: tuple[str, str]
    rv: int
    items: list[JsonObj]
    filtered: bool


@dataclass
class _Local(threading.local):
    depth: int = 0
    quiet: bool = False
    reactor_depth: int = 0
    pending: list[tuple[str, ResourceType, JsonObj, JsonObj | None]] = field(default_factory=list)


def _meta(obj: Mapping[str, Any]) -> JsonObj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


_GENERATION_KINDS = frozenset(
    {
        ("apps", "Deployment"),
        ("apps", "StatefulSet"),
        ("apps", "ReplicaSet"),
        ("apps", "DaemonSet"),
        ("batch", "Job"),
        ("batch", "CronJob"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
    }
)


def _tracks_generation(rt: ResourceType) -> bool:
    """Whether ``metadata.generation`` is maintained: custom resources and the built-in kinds
    whose strategies set it (workloads, jobs, CRDs); pods, config maps, nodes... have none."""
    return not rt.builtin or (rt.group, rt.kind) in _GENERATION_KINDS


def _spec_part(obj: Mapping[str, Any], with_status: bool) -> JsonObj:
    skip = (
        {"metadata", "apiVersion", "kind"}
        if with_status
        else {"metadata", "status", "apiVersion", "kind"}
    )
    return {k: v for k, v in obj.items() if k not in skip}


class Store:
    """All objects and rules of one loopback cluster.

    Args:
        history_size: events kept per resource for watch replay and list continuation; a watch
            or continue token older than the retained history gets 410 Expired. At least this
            many recent events are kept (trimming is amortised).
        bookmark_interval: seconds between BOOKMARK events on watches that allow them (a
            real server sends one a minute, and one 2 s before the watch's timeout; tests
            want them sooner).
    """

    def __init__(self, *, history_size: int = 10_000, bookmark_interval: float = 1.0) -> None:
        if history_size < 1:
            raise ValueError("history_size must be at least 1")
        self.history_size = history_size
        self.bookmark_interval = bookmark_interval
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._registry = Registry()
        self._collections: dict[tuple[str, str], _Collection] = {}
        self._rv = 0
        self._uids: dict[str, tuple[tuple[str, str], Key]] = {}
        self._dependents: dict[str, set[tuple[tuple[str, str], Key]]] = {}
        self._snapshots: OrderedDict[str, _Snapshot] = OrderedDict()
        self._admission: _Admissions = []
        self._reactors: _Reactors = []
        self._local = _Local()
        self.seed(_namespace(n) for n in INITIAL_NAMESPACES)

    # -- hooks ---------------------------------------------------------------------------

    def add_admission(self, callback: Admission) -> None:
        """Call ``callback`` for every write before it is stored (HTTP and in-process).

        The callback runs under the store lock (keep it quick; it may read the store). Raise
        :class:`StatusError` to deny the write (e.g. ``StatusError(403, 'admission webhook
        "x" denied the request: ...')``); return a mapping to replace the object being
        written (a mutating webhook); return ``None`` to allow. ``seed`` and ``put`` skip it.
        """
        with self._lock:
            self._admission.append(callback)

    def remove_admission(self, callback: Admission) -> None:
        """Stop calling an admission callback."""
        with self._lock:
            self._admission.remove(callback)

    def add_reactor(self, callback: Reactor) -> None:
        """Call ``callback`` after every committed write (not dry runs, not ``seed``).

        Reactors run in the writing thread after the store lock is released and before the
        HTTP response is sent, so several may run at once for concurrent clients (guard shared
        state); writes they make through the store trigger reactors again (depth limited to
        32). An exception from a reactor propagates: an HTTP client gets a 500 InternalError
        (the triggering write is already committed), an in-process caller gets the exception.
        """
        with self._lock:
            self._reactors.append(callback)

    def remove_reactor(self, callback: Reactor) -> None:
        """Stop calling a reactor."""
        with self._lock:
            self._reactors.remove(callback)

    # -- resource types ------------------------------------------------------------------

    def resource(self, name: str | ResourceType) -> ResourceType:
        """Resolve a resource name as kubectl does (``pods``, ``po``, ``Pod``,
        ``jobsets.jobset.x-k8s.io``, ``deployments.apps``); a ResourceType passes through.

        Raises:
            StatusError: 404 for an unknown name.
        """
        if isinstance(name, ResourceType):
            return name
        with self._lock:
            return self._registry.resolve(name)

    def resources(self) -> _ResourceTypes:
        """Every served resource type (all versions)."""
        with self._lock:
            return list(self._registry)

    @property
    def registry(self) -> Registry:
        """The registry of served types (read it under :attr:`lock`)."""
        return self._registry

    @property
    def lock(self) -> threading.RLock:
        """The store lock (for callers that read several things consistently)."""
        return self._lock

    def register_resource(
        self,
        group: str,
        version: str,
        kind: str,
        plural: str | None = None,
        *,
        namespaced: bool = True,
        status: bool = True,
        scale: bool = False,
        short_names: Iterable[str] = (),
        singular: str | None = None,
        categories: Iterable[str] = (),
        selectable_fields: Iterable[str] = (),
        printer_columns: Iterable[Mapping[str, Any]] = (),
    ) -> ResourceType:
        """Serve a custom resource by creating (or extending) its CustomResourceDefinition.

        Args:
            group: API group, with at least one dot (``jobset.x-k8s.io``).
            version: served version; registering a second version of the same plural adds it.
            kind: object kind.
            plural: URL name; defaults to the lower-cased kind plus ``s`` (``es`` after s/x/ch/sh,
                ``ies`` for a consonant + y).
            namespaced: namespace-scoped or cluster-scoped.
            status: whether a ``/status`` subresource exists.
            scale: whether a ``/scale`` subresource exists (``spec.replicas``,
                ``status.replicas``, ``status.selector``).
            short_names: kubectl short names.
            singular: singular name (default: lower-cased kind).
            categories: discovery categories (``all``).
            selectable_fields: extra field-selector labels (CRD ``selectableFields``, e.g.
                ``spec.color``).
            printer_columns: the version's ``additionalPrinterColumns`` (``name``, ``type``,
                ``jsonPath``, optional ``description``, ``priority``, ``format``): the
                columns of ``kubectl get`` (Table responses).

        Returns:
            The served type.
        """
        plural = plural or guess_plural(kind)
        version_doc = version_document(
            version,
            status=status,
            scale=scale,
            selectable_fields=selectable_fields,
            printer_columns=printer_columns,
        )
        crd_rt = self.resource(f"customresourcedefinitions.{CRD_GROUP}")
        with self._op():
            existing = self._collection_for(crd_rt).objects.get(("", f"{plural}.{group}"))
            if existing is None:
                crd = crd_document(
                    group,
                    kind,
                    plural,
                    version_doc,
                    namespaced=namespaced,
                    short_names=short_names,
                    singular=singular,
                    categories=categories,
                )
                self._create(crd_rt, None, crd, dry_run=False)
            else:
                crd = clone(existing)
                versions = [v for v in crd["spec"]["versions"] if v.get("name") != version]
                for v in versions:
                    v["storage"] = False
                crd["spec"]["versions"] = [*versions, version_doc]
                self._update(crd_rt, existing, crd, subresource=None, dry_run=False)
            found = self._registry.get(group, version, plural)
        assert found is not None
        return found

    # -- in-process API (copies in, copies out) ------------------------------------------

    @property
    def resource_version(self) -> str:
        """The current global resourceVersion."""
        with self._lock:
            return str(self._rv)

    def get(self, resource: str | ResourceType, name: str, namespace: str | None = None) -> JsonObj:
        """A copy of one object.

        Raises:
            StatusError: 404 NotFound.
        """
        rt = self.resource(resource)
        return clone(self.do_get(rt, self._ns(rt, namespace), name))

    def list(
        self,
        resource: str | ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> JsonObjs:
        """Copies of the matching objects, ordered by namespace and name (all namespaces when
        ``namespace`` is ``None``)."""
        rt = self.resource(resource)
        labels, fields = LabelSelector(label_selector), FieldSelector(field_selector, rt)
        with self._lock:
            items = self._select(rt, namespace, labels, fields)
            return [clone(self._present(rt, o)) for o in items]

    def create(self, obj: Mapping[str, Any], *, dry_run: bool = False) -> JsonObj:
        """Create an object (type from its ``apiVersion``/``kind``, namespace from its metadata,
        ``default`` when unset), with every rule of an HTTP create.

        Raises:
            StatusError: 409 AlreadyExists, 404 missing namespace, 422 Invalid, admission denials.
        """
        rt, namespace = self._target(obj)
        return clone(self.do_create(rt, namespace, clone(dict(obj)), dry_run=dry_run))

    def replace(
        self, obj: Mapping[str, Any], *, subresource: str | None = None, dry_run: bool = False
    ) -> JsonObj:
        """Replace an object (PUT), with the ``resourceVersion`` check when the body has one.

        Raises:
            StatusError: 404, 409 Conflict, 422, admission denials.
        """
        rt, namespace = self._target(obj)
        name = str(_meta(obj).get("name", ""))
        return clone(
            self.do_update(
                rt, namespace, name, clone(dict(obj)), subresource=subresource, dry_run=dry_run
            )
        )

    def patch(
        self,
        resource: str | ResourceType,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> JsonObj:
        """Patch an object (``merge``, ``json`` or ``strategic``); see :meth:`apply` for SSA.

        Raises:
            StatusError: 404, 409, 415 (strategic on a custom resource), 422, admission denials.
        """
        rt = self.resource(resource)
        obj, _created = self.do_patch(
            rt,
            self._ns(rt, namespace),
            name,
            patch_type,
            clone(body),
            subresource=subresource,
            dry_run=dry_run,
        )
        return clone(obj)

    def apply(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> JsonObj:
        """Server-side apply ``obj`` as ``field_manager`` (creates when missing).

        Raises:
            StatusError: 409 Conflict with another manager's fields (unless ``force``), 422.
        """
        rt, namespace = self._target(obj)
        name = str(_meta(obj).get("name", ""))
        result, _created = self.do_patch(
            rt,
            namespace,
            name,
            "apply",
            clone(dict(obj)),
            subresource=subresource,
            dry_run=dry_run,
            field_manager=field_manager,
            force=force,
        )
        return clone(result)

    def delete(
        self,
        resource: str | ResourceType,
        name: str,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        propagation_policy: str | None = None,
    ) -> JsonObj:
        """Delete an object; returns what the HTTP DELETE would (object or Status).

        Objects with finalizers get a ``deletionTimestamp`` and stay until the finalizers are
        removed. Dependents (``ownerReferences``) are deleted too, or orphaned with
        ``propagation_policy="Orphan"``.

        Raises:
            StatusError: 404 NotFound, admission denials.
        """
        rt = self.resource(resource)
        options: JsonObj = {"propagationPolicy": propagation_policy} if propagation_policy else {}
        return clone(
            self.do_delete(rt, self._ns(rt, namespace), name, dry_run=dry_run, options=options)
        )

    def put(self, obj: Mapping[str, Any]) -> JsonObj:
        """Store ``obj`` as given, creating or overwriting, like a controller with god rights.

        No validation, admission, status-subresource rule, resourceVersion check or defaulting
        (kept: uid and creationTimestamp of an existing object). Watches see the event and
        reactors run. Missing namespaces are created. Use it to play kubelet or scheduler, e.g.
        to set ``status.phase`` or bind a pod to a node.
        """
        with self._op():
            return clone(self._put_raw(clone(dict(obj)), creation=now_rfc3339(), react=True))

    def seed(self, objects: Iterable[Mapping[str, Any]]) -> int:
        """Bulk-load objects as existing cluster state (no admission, no reactors, no validation
        beyond a name and a served kind); missing namespaces are created.

        Fast enough that a 500-node, 5,000-pod cluster loads in well under a second. Watches see
        the events (each object gets its own resourceVersion).

        Returns:
            The number of objects stored.
        """
        count = 0
        stamp = now_rfc3339()
        with self._op():
            for obj in objects:
                self._put_raw(clone(dict(obj)), creation=stamp, react=False)
                count += 1
        return count

    def compact(self) -> None:
        """Forget all watch history and list snapshots: every watch from an older
        resourceVersion and every outstanding continue token gets 410 Expired."""
        with self._lock:
            for coll in self._collections.values():
                coll.history.clear()
                coll.compacted_rv = self._rv
            self._snapshots.clear()
            self._changed.notify_all()

    def wake(self) -> None:
        """Wake every waiting watch (used when a server stops)."""
        with self._lock:
            self._changed.notify_all()

    # -- HTTP-facing operations (return stored objects: never mutate them) -------------------

    def do_get(self, rt: ResourceType, namespace: str | None, name: str) -> JsonObj:
        """The stored object (presented in ``rt``'s version)."""
        with self._lock:
            obj = self._collection_for(rt).objects.get((namespace or "", name))
            if obj is None:
                raise self._not_found(rt, name)
            return self._present(rt, obj)

    def do_list_json(self, rt: ResourceType, namespace: str | None, query: ListQuery) -> bytes:
        """The JSON list body (``<Kind>List``) of a list request, with pagination.

        Each stored object's encoding is cached (objects are immutable), so a 500-item page is
        a join of cached bytes. Built-in lists leave item ``kind``/``apiVersion`` out, as the
        real server does.
        """
        meta, page = self._list_page(rt, namespace, query)
        head = {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta}
        with self._lock:
            coll = self._collection_for(rt)
            items = [self._encoded_item(coll, rt, o) for o in page]
        return _dumps(head)[:-1] + b',"items":[' + b",".join(items) + b"]}"

    def _encoded_item(self, coll: _Collection, rt: ResourceType, obj: JsonObj) -> bytes:
        if not rt.builtin and obj.get("apiVersion") != rt.api_version:
            return _dumps(self._present(rt, obj))
        meta = _meta(obj)
        uid = meta.get("uid")
        cached = coll.encoded.get(uid) if uid else None
        if cached is not None and cached[0] is obj:
            return cached[1]
        data = _dumps(_kindless(obj) if rt.builtin else obj)
        if uid and coll.objects.get((meta.get("namespace") or "", meta.get("name", ""))) is obj:
            coll.encoded[uid] = (obj, data)
        return data

    def _list_page(
        self, rt: ResourceType, namespace: str | None, query: ListQuery
    ) -> tuple[JsonObj, JsonObjs]:
        labels = LabelSelector(query.label_selector)
        fields = FieldSelector(query.field_selector, rt)
        limit, continue_token = query.limit, query.continue_token
        with self._lock:
            if continue_token:
                snap_id, start = self._decode_continue(continue_token)
                snap = self._snapshots.get(snap_id)
                if snap is None:
                    raise StatusError(410, _CONTINUE_EXPIRED, reason="Expired")
                self._snapshots.move_to_end(snap_id)
            else:
                self._check_list_rv(query.resource_version, query.resource_version_match)
                snap_id, start = "", 0
                snap = _Snapshot(
                    rt.storage_key,
                    self._rv,
                    self._select(rt, namespace, labels, fields),
                    not (labels.empty and fields.empty),
                )
            size = len(snap.items)
            end = size if not limit or limit <= 0 else min(start + limit, size)
            meta: JsonObj = {"resourceVersion": str(snap.rv)}
            if end < size:
                if not snap_id:
                    snap_id = uuid.uuid4().hex
                    self._snapshots[snap_id] = snap
                    while len(self._snapshots) > _MAX_SNAPSHOTS:
                        self._snapshots.popitem(last=False)
                meta["continue"] = self._encode_continue(snap_id, snap.rv, end)
                if not snap.filtered:
                    meta["remainingItemCount"] = size - end
            elif snap_id:
                self._snapshots.pop(snap_id, None)
            return meta, snap.items[start:end]

    def do_create(
        self,
        rt: ResourceType,
        namespace: str | None,
        body: JsonObj,
        *,
        dry_run: bool = False,
    ) -> JsonObj:
        """Create from a request body (owned by the store from now on)."""
        with self._op():
            return self._create(rt, namespace, body, dry_run=dry_run)

    def do_update(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: JsonObj,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> JsonObj:
        """Replace (PUT) from a request body."""
        self._check_body(rt, body, namespace)
        body_name = _meta(body).get("name")
        if body_name and body_name != name:
            raise StatusError(
                400,
                f"the name of the object ({body_name}) does not match the name on the URL ({name})",
            )
        with self._op():
            old = self._collection_for(rt).objects.get((namespace or "", name))
            if old is None:
                raise self._not_found(rt, name)
            rv = _meta(body).get("resourceVersion")
            if not rv and not rt.builtin:
                problem = cause(
                    "metadata.resourceVersion",
                    "Invalid value: 0x0: must be specified for an update",
                )
                raise invalid(rt.kind, name, rt.group, [problem], qualified=f"{rt.kind}.{rt.group}")
            return self._update(rt, old, body, subresource=subresource, dry_run=dry_run)

    def do_patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        patch_type: PatchType,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
        force: bool = False,
    ) -> tuple[JsonObj, bool]:
        """Patch (or apply); returns the object and whether it was created (apply only)."""
        if patch_type == "strategic" and not rt.builtin:
            raise StatusError(
                415,
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml",
            )
        if patch_type == "apply":
            if not field_manager:
                raise StatusError(
                    422,
                    'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                    "is required for apply patch",
                    details={
                        "group": "meta.k8s.io",
                        "kind": "PatchOptions",
                        "causes": [
                            {
                                "reason": "FieldValueRequired",
                                "message": "Required value: is required for apply patch",
                                "field": "fieldManager",
                            }
                        ],
                    },
                )
            if isinstance(body, (str, bytes)):
                try:
                    body = yaml.safe_load(body)
                except yaml.YAMLError as exc:
                    raise StatusError(400, f"error decoding YAML: {exc}") from None
            if not isinstance(body, dict):
                raise StatusError(400, "the apply configuration must be an object")
            self._check_body(rt, body, namespace)
            body_name = _meta(body).get("name")
            if body_name and body_name != name:
                raise StatusError(
                    400,
                    f"the name of the object ({body_name}) does not match the name on the URL "
                    f"({name})",
                )
        elif patch_type != "json" and not isinstance(body, dict):
            raise StatusError(400, "the patch body must be a JSON object")
        with self._op():
            old = self._collection_for(rt).objects.get((namespace or "", name))
            if patch_type == "apply":
                if subresource != "status" and rt.status:
                    body.pop("status", None)
                if old is None and subresource:
                    raise self._not_found(rt, name)
                body.setdefault("metadata", {})["name"] = name
                new = apply_config(
                    None if old is None else self._present(rt, old),
                    {"status": body.get("status", {})} if subresource == "status" else body,
                    manager=field_manager or "",
                    api_version=rt.api_version,
                    force=force,
                    keyed_lists=rt.builtin,
                    subresource=subresource,
                    now=now_rfc3339(),
                )
                if old is None:
                    new.setdefault("apiVersion", rt.api_version)
                    new.setdefault("kind", rt.kind)
                    return self._create(rt, namespace, new, dry_run=dry_run), True
                new["metadata"]["resourceVersion"] = _meta(body).get("resourceVersion") or _meta(
                    old
                ).get("resourceVersion")
                return self._update(
                    rt, old, new, subresource=subresource, dry_run=dry_run, keep_managed=False
                ), False
            if old is None:
                raise self._not_found(rt, name)
            current = self._present(rt, old)
            if patch_type == "merge":
                new = merge_patch(current, body)
            elif patch_type == "json":
                new = json_patch(current, body)
            else:
                new = strategic_merge_patch(current, body)
            if not isinstance(new, dict):
                raise StatusError(422, "the patch produced a non-object")
            if _meta(new).get("name") != name or (
                rt.namespaced and _meta(new).get("namespace") != namespace
            ):
                raise StatusError(
                    422,
                    f'{rt.kind} "{name}" is invalid: metadata.name: Invalid value: '
                    "the patch cannot change the name or namespace",
                )
            return self._update(rt, old, new, subresource=subresource, dry_run=dry_run), False

    def do_scale(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any = None,
        *,
        patch_type: PatchType | None = None,
        replace: bool = False,
        dry_run: bool = False,
    ) -> JsonObj:
        """The ``autoscaling/v1`` Scale of an object; with ``replace`` (PUT) or ``patch_type``
        (PATCH), write its replicas back to the object first (a spec change: generation moves).
        """
        assert rt.scale is not None
        spec_path, _status_path, _selector_path = rt.scale
        with self._op():
            old = self._collection_for(rt).objects.get((namespace or "", name))
            if old is None:
                raise self._not_found(rt, name)
            current = _scale_of(rt, old)
            if not replace and patch_type is None:
                return current
            if replace:
                wanted = body
            elif patch_type == "json":
                wanted = json_patch(current, body)
            else:
                wanted = merge_patch(current, body)
            if not isinstance(wanted, dict):
                raise StatusError(400, "the body of the request must be a Scale object")
            replicas = (wanted.get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                problem = cause("spec.replicas", f"Invalid value: {replicas!r}: must be >= 0")
                raise invalid("Scale", name, "autoscaling", [problem])
            new = clone(old)
            new["metadata"]["resourceVersion"] = _meta(wanted).get("resourceVersion") or _meta(
                old
            ).get("resourceVersion")
            _set_path(new, spec_path, replicas)
            written = self._update(rt, old, new, subresource=None, dry_run=dry_run)
            return _scale_of(rt, written)

    def do_delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        *,
        dry_run: bool = False,
        options: Mapping[str, Any] | None = None,
    ) -> JsonObj:
        """Delete; returns the object (built-ins, or pending finalizers) or a success Status."""
        options = options or {}
        with self._op():
            old = self._collection_for(rt).objects.get((namespace or "", name))
            if old is None:
                raise self._not_found(rt, name)
            pre = options.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != _meta(old).get("uid"):
                why = (
                    f"Precondition failed: UID in precondition: {pre['uid']}, "
                    f"UID in object meta: {_meta(old).get('uid')}"
                )
                raise _conflict(rt, name, why)
            if pre.get("resourceVersion") and pre["resourceVersion"] != _meta(old).get(
                "resourceVersion"
            ):
                raise _conflict(rt, name)
            self._admit("DELETE", rt, None, None, old, dry_run)
            result = self._delete(
                rt,
                old,
                dry_run=dry_run,
                policy=str(options.get("propagationPolicy") or "Background"),
            )
            if result is None:  # gone for good
                if rt.builtin:
                    return self._present(rt, old)
                return {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": {
                        "name": name,
                        "group": rt.group,
                        "kind": rt.plural,
                        "uid": _meta(old).get("uid"),
                    },
                }
            return self._present(rt, result)

    def do_delete_collection(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        dry_run: bool = False,
        options: Mapping[str, Any] | None = None,
    ) -> JsonObj:
        """Delete every matching object; returns the list of what was deleted."""
        labels, fields = LabelSelector(label_selector), FieldSelector(field_selector, rt)
        deleted: JsonObjs = []
        with self._op():
            for obj in self._select(rt, namespace, labels, fields):
                meta = _meta(obj)
                self.do_delete(
                    rt, meta.get("namespace"), meta["name"], dry_run=dry_run, options=options
                )
                deleted.append(self._present(rt, obj))
            rv = self._rv
        return {
            "kind": f"{rt.kind}List",
            "apiVersion": rt.api_version,
            "metadata": {"resourceVersion": str(rv)},
            "items": deleted,
        }

    def watch(
        self,
        resource: str | ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        allow_bookmarks: bool = False,
        send_initial_events: bool = False,
        timeout: float = 1800.0,
        stop: threading.Event | None = None,
        shared: bool = False,
    ) -> Iterator[JsonObj]:
        """Watch events (``{"type", "object"}``) until ``timeout`` or ``stop``.

        ``namespace`` ``None`` watches all namespaces (or a cluster-scoped resource). Without a
        resourceVersion (or ``"0"``) the stream starts with a synthetic ``ADDED`` per
        matching object; with one, it replays every later event, or yields one ``ERROR`` event
        (410 Expired) when that version is older than the retained history. Selectors filter the
        stream the way the watch cache does: an object that stops matching comes as ``DELETED``,
        one that starts matching as ``ADDED``. With ``allow_bookmarks``, a ``BOOKMARK`` carrying
        the current resourceVersion comes every ``bookmark_interval`` seconds, and with
        ``send_initial_events`` one annotated ``k8s.io/initial-events-end`` follows the initial
        events; as from the real watch cache, one more comes 2 s before ``timeout``.

        Events are copies unless ``shared`` (the HTTP front, which only serialises them, reads
        the stored objects directly: never mutate shared events).

        Raises:
            StatusError: 400 for a malformed selector or resourceVersion (before streaming).
        """
        rt = self.resource(resource)
        labels, fields = LabelSelector(label_selector), FieldSelector(field_selector, rt)
        position = (
            self._parse_rv(resource_version) if resource_version not in (None, "", "0") else None
        )
        events = self._watch(
            rt,
            namespace,
            labels,
            fields,
            position,
            allow_bookmarks,
            send_initial_events,
            timeout,
            stop,
        )
        return events if shared else (clone(event) for event in events)

    def _watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        position: int | None,
        allow_bookmarks: bool,
        send_initial_events: bool,
        timeout: float,
        stop: threading.Event | None,
    ) -> Iterator[JsonObj]:
        deadline = time.monotonic() + timeout
        with self._lock:
            coll = self._collection_for(rt)
            initial: JsonObjs = []
            if position is None or send_initial_events:
                initial = self._select(rt, namespace, labels, fields)
                position = self._rv
            elif position < coll.compacted_rv:
                yield self._expired_event(position, coll)
                return
        for obj in initial:
            yield {"type": "ADDED", "object": self._present(rt, obj)}
        if send_initial_events and allow_bookmarks:
            yield self._bookmark(rt, position, initial_end=True)
        # as the real watch cache: a bookmark every ``bookmark_interval`` (a minute there), and
        # one 2 s before the watch's own timeout, so that it resumes from a recent version
        pretimeout = deadline - _PRETIMEOUT_BOOKMARK
        next_bookmark = _next_bookmark(time.monotonic(), self.bookmark_interval, pretimeout)
        while True:
            events: _Events = []
            outcome = ""
            with self._lock:
                while not outcome:
                    if stop is not None and stop.is_set():
                        return
                    if coll.compacted_rv > position:
                        outcome = "expired"
                        break
                    events = coll.events_after(position)
                    if events:
                        outcome = "events"
                        break
                    now = time.monotonic()
                    if now >= deadline:
                        return
                    if allow_bookmarks and now >= next_bookmark:
                        position = max(position, self._rv)
                        next_bookmark = _next_bookmark(now, self.bookmark_interval, pretimeout)
                        outcome = "bookmark"
                        break
                    wake = min(deadline, next_bookmark) if allow_bookmarks else deadline
                    self._changed.wait(min(wake - now, 1.0))
                expired = self._expired_event(position, coll) if outcome == "expired" else None
            if expired is not None:
                yield expired
                return
            if outcome == "bookmark":
                yield self._bookmark(rt, position)
                continue
            for event in events:
                position = event.rv
                translated = self._translate(rt, event, namespace, labels, fields)
                if translated is not None:
                    yield translated

    # -- internals: reading ----------------------------------------------------------------

    def _ns(self, rt: ResourceType, namespace: str | None) -> str | None:
        if rt.namespaced:
            return namespace or "default"
        return None

    def _target(self, obj: Mapping[str, Any]) -> tuple[ResourceType, str | None]:
        with self._lock:
            rt = self._registry.for_object(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        return rt, self._ns(rt, _meta(obj).get("namespace"))

    def _collection_for(self, rt: ResourceType | None) -> _Collection:
        assert rt is not None
        coll = self._collections.get(rt.storage_key)
        if coll is None:
            coll = self._collections[rt.storage_key] = _Collection()
        return coll

    def _present(self, rt: ResourceType, obj: JsonObj) -> JsonObj:
        if obj.get("apiVersion") == rt.api_version:
            return obj
        return {**obj, "apiVersion": rt.api_version}

    def _select(
        self, rt: ResourceType, namespace: str | None, labels: LabelSelector, fields: FieldSelector
    ) -> JsonObjs:
        objects = self._collection_for(rt).objects
        exact = fields.exact_name()
        if exact is not None and namespace is not None:
            obj = objects.get((namespace, exact))
            candidates = [obj] if obj is not None else []
        elif namespace is None:
            candidates = [objects[k] for k in sorted(objects)]
        else:
            candidates = [objects[k] for k in sorted(k for k in objects if k[0] == namespace)]
        if labels.empty and fields.empty:
            return candidates
        return [
            o for o in candidates if labels.matches(_meta(o).get("labels")) and fields.matches(o)
        ]

    def _translate(
        self,
        rt: ResourceType,
        event: _Event,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
    ) -> JsonObj | None:
        def selected(obj: JsonObj | None) -> bool:
            if obj is None:
                return False
            if namespace is not None and _meta(obj).get("namespace") != namespace:
                return False
            return labels.matches(_meta(obj).get("labels")) and fields.matches(obj)

        now, before = selected(event.obj), selected(event.prev)
        kind = event.type
        if kind == "MODIFIED":
            if now and not before:
                kind = "ADDED"
            elif before and not now:
                prev = dict(event.prev or {})
                prev["metadata"] = {**_meta(prev), "resourceVersion": str(event.rv)}
                return {"type": "DELETED", "object": self._present(rt, prev)}
        if not now:
            return None
        return {"type": kind, "object": self._present(rt, event.obj)}

    def _bookmark(self, rt: ResourceType, rv: int, *, initial_end: bool = False) -> JsonObj:
        meta: JsonObj = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {
            "type": "BOOKMARK",
            "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta},
        }

    def _expired_event(self, position: int, coll: _Collection) -> JsonObj:
        oldest = coll.compacted_rv + 1
        error = StatusError(
            410, f"too old resource version: {position} ({oldest})", reason="Expired"
        )
        return {"type": "ERROR", "object": error.status}

    def _parse_rv(self, text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise StatusError(400, f'invalid resource version "{text}"') from None
        if value < 0:
            raise StatusError(400, f'invalid resource version "{text}"')
        return value

    def _check_list_rv(self, rv: str | None, match: str | None) -> None:
        if match and match not in {"Exact", "NotOlderThan"}:
            raise StatusError(400, f'resourceVersionMatch "{match}" is not supported')
        if rv in (None, "", "0"):
            if match == "Exact":
                raise StatusError(
                    400,
                    'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is '
                    'forbidden for resourceVersion "0"',
                )
            return
        assert rv is not None
        value = self._parse_rv(rv)
        if value > self._rv:
            raise StatusError(
                504,
                f"Too large resource version: {value}, current: {self._rv}",
                reason="Timeout",
                details={
                    "causes": [
                        {
                            "reason": "ResourceVersionTooLarge",
                            "message": "Too large resource version",
                        }
                    ],
                    "retryAfterSeconds": 1,
                },
            )
        if match == "Exact" and value != self._rv:
            raise StatusError(
                410, f"too old resource version: {value} ({self._rv})", reason="Expired"
            )

    def _encode_continue(self, snap_id: str, rv: int, start: int) -> str:
        raw = json.dumps(
            {"v": "meta.k8s.io/v1", "rv": rv, "start": start, "id": snap_id}, separators=(",", ":")
        )
        return base64.urlsafe_b64encode(raw.encode()).decode()

    def _decode_continue(self, token: str) -> tuple[str, int]:
        try:
            data = json.loads(base64.urlsafe_b64decode(token.encode()))
            return str(data["id"]), int(data["start"])
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise StatusError(400, f"continue key is not valid: {token!r}") from None

    def _not_found(self, rt: ResourceType, name: str) -> StatusError:
        return StatusError(404, f'{rt.qualified} "{name}" not found', details=_details(rt, name))

    # -- internals: writing ----------------------------------------------------------------

    class _OpContext:
        def __init__(self, store: Store) -> None:
            self.store = store

        def __enter__(self) -> None:
            self.store._lock.acquire()
            self.store._local.depth += 1

        def __exit__(self, *exc: object) -> None:
            store = self.store
            local = store._local
            local.depth -= 1
            pending: _Pending = []
            if local.depth == 0:
                pending, local.pending = local.pending, []
                store._changed.notify_all()
            store._lock.release()
            if pending and exc[0] is None:
                store._react(pending)

    def _op(self) -> Store._OpContext:
        return Store._OpContext(self)

    def _react(self, pending: _Pending) -> None:
        with self._lock:
            reactors = list(self._reactors)
        if not reactors:
            return
        local = self._local
        if local.reactor_depth >= _MAX_REACTOR_DEPTH:
            raise RuntimeError(
                f"reactors nested more than {_MAX_REACTOR_DEPTH} deep: a reactor loop?"
            )
        local.reactor_depth += 1
        try:
            for kind, rt, obj, old in pending:
                for reactor in reactors:
                    reactor(WriteEvent(kind, rt, clone(obj), clone(old), self))
        finally:
            local.reactor_depth -= 1

    def _check_body(self, rt: ResourceType, body: JsonObj, namespace: str | None) -> None:
        if not isinstance(body, dict):
            raise StatusError(400, "the request body must be a JSON object")
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if api_version and api_version != rt.api_version:
            raise StatusError(
                400,
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({rt.api_version})",
            )
        if kind and kind != rt.kind:
            raise StatusError(
                400, f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
            )
        metadata = body.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise StatusError(400, "metadata must be an object")
        check_namespace_match(rt, body, namespace)

    def _admit(
        self,
        operation: str,
        rt: ResourceType,
        subresource: str | None,
        obj: JsonObj | None,
        old: JsonObj | None,
        dry_run: bool,
    ) -> JsonObj | None:
        if not self._admission:
            return obj
        meta = _meta(obj if obj is not None else old or {})
        for callback in list(self._admission):
            request = AdmissionRequest(
                operation,
                rt,
                subresource,
                str(meta.get("name", "")),
                meta.get("namespace"),
                clone(obj),
                clone(old),
                dry_run,
            )
            changed = callback(request)
            if changed is not None and obj is not None:
                obj = clone(dict(changed))
        return obj

    def _create(
        self, rt: ResourceType, namespace: str | None, body: JsonObj, *, dry_run: bool
    ) -> JsonObj:
        self._check_body(rt, body, namespace)
        body["apiVersion"], body["kind"] = rt.api_version, rt.kind
        meta = body.setdefault("metadata", {})
        if meta.get("resourceVersion"):
            raise StatusError(500, "resourceVersion should not be set on objects to be created")
        if rt.namespaced:
            meta["namespace"] = namespace
            self._check_namespace(
                rt, namespace or "", meta.get("name") or meta.get("generateName", "")
            )
        else:
            meta.pop("namespace", None)
        coll = self._collection_for(rt)
        if not meta.get("name") and meta.get("generateName"):
            for _ in range(100):
                candidate = meta["generateName"] + "".join(random.choices(_NAME_CHARS, k=5))
                if (namespace or "", candidate) not in coll.objects:
                    meta["name"] = candidate
                    break
        default_on_create(rt, body)
        default_from_schema(rt, body)
        validate(rt, body)
        name = meta["name"]
        if (namespace or "", name) in coll.objects:
            raise StatusError(
                409,
                f'{rt.qualified} "{name}" already exists',
                reason="AlreadyExists",
                details=_details(rt, name),
            )
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if _tracks_generation(rt):
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(key, None)
        admitted = self._admit("CREATE", rt, None, body, None, dry_run)
        assert admitted is not None
        if rt.group == CRD_GROUP:
            admitted["status"] = crd_status(admitted, now_rfc3339())
        if dry_run:
            return admitted
        return self._commit(rt, None, admitted)

    def _check_namespace(self, rt: ResourceType, namespace: str, name: str) -> None:
        ns = self._collections[("", "namespaces")].objects.get(("", namespace))
        if ns is None:
            raise StatusError(
                404,
                f'namespaces "{namespace}" not found',
                details={"name": namespace, "kind": "namespaces"},
            )
        if _meta(ns).get("deletionTimestamp"):
            raise StatusError(
                403,
                f'{rt.qualified} "{name}" is forbidden: unable to create new content in '
                f"namespace {namespace} because it is being terminated",
                details={
                    "name": name,
                    "group": rt.group,
                    "kind": rt.plural,
                    "causes": [
                        {
                            "reason": "NamespaceTerminating",
                            "message": f"namespace {namespace} is being terminated",
                            "field": "metadata.namespace",
                        }
                    ],
                },
            )

    def _update(
        self,
        rt: ResourceType,
        old: JsonObj,
        body: JsonObj,
        *,
        subresource: str | None,
        dry_run: bool,
        keep_managed: bool = True,
    ) -> JsonObj:
        old_meta = _meta(old)
        name = old_meta["name"]
        rv = _meta(body).get("resourceVersion")
        if rv and rv != old_meta.get("resourceVersion"):
            raise _conflict(rt, name)
        if subresource == "status":
            new = {**old, "apiVersion": rt.api_version, "metadata": dict(old_meta)}
            if "status" in body:
                new["status"] = body["status"]
            else:
                new.pop("status", None)
            if not keep_managed:
                new["metadata"]["managedFields"] = _meta(body).get("managedFields", [])
        elif subresource is not None:
            raise StatusError(404, "the server could not find the requested resource")
        else:
            new = body
            new["apiVersion"], new["kind"] = rt.api_version, rt.kind
            meta = new.setdefault("metadata", {})
            for key in (
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ):
                if key in old_meta:
                    meta[key] = old_meta[key]
                else:
                    meta.pop(key, None)
            if keep_managed and "managedFields" not in meta and "managedFields" in old_meta:
                meta["managedFields"] = old_meta["managedFields"]
            if rt.status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            default_from_schema(rt, new)
            validate(rt, new)
        new_meta = new["metadata"]
        new_meta["resourceVersion"] = old_meta.get("resourceVersion")
        admitted = self._admit("UPDATE", rt, subresource, new, self._present(rt, old), dry_run)
        assert admitted is not None
        admitted["metadata"].update(
            {
                k: old_meta[k]
                for k in ("uid", "creationTimestamp", "resourceVersion")
                if k in old_meta
            }
        )
        if rt.group == CRD_GROUP:
            admitted["status"] = crd_status(admitted, established_at(old) or now_rfc3339())
        if _tracks_generation(rt) and _spec_part(admitted, not rt.status) != _spec_part(
            old, not rt.status
        ):
            admitted["metadata"]["generation"] = int(old_meta.get("generation", 1)) + 1
        if self._same(admitted, old):
            return self._present(rt, old)
        if dry_run:
            return admitted
        if _meta(admitted).get("deletionTimestamp") and not _meta(admitted).get("finalizers"):
            committed = self._commit(rt, old, admitted)
            self._remove(rt, committed)
            return committed
        return self._commit(rt, old, admitted)

    def _same(self, new: JsonObj, old: JsonObj) -> bool:
        return new == old or ({**new, "apiVersion": None} == {**old, "apiVersion": None})

    def _delete(
        self, rt: ResourceType, old: JsonObj, *, dry_run: bool, policy: str
    ) -> JsonObj | None:
        meta = _meta(old)
        if rt.builtin and rt.kind == "Namespace" and rt.group == "":
            return self._delete_namespace(old, dry_run=dry_run)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return old
            new_meta = {**meta, "deletionTimestamp": now_rfc3339(), "deletionGracePeriodSeconds": 0}
            if _tracks_generation(rt):
                new_meta["generation"] = int(meta.get("generation", 1)) + 1
            new = {**old, "metadata": new_meta}
            if dry_run:
                return new
            return self._commit(rt, old, new)
        if dry_run:
            return None
        self._remove(rt, old, policy=policy)
        return None

    def _delete_namespace(self, ns: JsonObj, *, dry_run: bool) -> JsonObj:
        meta = _meta(ns)
        rt = self._registry.get("", "v1", "namespaces")
        assert rt is not None
        terminating = {
            **ns,
            "metadata": {
                **meta,
                "deletionTimestamp": meta.get("deletionTimestamp") or now_rfc3339(),
            },
            "status": {**ns.get("status", {}), "phase": "Terminating"},
        }
        if dry_run:
            return terminating
        if not meta.get("deletionTimestamp"):
            terminating = self._commit(rt, ns, terminating)
        name = meta["name"]
        for storage_key, coll in list(self._collections.items()):
            members = [o for (n, _), o in coll.objects.items() if n == name]
            if not members:
                continue
            member_rt = self._registry.preferred(*storage_key)
            if member_rt is None:
                continue
            for obj in members:
                current = coll.objects.get((name, _meta(obj)["name"]))
                if current is not None:
                    self._delete(member_rt, current, dry_run=False, policy="Background")
        self._finalize_namespace(name)
        return terminating

    def _finalize_namespace(self, name: str) -> None:
        namespaces = self._collections[("", "namespaces")]
        ns = namespaces.objects.get(("", name))
        if ns is None or not _meta(ns).get("deletionTimestamp") or _meta(ns).get("finalizers"):
            return
        if any(n == name for coll in self._collections.values() for (n, _) in coll.objects):
            return
        rt = self._registry.get("", "v1", "namespaces")
        assert rt is not None
        self._remove(rt, ns)

    def _remove(self, rt: ResourceType, obj: JsonObj, *, policy: str = "Background") -> None:
        """Delete for good: event, indexes, dependents, CRD unregistration, namespace cleanup."""
        coll = self._collection_for(rt)
        meta = _meta(obj)
        key = (meta.get("namespace") or "", meta["name"])
        if coll.objects.get(key) is None:
            return
        self._rv += 1
        last = {**obj, "metadata": {**meta, "resourceVersion": str(self._rv)}}
        del coll.objects[key]
        coll.encoded.pop(meta.get("uid") or "", None)
        self._record(rt, coll, _Event(self._rv, "DELETED", last, obj))
        self._unindex(obj)
        uid = meta.get("uid")
        if rt.group == CRD_GROUP:
            self._unserve_crd(obj)
        for storage_key, dep_key in sorted(self._dependents.pop(uid, set()) if uid else ()):
            dep_coll = self._collections.get(storage_key)
            dep_rt = self._registry.preferred(*storage_key)
            dependent = dep_coll.objects.get(dep_key) if dep_coll else None
            if dependent is None or dep_rt is None:
                continue
            refs = _meta(dependent).get("ownerReferences") or []
            if policy == "Orphan":
                kept = [r for r in refs if r.get("uid") != uid]
                self._commit(
                    dep_rt,
                    dependent,
                    {**dependent, "metadata": {**_meta(dependent), "ownerReferences": kept}},
                )
            elif not any(r.get("uid") in self._uids for r in refs if r.get("uid") != uid):
                self._delete(dep_rt, dependent, dry_run=False, policy="Background")
        if key[0]:
            self._finalize_namespace(key[0])

    def _commit(self, rt: ResourceType, old: JsonObj | None, new: JsonObj) -> JsonObj:
        """Store ``new`` (replacing ``old``) with a fresh resourceVersion; record the event."""
        coll = self._collection_for(rt)
        self._rv += 1
        new["metadata"]["resourceVersion"] = str(self._rv)
        meta = new["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        coll.objects[key] = new
        if old is not None:
            self._unindex(old)
            coll.encoded.pop(_meta(old).get("uid") or "", None)
        self._index(rt, key, new)
        self._record(rt, coll, _Event(self._rv, "ADDED" if old is None else "MODIFIED", new, old))
        if rt.group == CRD_GROUP:
            self._serve_crd(new)
        return new

    def _record(self, rt: ResourceType, coll: _Collection, event: _Event) -> None:
        coll.history.append(event)
        if len(coll.history) > 2 * self.history_size:
            cut = len(coll.history) - self.history_size
            coll.compacted_rv = coll.history[cut - 1].rv
            del coll.history[:cut]
            stale = [
                k
                for k, s in self._snapshots.items()
                if s.storage_key == rt.storage_key and s.rv < coll.compacted_rv
            ]
            for k in stale:
                del self._snapshots[k]
        if not self._local.quiet and self._reactors:
            self._local.pending.append((event.type, rt, event.obj, event.prev))

    def _index(self, rt: ResourceType, key: Key, obj: JsonObj) -> None:
        meta = _meta(obj)
        uid = meta.get("uid")
        if uid:
            self._uids[uid] = (rt.storage_key, key)
        for ref in meta.get("ownerReferences") or ():
            owner = ref.get("uid") if isinstance(ref, dict) else None
            if owner:
                self._dependents.setdefault(owner, set()).add((rt.storage_key, key))

    def _unindex(self, obj: JsonObj) -> None:
        meta = _meta(obj)
        uid = meta.get("uid")
        if uid:
            self._uids.pop(uid, None)
        key = (meta.get("namespace") or "", meta.get("name", ""))
        for ref in meta.get("ownerReferences") or ():
            owner = ref.get("uid") if isinstance(ref, dict) else None
            deps = self._dependents.get(owner) if isinstance(owner, str) else None
            if deps and isinstance(owner, str):
                deps.difference_update({d for d in deps if d[1] == key})
                if not deps:
                    del self._dependents[owner]

    def _put_raw(self, obj: JsonObj, *, creation: str, react: bool) -> JsonObj:
        rt = self._registry.for_object(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise StatusError(422, f"{rt.kind}: metadata.name: Required value")
        if rt.namespaced:
            namespace = meta.get("namespace") or "default"
            meta["namespace"] = namespace
            if ("", namespace) not in self._collection_for(
                self._registry.get("", "v1", "namespaces")
            ).objects:
                self._put_raw(_namespace(namespace), creation=creation, react=react)
        else:
            meta.pop("namespace", None)
        coll = self._collection_for(rt)
        key = (meta.get("namespace") or "", meta["name"])
        old = coll.objects.get(key)
        if old is not None:
            for k in ("uid", "creationTimestamp"):
                if k in _meta(old):
                    meta.setdefault(k, _meta(old)[k])
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", creation)
        if _tracks_generation(rt):
            meta.setdefault("generation", 1)
        if rt.group == CRD_GROUP:
            obj["status"] = crd_status(obj, creation)
        if react:
            return self._commit(rt, old, obj)
        quiet = self._local.quiet
        self._local.quiet = True
        try:
            return self._commit(rt, old, obj)
        finally:
            self._local.quiet = quiet

    # -- custom resource definitions ---------------------------------------------------------

    def _serve_crd(self, crd: JsonObj) -> None:
        identity = crd_identity(crd)
        if identity is None:
            return
        self._registry.remove(*identity)
        if not _meta(crd).get("deletionTimestamp"):
            for rt in served_types(crd):
                self._registry.add(rt)

    def _unserve_crd(self, crd: JsonObj) -> None:
        identity = crd_identity(crd)
        if identity is None:
            return
        removed = self._registry.remove(*identity)
        coll = self._collections.get(identity)
        if coll is not None and removed:
            for obj in list(coll.objects.values()):
                self._remove(removed[0], obj)


_MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def _details(rt: ResourceType, name: str) -> JsonObj:
    if rt.group:
        return {"name": name, "group": rt.group, "kind": rt.plural}
    return {"name": name, "kind": rt.plural}


def _conflict(rt: ResourceType, name: str, why: str = _MODIFIED) -> StatusError:
    message = f'Operation cannot be fulfilled on {rt.qualified} "{name}": {why}'
    return StatusError(409, message, details=_details(rt, name))


def _get_path(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _set_path(obj: JsonObj, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        obj = obj.setdefault(part, {})
    obj[last] = value


def _selector_text(selector: Any) -> str:
    """A LabelSelector object as selector text (``app=web,tier in (a,b)``)."""
    if isinstance(selector, str):
        return selector
    if not isinstance(selector, dict):
        return ""
    terms = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op in {"In", "NotIn"}:
            terms.append(f"{key} {op.lower()} ({','.join(values)})")
        elif op == "Exists":
            terms.append(str(key))
        elif op == "DoesNotExist":
            terms.append(f"!{key}")
    return ",".join(terms)


def _scale_of(rt: ResourceType, obj: JsonObj) -> JsonObj:
    """The ``autoscaling/v1`` Scale view of an object with a scale subresource."""
    assert rt.scale is not None
    spec_path, status_path, selector_path = rt.scale
    meta = _meta(obj)
    status: JsonObj = {"replicas": _get_path(obj, status_path) or 0}
    selector = _selector_text(_get_path(obj, selector_path)) if selector_path else ""
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": _get_path(obj, spec_path) or 0},
        "status": status,
    }


def _namespace(name: str) -> JsonObj:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


#: seconds before a watch's timeout at which the real watch cache sends its last bookmark.
_PRETIMEOUT_BOOKMARK = 2.0


def _next_bookmark(now: float, interval: float, pretimeout: float) -> float:
    """When a watch's next BOOKMARK is due: ``interval`` from ``now``, or at ``pretimeout``
    (2 s before the watch's timeout) when that comes first and is still ahead."""
    due = now + interval
    return pretimeout if now < pretimeout < due else due
