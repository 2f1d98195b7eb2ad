"""Handing a placed workload to its member's scheduler: what the copy says, and what goes with it.

placer proves that each gang fits the member's nodes; the member's scheduler binds the pods.
:func:`plan_handoff` works out, for one placement and the member's
:class:`~placer.schedulers.SchedulerSpec`, what that scheduler needs — every pod-template change
made through the definition's template paths (:mod:`placer.definitions.templates`), so no
framework-specific code:

==============  ===============================================================================
``default``     nothing (kube-scheduler binds pods one at a time: gangs are not enforced, and
                ``plan``/``submit`` warn once, :func:`gang_warnings`)
``kai``         pods: ``schedulerName: kai-scheduler`` and the label ``kai.scheduler/queue``;
                the object: the same queue label (KAI's pod grouper reads the top owner's);
                the member: the definition as a ``run.ai/v1alpha1`` ``Karta`` when it serves
                that kind and has none for this workload kind (the pod grouper's fallback for
                kinds without a native plugin) — or a note saying why not
``kueue``       the object: the label ``kueue.x-k8s.io/queue-name`` (a LocalQueue of the
                workload's namespace); created suspended where the definition can suspend it,
                so that Kueue admits it there (else Kueue's webhook must suspend it); a
                warning when that LocalQueue is not on the member (:func:`check_queue`; KAI's
                and Volcano's Queues are checked likewise)
``volcano``     one ``scheduling.volcano.sh/v1beta1`` PodGroup per gang (``minMember``,
                ``minResources``, ``queue``); pods: ``schedulerName: volcano`` and the
                annotation ``scheduling.k8s.io/group-name``
``coscheduling`` one ``scheduling.x-k8s.io/v1alpha1`` PodGroup per gang (``minMember``,
                ``minResources``, ``scheduleTimeoutSeconds``); pods: the scheduler-plugins
                ``schedulerName`` and the label ``scheduling.x-k8s.io/pod-group``
==============  ===============================================================================

``minMember`` is the gang's ``min_member`` from the decomposition; ``minResources`` is what its
``minMember`` smallest pods request (kube-scheduler's effective requests). PodGroups are applied
before the workload (so that no pod is created before its group exists) and then owned by it
(an ownerReference set once the workload has its uid): deleting the workload deletes them.
With ``pin_nodes``, each pod template also gets a required node affinity on the nodes the
decision planned for it (``matchFields`` ``metadata.name``, added to the template's own terms).

The hand-off is recorded on the copy (annotation ``placer.dev/handoff``, compact JSON: the
scheduler, the member's queue, the PodGroups, whether it was pinned or created suspended) and in
the outcome (:attr:`HandOff.summary`), which ``--dry-run`` shows before anything is written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from placer.definitions import can_suspend, suspend
from placer.definitions.model import GroupVersionKind
from placer.definitions.templates import TemplateEdit, TemplateSite, edit_templates
from placer.dispatch.gangs import gang_warnings, scheduler_for
from placer.dispatch.outcomes import Manifest
from placer.dispatch.record import LABEL_PLACED_BY, PLACED_BY, label_value, plan_of
from placer.errors import DefinitionError, ForbiddenError, KubeError, NotFoundError
from placer.model import ANNOTATION_PREFIX, Placement, WorkloadRef
from placer.objects import name_of, namespace_of, uid_of
from placer.quantity import add, format_resources
from placer.schedulers import LABEL_QUEUE, SchedulerSpec

if TYPE_CHECKING:  # the client (and urllib3) are imported only where requests are sent
    from placer.kube import KubeClient

__all__ = [
    "ANNOTATION_HANDOFF",
    "COSCHEDULING_GROUP_LABEL",
    "COSCHEDULING_PODGROUP",
    "KAI_QUEUE_LABEL",
    "KARTA",
    "KUEUE_QUEUE_LABEL",
    "VOLCANO_GROUP_ANNOTATION",
    "VOLCANO_PODGROUP",
    "HandOff",
    "check_queue",
    "ensure_karta",
    "gang_warnings",
    "own",
    "owner_reference",
    "plan_handoff",
    "scheduler_for",
]

ANNOTATION_HANDOFF = f"{ANNOTATION_PREFIX}handoff"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
COSCHEDULING_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_PODGROUP = ("scheduling.volcano.sh/v1beta1", "PodGroup")
COSCHEDULING_PODGROUP = ("scheduling.x-k8s.io/v1alpha1", "PodGroup")
KARTA = ("run.ai/v1alpha1", "Karta")
#: where Kueue serves LocalQueues, newest first (v1beta2 from Kueue 0.15, v1beta1 before).
KUEUE_LOCALQUEUE_VERSIONS = ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1")

_DNS_LABEL = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class HandOff:
    """What dispatching one placement to its member involves (see the module docstring)."""

    scheduler: SchedulerSpec
    #: the workload body to apply (pod templates changed, maybe suspended).
    body: dict[str, Any]
    #: namespaced objects applied before the workload and owned by it afterwards.
    pod_groups: tuple[dict[str, Any], ...] = ()
    #: the definition as a Karta object, for a kai member that lacks one for the kind.
    karta: dict[str, Any] | None = None
    #: the member's queue (KAI Queue, Kueue LocalQueue, Volcano Queue); empty: none.
    queue: str = ""
    suspended: bool = False
    pinned: bool = False
    #: the pod templates changed, as ``component[/instance]``.
    edited: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def refs(self) -> list[WorkloadRef]:
        """The PodGroups as references (for roll-back)."""
        return [_ref(o) for o in self.pod_groups]

    @property
    def summary(self) -> dict[str, Any]:
        """The record: what the copy was handed over with (JSON-ready)."""
        out: dict[str, Any] = {"scheduler": self.scheduler.name}
        if self.queue:
            out["queue"] = self.queue
        if self.pod_groups:
            out["podGroups"] = [
                {
                    "apiVersion": o["apiVersion"],
                    "name": name_of(o),
                    "minMember": o["spec"]["minMember"],
                    "minResources": o["spec"].get("minResources", {}),
                }
                for o in self.pod_groups
            ]
        if self.karta is not None:
            out["karta"] = name_of(self.karta)
        if self.suspended:
            out["suspended"] = True
        if self.pinned:
            out["pinnedNodes"] = True
        return out

    @property
    def recorded(self) -> dict[str, Any]:
        """:attr:`summary` when anything was handed over (empty for ``default``, unpinned)."""
        if self.scheduler.name == "default" and not self.pinned:
            return {}
        return self.summary

    def describe(self) -> list[str]:
        """One line per thing done, for the text report (``note:`` lines)."""
        name = self.scheduler.name
        lines: list[str] = []
        changes: list[str] = []
        pod_name = self.scheduler.pod_scheduler_name
        if pod_name and self.edited:
            changes.append(f"schedulerName {pod_name}")
        if name == "kai" and self.queue:
            changes.append(f"label {KAI_QUEUE_LABEL}={self.queue}")
        for group in self.pod_groups:
            key = (
                f"annotation {VOLCANO_GROUP_ANNOTATION}"
                if name == "volcano"
                else f"label {COSCHEDULING_GROUP_LABEL}"
            )
            spec = group["spec"]
            needs = ", ".join(f"{k}={v}" for k, v in sorted(spec.get("minResources", {}).items()))
            lines.append(
                f"scheduler {name}: PodGroup {group['apiVersion']} {group['metadata']['name']} "
                f"(minMember {spec['minMember']}"
                + (f", minResources {needs}" if needs else "")
                + f"); its pods get {key}={group['metadata']['name']}"
            )
        if self.edited and changes:
            lines.append(
                f"scheduler {name}: pod templates {', '.join(self.edited)} get "
                + ", ".join(changes)
            )
        if name == "kueue":
            lines.append(
                f"scheduler kueue: label {KUEUE_QUEUE_LABEL}={self.queue}"
                + (" (LocalQueue); created suspended, Kueue admits it" if self.suspended else "")
            )
        if self.karta is not None:
            lines.append(
                f"scheduler kai: Workload Map definition {self.karta['metadata']['name']} "
                f"as {KARTA[0]} {KARTA[1]}, if the member lacks one for this kind"
            )
        if self.pinned:
            lines.append("pods pinned to the planned nodes (required node affinity)")
        return lines + list(self.notes)


def plan_handoff(
    body: Mapping[str, Any],
    manifest: Manifest,
    placement: Placement,
    scheduler: SchedulerSpec,
    *,
    pin_nodes: bool = False,
    domains: Mapping[str, Mapping[str, str]] | None = None,
    kueue_suspends: bool = True,
) -> HandOff:
    """The hand-off of ``body`` (the manifest as it will be applied) to ``scheduler``.

    ``domains``: component label -> the topology domain its pods were placed in (node label
    -> value; :func:`placer.solver.topology.required_domains`), written as required node
    affinity into its pod template, whatever the scheduler.

    ``kueue_suspends=False``: a kueue member's copy is not suspended (an update in place of a
    copy Kueue admitted already: suspending it would stop it).

    Raises:
        InterpretationError: the definition's template paths do not fit the object.
    """
    decomposition = manifest.decomposition
    definition = decomposition.definition
    workload = decomposition.workload
    ref = manifest.ref
    name = scheduler.name
    queue = scheduler.queue_for(workload.labels.get(LABEL_QUEUE, "")) if name != "default" else ""
    notes: list[str] = []
    groups: dict[str, str] = {}  # component[/instance] -> PodGroup name
    pod_groups: list[dict[str, Any]] = []
    if name in ("volcano", "coscheduling"):
        for gang in workload.gangs:
            group = _group_name(ref.name, gang.name, len(workload.gangs))
            for member in gang.members:
                groups[member] = group
            pod_groups.append(
                _pod_group(
                    ref,
                    group,
                    gang.min_member,
                    _min_resources(manifest, gang.members, gang.min_member),
                    scheduler,
                    queue,
                )
            )
    plan = plan_of(placement) if pin_nodes else {}
    if pin_nodes and not plan:
        notes.append("--pin-nodes: the decision has no node plan (snapshot-free): not pinned")

    def edit_for(site: TemplateSite) -> TemplateEdit | None:
        labels: dict[str, str] = {}
        annotations: dict[str, str] = {}
        group = groups.get(site.label) or groups.get(site.component)
        if name == "kai" and queue:
            labels[KAI_QUEUE_LABEL] = queue
        if group and name == "volcano":
            annotations[VOLCANO_GROUP_ANNOTATION] = group
        if group and name == "coscheduling":
            labels[COSCHEDULING_GROUP_LABEL] = group
        nodes = tuple(plan.get(site.label, ()))
        return TemplateEdit(
            labels=labels,
            annotations=annotations,
            scheduler_name=scheduler.pod_scheduler_name,
            nodes=nodes,
            domain=(domains or {}).get(site.label, {}),
        )

    result = edit_templates(body, definition, edit_for)
    out = result.body
    notes += [f"scheduler {name}: {p}" for p in result.problems]
    meta = out.setdefault("metadata", {})
    labels = meta.setdefault("labels", {})
    if name == "kai" and queue:
        labels[KAI_QUEUE_LABEL] = queue
    suspended = False
    if name == "kueue":
        labels[KUEUE_QUEUE_LABEL] = queue
        if not kueue_suspends:
            notes.append("scheduler kueue: not suspended again (Kueue admitted it already)")
        elif can_suspend(definition):
            try:
                out = suspend(out, definition)
                suspended = True
            except DefinitionError as err:
                notes.append(f"scheduler kueue: not created suspended ({err.message})")
        else:
            notes.append(
                f"scheduler kueue: {definition.label} says no way to suspend "
                f"{ref.kind}: Kueue's own webhook must suspend it for admission"
            )
    karta = None
    if name == "kai":
        karta, why = _karta(definition.document, definition.api_version)
        if why:
            notes.append(f"scheduler kai: {why}")
    handoff = HandOff(
        scheduler=scheduler,
        body=out,
        pod_groups=tuple(pod_groups),
        karta=karta,
        queue=queue,
        suspended=suspended,
        pinned=bool(plan) and bool(result.edited),
        edited=result.edited,
        notes=tuple(notes),
    )
    if handoff.recorded:
        meta = handoff.body.setdefault("metadata", {})
        meta.setdefault("annotations", {})[ANNOTATION_HANDOFF] = json.dumps(
            handoff.recorded, separators=(",", ":"), sort_keys=True
        )
    return handoff


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """An ownerReference to the applied ``owner`` (which has its uid)."""
    return {
        "apiVersion": owner.get("apiVersion"),
        "kind": owner.get("kind"),
        "name": name_of(owner),
        "uid": uid_of(owner),
    }


# -- on the member ---------------------------------------------------------------------------


def own(client: KubeClient, objects: Iterable[Mapping[str, Any]], owner: Mapping[str, Any]) -> None:
    """Make the applied ``owner`` an owner of each of ``objects`` (already on the member).

    Each owner applies its reference as its own field manager (``placer-owner-<uid>``), so an
    object several workloads use keeps every owner's reference, and Kubernetes' garbage
    collector removes it with the last of them.
    """
    reference = owner_reference(owner)
    manager = f"placer-owner-{reference['uid']}"
    for obj in objects:
        meta = obj["metadata"]
        body: dict[str, Any] = {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "metadata": {"name": meta["name"], "ownerReferences": [reference]},
        }
        if meta.get("namespace"):
            body["metadata"]["namespace"] = meta["namespace"]
        client.apply(body, field_manager=manager, force=True)


@dataclass(frozen=True)
class _QueueKind:
    """Where a scheduler keeps the queue a workload names, and what a missing one means."""

    project: str
    kind: str
    #: served versions, newest first.
    api_versions: tuple[str, ...]
    namespaced: bool
    consequence: str


_QUEUE_KINDS = {
    "kueue": _QueueKind(
        "Kueue",
        "LocalQueue",
        KUEUE_LOCALQUEUE_VERSIONS,
        True,
        "Kueue leaves the workload suspended (inadmissible) until it exists",
    ),
    "kai": _QueueKind(
        "KAI Scheduler",
        "Queue",
        ("scheduling.run.ai/v2",),
        False,
        "KAI leaves its pods Pending until it exists",
    ),
    "volcano": _QueueKind(
        "Volcano",
        "Queue",
        ("scheduling.volcano.sh/v1beta1",),
        False,
        "Volcano schedules none of its PodGroups until it exists",
    ),
}


def check_queue(client: KubeClient, scheduler: str, queue: str, namespace: str) -> str:
    """Whether the member's queue a workload is handed to exists there (a Kueue LocalQueue in
    the workload's namespace, a KAI or Volcano Queue); a note when it does not, or cannot be
    checked, else ``""``. Read only (``--dry-run`` checks too)."""
    known = _QUEUE_KINDS.get(scheduler)
    if known is None or not queue:
        return ""
    group = known.api_versions[0].split("/")[0]
    where = f" in namespace {namespace}" if known.namespaced else ""
    try:
        api_version = next(
            (v for v in known.api_versions if known.kind in client.served_kinds(v)), None
        )
        if api_version is None:
            return (
                f"scheduler {scheduler}: warning: the member does not serve {group} "
                f"{known.kind} (is {known.project} installed there?): nothing will schedule "
                "the workload"
            )
        client.get(
            api_version, known.kind, queue, namespace=namespace if known.namespaced else None
        )
    except NotFoundError:
        return (
            f"scheduler {scheduler}: warning: {known.kind} {queue} not found{where} on the "
            f"member: {known.consequence}; create it there, or map the workload's placer queue "
            "to an existing one (the fleet file's scheduler.queues / defaultQueue)"
        )
    except KubeError as err:
        return f"scheduler {scheduler}: {known.kind} {queue} not checked ({err.message})"
    return ""


def ensure_karta(
    client: KubeClient,
    karta: Mapping[str, Any],
    target: GroupVersionKind,
    *,
    field_manager: str,
    dry_run: bool = False,
) -> str:
    """Create ``karta`` on a kai member unless it lacks the kind or has one for ``target``;
    what happened, in words (never raises for a member that cannot take it: KAI's own pod
    grouper plugins still work there)."""
    kind = f"{target.group}/{target.version} {target.kind}".lstrip("/")
    try:
        if KARTA[1] not in client.served_kinds(KARTA[0]):
            return (
                f"scheduler kai: the member does not serve {KARTA[0]} {KARTA[1]}: KAI's pod "
                f"grouper uses its own plugin for {kind}, if it has one"
            )
        items = client.list(KARTA[0], KARTA[1]).items
    except ForbiddenError as err:
        return f"scheduler kai: may not read {KARTA[1]} objects ({err.reason}): none created"
    except KubeError as err:
        return f"scheduler kai: could not read {KARTA[1]} objects ({err.message}): none created"
    for item in items:
        root = ((item.get("spec") or {}).get("structureDefinition") or {}).get("rootComponent")
        found = (root or {}).get("kind") or {}
        if (found.get("group", ""), found.get("version"), found.get("kind")) == (
            target.group,
            target.version,
            target.kind,
        ):
            name = name_of(item)
            return f"scheduler kai: the member's {KARTA[1]} {name} describes {kind}"
    name = name_of(karta)
    try:
        client.apply(karta, field_manager=field_manager, dry_run=dry_run)
    except KubeError as err:
        return f"scheduler kai: {KARTA[1]} {name} not created ({err.message})"
    verb = "would be created" if dry_run else "created"
    return f"scheduler kai: {KARTA[1]} {name} {verb} for {kind} (KAI's pod grouper reads it)"


# --------------------------------------------------------------------------------------------


def _ref(obj: Mapping[str, Any]) -> WorkloadRef:
    return WorkloadRef(obj["apiVersion"], obj["kind"], namespace_of(obj), name_of(obj))


def _group_name(workload: str, gang: str, gangs: int) -> str:
    """The PodGroup of a gang: the workload's name (its gang's too when it has several)."""
    text = workload if gangs <= 1 else f"{workload}-{gang}"
    cleaned = _DNS_LABEL.sub("-", text.lower()).strip("-")
    return label_value(cleaned)[:63].strip("-") or "placer-gang"


def _min_resources(manifest: Manifest, members: Sequence[str], count: int) -> dict[str, int]:
    """What the gang's ``count`` smallest pods request (canonical amounts)."""
    pods: list[Mapping[str, int]] = []
    for component in manifest.decomposition.components:
        if component.label in members or component.name in members:
            pods += [component.pod.requests] * component.replicas
    pods.sort(key=lambda r: tuple(sorted(r.items())))
    total: dict[str, int] = {}
    for request in pods[:count]:
        total = add(total, request)
    return total


def _pod_group(
    ref: WorkloadRef,
    name: str,
    min_member: int,
    requests: Mapping[str, int],
    scheduler: SchedulerSpec,
    queue: str,
) -> dict[str, Any]:
    api_version, kind = VOLCANO_PODGROUP if scheduler.name == "volcano" else COSCHEDULING_PODGROUP
    spec: dict[str, Any] = {"minMember": min_member}
    resources = format_resources({k: v for k, v in requests.items() if v > 0})
    if resources:
        spec["minResources"] = resources
    if scheduler.name == "volcano" and queue:
        spec["queue"] = queue
    if scheduler.name == "coscheduling" and scheduler.schedule_timeout_seconds:
        spec["scheduleTimeoutSeconds"] = scheduler.schedule_timeout_seconds
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": ref.namespace,
            "labels": {LABEL_PLACED_BY: PLACED_BY},
            "annotations": {f"{ANNOTATION_PREFIX}workload": f"{ref.kind}/{ref.name}"},
        },
        "spec": spec,
    }


def _karta(document: Mapping[str, Any], api_version: str) -> tuple[dict[str, Any] | None, str]:
    """The definition as a Karta object to create, or why it cannot be."""
    if api_version != KARTA[0] or document.get("kind") != KARTA[1]:
        return None, (
            f"the definition is {document.get('apiVersion')} {document.get('kind')}, not "
            f"{KARTA[0]} {KARTA[1]}: KAI's pod grouper uses its own plugin for this kind"
        )
    name = name_of(document)
    if not name:
        return None, "the definition has no metadata.name: no Karta object is made from it"
    return {
        "apiVersion": KARTA[0],
        "kind": KARTA[1],
        "metadata": {"name": name, "labels": {LABEL_PLACED_BY: PLACED_BY}},
        "spec": dict(document.get("spec") or {}),
    }, ""
