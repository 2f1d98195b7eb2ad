"""Resource types the loopback API server serves, and the discovery documents that list them.

A :class:`ResourceType` is one group/version/resource (GVR) with the facts clients learn from
discovery: kind, plural, scope, short names, whether a ``/status`` subresource exists, and which
field labels its list and watch accept in ``fieldSelector``. Built-in kinds are preregistered with
the real server's field labels; custom resources are registered at run time (directly, or by
creating a ``CustomResourceDefinition`` object, as on a real cluster).

Storage is keyed by group and plural, not by version: an object written through one served
version is visible through every other served version of the same resource (with its
``apiVersion`` rewritten, no conversion), as with a CRD whose conversion strategy is ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from placer.testing._status import StatusError

__all__ = ["BUILTIN_RESOURCES", "Registry", "ResourceType", "version_priority"]

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_STATUS_VERBS = ["get", "patch", "update"]


@dataclass(frozen=True)
class ResourceType:
    """One served group/version/resource.

    Attributes:
        group: API group, ``""`` for the core group.
        version: API version (``v1``, ``v1alpha2``).
        kind: object kind (``JobSet``).
        plural: resource name in URLs (``jobsets``).
        namespaced: namespace-scoped (``True``) or cluster-scoped.
        status: has a ``/status`` subresource (main-resource writes then ignore ``.status``, and
            ``/status`` writes touch nothing else).
        short_names: kubectl short names (``js``).
        singular: singular name, defaults to ``kind.lower()``.
        categories: discovery categories (``all`` makes ``kubectl get all`` show it).
        builtin: a built-in kind: strategic merge patch accepted, lists omit item kinds, DELETE
            answers the deleted object; custom resources get 415 on strategic merge and a
            ``Status`` on DELETE.
        field_labels: field labels accepted by ``fieldSelector`` besides ``metadata.name`` and
            ``metadata.namespace`` (dotted paths into the object).
        scale: the ``/scale`` subresource, as dotted paths ``(spec replicas, status replicas,
            label selector)``; the selector path is ``""`` when there is none and
            ``"spec.selector"`` for built-ins (a LabelSelector object); ``None``: no scale.
        schema: a custom resource version's ``openAPIV3Schema`` as JSON text (``""``: none); the
            server applies its ``default`` values on create and update, as a real one does.
    """

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True
    status: bool = True
    short_names: tuple[str, ...] = ()
    singular: str = ""
    categories: tuple[str, ...] = ()
    builtin: bool = False
    field_labels: tuple[str, ...] = field(default=())
    scale: tuple[str, str, str] | None = None
    schema: str = ""

    def __post_init__(self) -> None:
        if not self.singular:
            object.__setattr__(self, "singular", self.kind.lower())

    @property
    def api_version(self) -> str:
        """``apiVersion`` of objects of this type (``v1``, ``apps/v1``)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``plural.group`` as used in error messages (``jobsets.jobset.x-k8s.io``, ``pods``)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def storage_key(self) -> tuple[str, str]:
        """Group and plural: all versions of one resource share one storage."""
        return (self.group, self.plural)

    @property
    def base_path(self) -> str:
        """URL prefix of the group/version (``/api/v1``, ``/apis/apps/v1``)."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


def _core(kind: str, plural: str, **kw: object) -> ResourceType:
    return ResourceType("", "v1", kind, plural, builtin=True, **kw)  # type: ignore[arg-type]


def _builtin(group: str, version: str, kind: str, plural: str, **kw: object) -> ResourceType:
    return ResourceType(group, version, kind, plural, builtin=True, **kw)  # type: ignore[arg-type]


_WORKLOAD_SCALE = ("spec.replicas", "status.replicas", "spec.selector")

_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)

#: Built-in resources every server starts with (field labels as the real registries define).
BUILTIN_RESOURCES: tuple[ResourceType, ...] = (
    _core(
        "Namespace",
        "namespaces",
        namespaced=False,
        short_names=("ns",),
        field_labels=("status.phase",),
    ),
    _core(
        "Node", "nodes", namespaced=False, short_names=("no",), field_labels=("spec.unschedulable",)
    ),
    _core(
        "Pod",
        "pods",
        short_names=("po",),
        categories=("all",),
        field_labels=(
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ),
    ),
    _core("Event", "events", status=False, short_names=("ev",), field_labels=_EVENT_FIELDS),
    _core("Service", "services", short_names=("svc",), categories=("all",)),
    _core("ConfigMap", "configmaps", status=False, short_names=("cm",)),
    _core("Secret", "secrets", status=False, field_labels=("type",)),
    _core("ServiceAccount", "serviceaccounts", status=False, short_names=("sa",)),
    _core("ResourceQuota", "resourcequotas", short_names=("quota",)),
    _core("PersistentVolumeClaim", "persistentvolumeclaims", short_names=("pvc",)),
    _core("PersistentVolume", "persistentvolumes", namespaced=False, short_names=("pv",)),
    _builtin(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        short_names=("deploy",),
        categories=("all",),
        scale=_WORKLOAD_SCALE,
    ),
    _builtin(
        "apps",
        "v1",
        "StatefulSet",
        "statefulsets",
        short_names=("sts",),
        categories=("all",),
        scale=_WORKLOAD_SCALE,
    ),
    _builtin(
        "apps",
        "v1",
        "ReplicaSet",
        "replicasets",
        short_names=("rs",),
        categories=("all",),
        field_labels=("status.replicas",),
        scale=_WORKLOAD_SCALE,
    ),
    _builtin("apps", "v1", "DaemonSet", "daemonsets", short_names=("ds",), categories=("all",)),
    _builtin(
        "batch", "v1", "Job", "jobs", categories=("all",), field_labels=("status.successful",)
    ),
    _builtin("batch", "v1", "CronJob", "cronjobs", short_names=("cj",), categories=("all",)),
    _builtin("coordination.k8s.io", "v1", "Lease", "leases", status=False),
    _builtin("events.k8s.io", "v1", "Event", "events", status=False, short_names=("ev",)),
    _builtin(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        namespaced=False,
        status=False,
        short_names=("pc",),
    ),
    # Dynamic Resource Allocation (Kubernetes 1.34 serves resource.k8s.io/v1)
    _builtin(
        "resource.k8s.io", "v1", "DeviceClass", "deviceclasses", namespaced=False, status=False
    ),
    _builtin("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims"),
    _builtin(
        "resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", status=False
    ),
    _builtin(
        "resource.k8s.io",
        "v1",
        "ResourceSlice",
        "resourceslices",
        namespaced=False,
        status=False,
        field_labels=("spec.nodeName", "spec.driver"),
    ),
    _builtin(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        namespaced=False,
        short_names=("crd", "crds"),
    ),
)

_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key putting versions in Kubernetes priority order (``v2 > v1 > v1beta2 > v1alpha1``)."""
    m = _KUBE_VERSION.match(version)
    if not m:
        return (3, 0, 0, version)
    major = int(m.group(1))
    stage = {"alpha": 2, "beta": 1, None: 0}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor, version)


class Registry:
    """The resource types one server serves, with name resolution and discovery documents.

    Not thread-safe on its own; the store guards it with its lock.
    """

    def __init__(self) -> None:
        self._by_gvr: dict[tuple[str, str, str], ResourceType] = {}
        for rt in BUILTIN_RESOURCES:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        """Serve ``rt`` (replacing a previous registration of the same group/version/plural)."""
        self._by_gvr[(rt.group, rt.version, rt.plural)] = rt

    def remove(self, group: str, plural: str) -> list[ResourceType]:
        """Stop serving every version of ``plural.group``; returns what was removed."""
        gone = [rt for key, rt in self._by_gvr.items() if key[0] == group and key[2] == plural]
        for rt in gone:
            del self._by_gvr[(rt.group, rt.version, rt.plural)]
        return gone

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._by_gvr.values()))

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The type served at ``group/version/plural``, or ``None``."""
        return self._by_gvr.get((group, version, plural))

    def versions(self, group: str) -> list[str]:
        """Versions served for ``group``, preferred first."""
        found = {v for (g, v, _p) in self._by_gvr if g == group}
        return sorted(found, key=version_priority)

    def groups(self) -> list[str]:
        """Named groups (not the core group), built-in ones first, then in registration order."""
        seen: dict[str, None] = {}
        for g, _v, _p in self._by_gvr:
            if g:
                seen.setdefault(g, None)
        return list(seen)

    def in_version(self, group: str, version: str) -> list[ResourceType]:
        """Types served in one group/version, in registration order."""
        return [rt for (g, v, _p), rt in self._by_gvr.items() if g == group and v == version]

    def preferred(self, group: str, plural: str) -> ResourceType | None:
        """The preferred served version of ``plural.group``."""
        for version in self.versions(group):
            rt = self._by_gvr.get((group, version, plural))
            if rt is not None:
                return rt
        return None

    def for_object(self, api_version: str, kind: str) -> ResourceType:
        """The type of an object with this ``apiVersion`` and ``kind``.

        Raises:
            StatusError: 404 when no such kind is served (as ``kubectl`` reports it: no matches
                for kind).
        """
        group, _, version = api_version.rpartition("/")
        for (g, v, _p), rt in self._by_gvr.items():
            if g == group and v == version and rt.kind == kind:
                return rt
        raise StatusError(
            404, f'no matches for kind "{kind}" in version "{api_version}"', reason="NotFound"
        )

    def resolve(self, name: str) -> ResourceType:
        """Resolve a resource name as kubectl does.

        Accepts a plural, singular, kind or short name, optionally qualified by group
        (``jobsets.jobset.x-k8s.io``) or version and group (``deployments.v1.apps``). The core
        group wins on ambiguity (``events`` is core ``Event``), like kubectl.

        Raises:
            StatusError: 404 when nothing matches.
        """
        candidates: list[ResourceType] = []
        lowered = name.lower()
        for rt in self._preferred_first():
            names = {rt.plural, rt.singular, rt.kind.lower(), *rt.short_names}
            for n in names:
                if lowered in (n, f"{n}.{rt.group}", f"{n}.{rt.version}.{rt.group}"):
                    candidates.append(rt)
                    break
        if not candidates:
            raise StatusError(
                404, f'the server doesn\'t have a resource type "{name}"', reason="NotFound"
            )
        candidates.sort(key=lambda rt: (rt.group != "", not rt.builtin))
        return candidates[0]

    def _preferred_first(self) -> Iterable[ResourceType]:
        seen: set[tuple[str, str]] = set()
        ordered: list[ResourceType] = []
        for group in ["", *self.groups()]:
            for version in self.versions(group):
                for rt in self.in_version(group, version):
                    if rt.storage_key not in seen:
                        seen.add(rt.storage_key)
                        ordered.append(rt)
        return ordered

    # -- discovery documents -------------------------------------------------------------

    def api_resource_list(self, group: str, version: str) -> dict[str, object] | None:
        """``APIResourceList`` for one group/version, or ``None`` when it is not served."""
        types = self.in_version(group, version)
        if not types:
            return None
        resources: list[dict[str, object]] = []
        for rt in types:
            entry: dict[str, object] = {
                "name": rt.plural,
                "singularName": rt.singular,
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": list(_VERBS),
            }
            if rt.short_names:
                entry["shortNames"] = list(rt.short_names)
            if rt.categories:
                entry["categories"] = list(rt.categories)
            resources.append(entry)
            if rt.status:
                resources.append(
                    {
                        "name": f"{rt.plural}/status",
                        "singularName": "",
                        "namespaced": rt.namespaced,
                        "kind": rt.kind,
                        "verbs": list(_STATUS_VERBS),
                    }
                )
            if rt.plural == "pods" and not rt.group:
                resources.append(
                    {
                        "name": "pods/log",
                        "singularName": "",
                        "namespaced": True,
                        "kind": "Pod",
                        "verbs": ["get"],
                    }
                )
            if rt.scale:
                resources.append(
                    {
                        "name": f"{rt.plural}/scale",
                        "singularName": "",
                        "namespaced": rt.namespaced,
                        "group": "autoscaling",
                        "version": "v1",
                        "kind": "Scale",
                        "verbs": list(_STATUS_VERBS),
                    }
                )
        gv = f"{group}/{version}" if group else version
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": gv,
            "resources": resources,
        }

    def api_group(self, group: str) -> dict[str, object] | None:
        """``APIGroup`` for one named group, or ``None`` when it is not served."""
        versions = self.versions(group)
        if not group or not versions:
            return None
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": group,
            "versions": entries,
            "preferredVersion": entries[0],
        }

    def api_group_list(self) -> dict[str, object]:
        """``APIGroupList`` of every named group."""
        groups = []
        for group in self.groups():
            doc = self.api_group(group)
            if doc is not None:
                doc.pop("kind")
                doc.pop("apiVersion")
                groups.append(doc)
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
