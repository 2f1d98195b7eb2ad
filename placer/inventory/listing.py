"""The fleet-wide view: every workload of the catalog's kinds on every member cluster.

:func:`list_workloads` lists, concurrently per cluster, the objects of each catalog kind (or
of the kinds asked for) in one namespace or all, reads each through its definition (phase,
components, GPUs) and its placement record. Rules:

* **top-level only** (spec section 7.2): an object whose controller owner reference is itself
  of a catalog kind (a JobSet's Jobs, a Deployment's pods through its ReplicaSet, an LWS's
  StatefulSets) is part of that workload, not a workload of its own; a Pod with any controller
  is never listed; the virtual fleet's stand-in usage pods (label ``placer.dev/usage``) neither;
* one object served under two versions (two definitions of one kind) is listed once (by uid);
* a kind a cluster does not serve is skipped silently; a cluster that cannot be read, or a
  kind it forbids listing, is a warning, and the other clusters are still shown.

:func:`find_workload` finds one named workload on every cluster (for ``describe``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from placer.accelerators import AcceleratorTable, gpu_text, mig_slices
from placer.definitions import Catalog, Decomposition, Definition, decompose
from placer.dispatch.record import PlacementRecord
from placer.errors import (
    ClusterUnreachableError,
    KubeError,
    NotFoundError,
    PlacerError,
    UnknownTypeError,
    WorkloadNotFoundError,
)
from placer.kube import KubeClient
from placer.model import GPU_SHARE
from placer.objects import labels_of, meta, name_of, namespace_of, owner_references_of, uid_of
from placer.quantity import GPU
from placer.timestamps import parse_rfc3339

__all__ = [
    "Inventory",
    "LiveWorkload",
    "UnknownTypeError",
    "WorkloadNotFoundError",
    "age",
    "components_text",
    "covered_kinds",
    "find_workload",
    "list_workloads",
    "live_workload",
    "resolve_type",
    "resolve_type_on",
    "top_level",
]

_USAGE_LABEL = "placer.dev/usage"


@dataclass(frozen=True)
class LiveWorkload:
    """A workload as it is on one member cluster."""

    cluster: str
    object: Mapping[str, Any]
    definition: Definition
    #: ``None`` when the object does not fit its definition (``problem`` says why).
    decomposition: Decomposition | None
    record: PlacementRecord | None
    problem: str = ""
    #: the catalog's accelerator table (time-sliced GPUs shown as the share they are).
    accelerators: AcceleratorTable | None = None

    @property
    def metadata(self) -> Mapping[str, Any]:
        return meta(self.object)

    @property
    def name(self) -> str:
        return name_of(self.object)

    @property
    def namespace(self) -> str:
        return namespace_of(self.object)

    @property
    def kind(self) -> str:
        return str(self.object.get("kind", ""))

    @property
    def uid(self) -> str:
        return uid_of(self.object)

    @property
    def phases(self) -> tuple[str, ...]:
        return self.decomposition.phases if self.decomposition else ("Unknown",)

    @property
    def requests(self) -> dict[str, int]:
        """What all its desired pods ask (empty when it does not fit its definition)."""
        total: dict[str, int] = {}
        for c in self.decomposition.components if self.decomposition is not None else ():
            for name, amount in c.pod.requests.items():
                total[name] = total.get(name, 0) + amount * c.replicas
        return total

    @property
    def gpus(self) -> float:
        """Whole GPUs and shares of one device (MIG slices aside: :attr:`gpu_text`)."""
        requests = self.requests
        return requests.get(GPU, 0) + requests.get(GPU_SHARE, 0) / 1000

    @property
    def gpu_text(self) -> str:
        """The GPU cell: :func:`placer.accelerators.gpu_text` (``12``, ``2×mig-1g.10gb``)."""
        return gpu_text(self.requests, self.accelerators)

    def to_dict(self) -> dict[str, Any]:
        d = self.decomposition
        return {
            "cluster": self.cluster,
            "apiVersion": self.object.get("apiVersion"),
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "createdAt": self.metadata.get("creationTimestamp"),
            "definition": self.definition.name,
            "phase": list(self.phases),
            "components": [
                {"name": c.name, "instance": c.instance, "replicas": c.replicas}
                for c in (d.components if d else ())
            ],
            "gpus": self.gpus,
            **({"migSlices": mig} if (mig := mig_slices(self.requests)) else {}),
            "placement": self.record.to_dict() if self.record else None,
            **({"problem": self.problem} if self.problem else {}),
        }


@dataclass(frozen=True)
class Inventory:
    """What :func:`list_workloads` found, and what it could not read."""

    workloads: tuple[LiveWorkload, ...]
    warnings: tuple[str, ...] = field(default_factory=tuple)
    #: the clusters that could not be reached at all (nothing was read from them).
    unreachable: tuple[str, ...] = field(default_factory=tuple)


def resolve_type(token: str, catalog: Catalog) -> list[Definition]:
    """The definitions a type token names: kind, plural, ``kind.group``, ``plural.group`` or a
    definition name (case-insensitive); all versions of the kind.

    Raises:
        UnknownTypeError: no catalog kind matches (exit 4, as for a kind no definition covers).
    """
    wanted = token.strip().lower()
    found = []
    for definition in catalog.definitions:
        target = definition.target
        if target is None:
            continue
        kind = target.kind.lower()
        names = {kind, _plural(kind), definition.name.lower()}
        if target.group:
            names |= {f"{kind}.{target.group}", f"{_plural(kind)}.{target.group}"}
        if wanted in names:
            found.append(definition)
    if not found:
        kinds = sorted({d.target.kind for d in catalog.definitions if d.target})
        raise UnknownTypeError(
            f"no workload definition covers type {token!r}",
            hint=f"use a kind of the catalog ({', '.join(kinds)}), or add a definition with "
            "--catalog DIR",
        )
    return found


def resolve_type_on(
    token: str, catalog: Catalog, clients: Mapping[str, KubeClient]
) -> list[Definition]:
    """:func:`resolve_type`, then, for a token the catalog does not name, the members' API
    discovery: the singular and short names their servers publish (``lws``, ``deploy``,
    ``isvc``), optionally qualified by group (``lws.leaderworkerset.x-k8s.io``), as kubectl
    resolves them. Only the catalog's group/versions are asked, cluster by cluster in fleet
    order until one knows the token (members may serve different CRDs).

    Raises:
        UnknownTypeError: neither the catalog nor any reachable member knows the token.
    """
    try:
        return resolve_type(token, catalog)
    except UnknownTypeError:
        if not clients:
            raise
    wanted, _, group_filter = token.strip().lower().partition(".")
    targets = [d.target for d in catalog.definitions if d.target is not None]
    api_versions = sorted({t.api_version for t in targets})
    for client in clients.values():
        try:
            served = {v: client.served_kinds(v) for v in api_versions}
        except (ClusterUnreachableError, KubeError):
            continue
        kinds = {
            (ref.group, ref.kind)
            for refs in served.values()
            for ref in refs.values()
            if wanted in ref.aliases and (not group_filter or ref.group == group_filter)
        }
        found = [
            d
            for d in catalog.definitions
            if d.target is not None and (d.target.group, d.target.kind) in kinds
        ]
        if found:
            return found
    return resolve_type(token, catalog)  # raises the catalog's UnknownTypeError


def _plural(kind: str) -> str:
    if kind.endswith(("s", "x", "ch", "sh")):
        return kind + "es"
    if kind.endswith("y") and kind[-2:-1] not in "aeiou":
        return kind[:-1] + "ies"
    return kind + "s"


def covered_kinds(catalog: Catalog) -> set[tuple[str, str]]:
    """The (group, kind) of every catalog definition's root kind."""
    return {
        (d.target.api_version.rpartition("/")[0], d.target.kind)
        for d in catalog.definitions
        if d.target
    }


def list_workloads(
    clients: Mapping[str, KubeClient],
    catalog: Catalog,
    *,
    namespace: str | None = None,
    definitions: Sequence[Definition] | None = None,
) -> Inventory:
    """Every top-level workload of ``definitions`` (default: the catalog) on every cluster."""
    chosen = list(definitions) if definitions is not None else list(catalog.definitions)
    covered = covered_kinds(catalog)
    names = list(clients)
    if not names:
        return Inventory(())

    unreachable: list[str] = []

    def scan(name: str) -> tuple[list[LiveWorkload], list[str]]:
        client = clients[name]
        found: list[LiveWorkload] = []
        warnings: list[str] = []
        seen: set[str] = set()
        for definition in chosen:
            target = definition.target
            if target is None:
                continue
            try:
                items = client.list(target.api_version, target.kind, namespace=namespace).items
            except NotFoundError:
                continue
            except ClusterUnreachableError as err:
                warnings.append(_strip(err, name))
                unreachable.append(name)
                break
            except KubeError as err:
                warnings.append(f"cluster {name}: {target.kind}: {_strip(err, name)}")
                continue
            for item in items:
                uid = uid_of(item)
                if uid in seen or not top_level(item, covered):
                    continue
                seen.add(uid)
                found.append(live_workload(name, item, definition, catalog))
        return found, warnings

    with ThreadPoolExecutor(max_workers=min(16, len(names)), thread_name_prefix="get") as pool:
        results = list(pool.map(scan, names))
    workloads: list[LiveWorkload] = []
    warnings: list[str] = []
    for found, problems in results:
        workloads += sorted(found, key=lambda w: (w.namespace, w.kind, w.name))
        warnings += problems
    return Inventory(tuple(workloads), tuple(warnings), tuple(n for n in names if n in unreachable))


def find_workload(
    clients: Mapping[str, KubeClient],
    catalog: Catalog,
    definitions: Sequence[Definition],
    name: str,
    namespace: str,
) -> Inventory:
    """The workload ``namespace/name`` of the given kinds, on every cluster that has it."""
    names = list(clients)
    unreachable: list[str] = []

    def get(cluster: str) -> tuple[list[LiveWorkload], list[str]]:
        client = clients[cluster]
        for definition in definitions:
            target = definition.target
            if target is None:
                continue
            try:
                obj = client.get(target.api_version, target.kind, name, namespace=namespace)
            except NotFoundError:
                continue
            except KubeError as err:
                if isinstance(err, ClusterUnreachableError):
                    unreachable.append(cluster)
                return [], [_strip(err, cluster)]
            return [live_workload(cluster, obj, definition, catalog)], []
        return [], []

    if not names:
        return Inventory(())
    with ThreadPoolExecutor(max_workers=min(16, len(names)), thread_name_prefix="get") as pool:
        results = list(pool.map(get, names))
    return Inventory(
        tuple(w for found, _ in results for w in found),
        tuple(p for _, problems in results for p in problems),
        tuple(n for n in names if n in unreachable),
    )


def _strip(err: KubeError, name: str) -> str:
    text = err.message
    return text if text.startswith(f"cluster {name}: ") else f"cluster {name}: {text}"


def top_level(item: Mapping[str, Any], covered: set[tuple[str, str]]) -> bool:
    """Whether ``item`` is a workload of its own (module docstring, "top-level only");
    ``covered``: the catalog's (group, kind) pairs."""
    if labels_of(item).get(_USAGE_LABEL):
        return False
    for ref in owner_references_of(item):
        if not ref.get("controller"):
            continue
        if item.get("kind") == "Pod" and item.get("apiVersion") == "v1":
            return False
        group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        if (group, ref.get("kind")) in covered:
            return False
    return True


def live_workload(
    cluster: str, obj: Mapping[str, Any], definition: Definition, catalog: Catalog
) -> LiveWorkload:
    """``obj`` on ``cluster`` read through ``definition`` (a problem instead when it does not
    fit it)."""
    record = PlacementRecord.from_object(obj)
    table = catalog.accelerators
    try:
        decomposition = decompose(obj, definition)
    except PlacerError as err:
        return LiveWorkload(cluster, obj, definition, None, record, err.message, table)
    return LiveWorkload(cluster, obj, definition, decomposition, record, accelerators=table)


def components_text(workload: LiveWorkload) -> str:
    """``leader(1), worker(2)``: instances (or components) and their desired pods."""
    if workload.decomposition is None:
        return "?"
    parts = [f"{c.instance or c.name}({c.replicas})" for c in workload.decomposition.components]
    return ", ".join(parts) or "-"


def age(timestamp: object, now: datetime | None = None) -> str:
    """kubectl-style age (``45s``, ``3m``, ``5h``, ``2d``) of an RFC 3339 timestamp."""
    then = parse_rfc3339(timestamp)
    if then is None:
        return "<unknown>"
    seconds = max(0, int((now or datetime.now(UTC)).timestamp() - then))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"
