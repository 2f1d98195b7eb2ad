"""Where workloads already are: placer's own copies on the members, found by their record.

Re-submitting a workload must not create a second copy elsewhere. Before deciding (and again
while holding the workloads' claims, :mod:`placer.dispatch.claims`), :func:`find_existing`
looks, per member cluster and per (kind, namespace) of the workloads at hand, for the objects
that exist — one list call each, or one get per workload when there are at most
:data:`GETS_INSTEAD_OF_LIST` of them (a few workloads submitted into a namespace holding
thousands; a caller narrowing the lists with a label selector always lists), concurrently per
cluster — and returns every copy of each
workload with its placement record (``None`` when something of that name exists there that
placer did not place: a user's own object, which placer must not take over).

A cluster that cannot be listed (unreachable, forbidden) is reported in ``unknown``: a copy
there cannot be ruled out. A kind the cluster does not serve simply has no copy there.

The rules for what is found (:func:`settle_existing`): a copy with placer's record stays where
it is (``unchanged``; a new member of its ``placer.dev/group`` is pinned to the same cluster);
someone else's object of that name, or a copy another placer placed, blocks the workload
(``failed``), so that it never runs twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from placer.dispatch.outcomes import FAILED, UNCHANGED, Manifest, Outcome
from placer.dispatch.record import PlacementRecord
from placer.errors import KubeError, NotFoundError
from placer.kube import KubeClient
from placer.model import Placement, PodAssignment, WorkloadRef
from placer.objects import name_of, uid_of

__all__ = [
    "GETS_INSTEAD_OF_LIST",
    "Existing",
    "ExistingCopies",
    "OwnCopy",
    "find_existing",
    "placement_from_record",
    "settle_existing",
]

#: workloads of one kind and namespace up to which they are read one by one, not listed.
GETS_INSTEAD_OF_LIST = 8


@dataclass(frozen=True)
class Existing:
    """A copy of a workload found on a member cluster."""

    cluster: str
    object: Mapping[str, Any]
    #: placer's record on it; ``None`` when placer did not place it.
    record: PlacementRecord | None

    @property
    def uid(self) -> str:
        return uid_of(self.object)


#: ``own_copy(manifest, existing)``: whether a copy with placer's record is this workload.
OwnCopy = Callable[[Manifest, Existing], bool]


@dataclass(frozen=True)
class ExistingCopies:
    """What :func:`find_existing` found."""

    copies: Mapping[WorkloadRef, tuple[Existing, ...]] = field(default_factory=dict)
    #: cluster -> why it could not be checked.
    unknown: Mapping[str, str] = field(default_factory=dict)

    def of(self, ref: WorkloadRef) -> tuple[Existing, ...]:
        return self.copies.get(ref, ())


def find_existing(
    clients: Mapping[str, KubeClient],
    refs: Iterable[WorkloadRef],
    *,
    label_selector: str | None = None,
) -> ExistingCopies:
    """Every copy of ``refs`` on the clusters of ``clients`` (see the module docstring).

    ``label_selector`` narrows the lists (a controller leaves out its own copies, which its
    informers track); with it, every (kind, namespace) is listed.
    """
    wanted = set(refs)
    groups: dict[tuple[str, str, str], list[WorkloadRef]] = {}
    for ref in sorted(wanted, key=lambda r: (r.api_version, r.kind, r.namespace, r.name)):
        groups.setdefault((ref.api_version, ref.kind, ref.namespace), []).append(ref)
    if not groups or not clients:
        return ExistingCopies()

    def scan(name: str, client: KubeClient) -> tuple[str, list[tuple[WorkloadRef, Existing]] | str]:
        found: list[tuple[WorkloadRef, Existing]] = []
        for (api_version, kind, namespace), members in groups.items():
            try:
                items = _read(client, api_version, kind, namespace, members, label_selector)
            except NotFoundError:  # the kind is not served there
                continue
            except KubeError as err:
                prefix = f"cluster {name}: "
                text = err.message
                return name, text[len(prefix) :] if text.startswith(prefix) else text
            for item in items:
                ref = WorkloadRef(api_version, kind, namespace, name_of(item))
                if ref in wanted:
                    found.append((ref, Existing(name, item, PlacementRecord.from_object(item))))
        return name, found

    copies: dict[WorkloadRef, list[Existing]] = {}
    unknown: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=min(16, len(clients)), thread_name_prefix="find") as pool:
        results = list(pool.map(lambda item: scan(*item), clients.items()))
    for name, result in results:
        if isinstance(result, str):
            unknown[name] = result
            continue
        for ref, existing in result:
            copies.setdefault(ref, []).append(existing)
    return ExistingCopies({k: tuple(v) for k, v in copies.items()}, unknown)


def _read(
    client: KubeClient,
    api_version: str,
    kind: str,
    namespace: str,
    refs: list[WorkloadRef],
    label_selector: str | None,
) -> Sequence[Mapping[str, Any]]:
    """The objects of ``refs`` (one kind and namespace) that exist: read one by one when they
    are few, else listed.

    Raises:
        NotFoundError: the kind is not served.
    """
    if label_selector is not None or len(refs) > GETS_INSTEAD_OF_LIST:
        listed = client.list(api_version, kind, namespace=namespace, label_selector=label_selector)
        return listed.items
    client.resource(api_version, kind)  # NotFoundError when the kind is not served
    items: list[Mapping[str, Any]] = []
    for ref in refs:
        try:
            items.append(client.get(api_version, kind, ref.name, namespace=namespace))
        except NotFoundError:
            continue
    return items


def settle_existing(
    manifests: Sequence[Manifest],
    existing: ExistingCopies,
    *,
    own: OwnCopy | None = None,
) -> tuple[list[Manifest], dict[WorkloadRef, Outcome]]:
    """Workloads still to decide, and the outcomes of those that already exist somewhere.

    A copy with placer's record (that ``own`` accepts, when given): ``unchanged`` (it stays
    there; a new member of its ``placer.dev/group`` is pinned to the same cluster). Other
    copies (someone else's object, or placer's placed by a caller ``own`` rejects):
    ``failed``, placed nowhere, so that it cannot run twice.
    """
    settled: dict[WorkloadRef, Outcome] = {}
    group_cluster: dict[str, str] = {}
    for manifest in manifests:
        copies = existing.of(manifest.ref)
        if not copies:
            continue
        ours = [c for c in copies if c.record is not None and (own is None or own(manifest, c))]
        if ours:
            copy = ours[0]
            record = copy.record
            assert record is not None
            note: tuple[str, ...] = ()
            if len(copies) > 1:
                others = ", ".join(c.cluster for c in copies if c is not copy)
                note = (f"also found on {others}: check for a duplicate",)
            settled[manifest.ref] = Outcome(
                manifest.ref,
                UNCHANGED,
                cluster=copy.cluster,
                placement=placement_from_record(manifest, copy.cluster, record),
                record=record,
                uid=copy.uid,
                notes=note,
            )
            if manifest.workload.group:
                group_cluster[manifest.workload.group] = copy.cluster
        elif any(c.record is not None for c in copies):
            placed = next(c for c in copies if c.record is not None)
            assert placed.record is not None
            settled[manifest.ref] = Outcome(
                manifest.ref,
                FAILED,
                cluster=placed.cluster,
                error=(
                    f"already placed on cluster {placed.cluster} by another placer "
                    f"(decision {placed.record.decision}), not by this one; not placed again, "
                    "so that it cannot run twice: delete that copy to place it from here"
                ),
            )
        else:
            where = ", ".join(c.cluster for c in copies)
            settled[manifest.ref] = Outcome(
                manifest.ref,
                FAILED,
                cluster=copies[0].cluster,
                error=(
                    f"already exists on cluster {where} without placer's placement record "
                    "(created by someone else); not placed anywhere, so that it cannot run "
                    "twice: delete it there, or rename the workload"
                ),
            )
    todo: list[Manifest] = []
    for manifest in manifests:
        if manifest.ref in settled:
            continue
        group = manifest.workload.group
        if group and group in group_cluster:
            workload = replace(manifest.workload, pinned_cluster=group_cluster[group])
            decomposition = replace(manifest.decomposition, workload=workload)
            manifest = replace(manifest, decomposition=decomposition)
        todo.append(manifest)
    return todo, settled


def placement_from_record(manifest: Manifest, cluster: str, record: PlacementRecord) -> Placement:
    """The placement ``record`` describes for ``manifest`` on ``cluster``: every pod on the node
    the record's plan names for it (``""`` where the plan names none)."""
    workload = manifest.workload
    pods = []
    for component in workload.components:
        planned = record.plan.get(component.label, ())
        for index in range(component.replicas):
            node = planned[index] if index < len(planned) else ""
            pods.append(
                PodAssignment(
                    component.name, component.instance, index, node, dict(component.pod.requests)
                )
            )
    return Placement(workload.ref, cluster, tuple(pods), workload.total_requests())
