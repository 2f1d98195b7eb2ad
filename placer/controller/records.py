"""The placement record on a hub object, and the marks on its member copy (pure).

The hub object is the source of truth: everything the controller must remember across restarts
is written on it, so a new leader resumes exactly where the last one stopped.

On the hub object:

* annotations ``placer.dev/placed-cluster``, ``placer.dev/decision`` and ``placer.dev/placed-at``
  — the same keys :mod:`placer.dispatch.record` writes on the copy, so hub object and copy
  carry the same record — plus ``placer.dev/phase``, the copy's phase through the definition's
  status mapping (mirrored), and the label ``placer.dev/placed-cluster`` for selections;
  an elastic workload's also ``placer.dev/replicas``, the count each elastic component runs
  (so that its queue counts it at that size from the hub alone);
* the finalizer ``placer.dev/placement``, added with the record, so that deleting the hub object
  first deletes the member copy;
* a ``Placed`` condition in ``status.conditions``: True naming the cluster, or False with why
  not (``Unschedulable``, ``NoDefinition``, ``InvalidWorkload``, ``DispatchFailed``,
  ``ClusterLost``), with ``observedGeneration`` = the generation applied;
* the rest of ``status``: the member copy's status, mirrored.

Order of writes, and why it is safe: the copy is applied first, then the record (metadata),
then ``Placed=True`` (status). A controller that stops between the apply and the record finds,
after restart, a copy marked with the hub object's uid and no record: it *adopts* it (records
that cluster) instead of deciding again — no second copy. Between record and condition, it
finds an unconfirmed record with its copy: it confirms it. Decisions wait until every reachable
member's copies are listed, so an existing copy is always seen before a new one is made.

On the member copy, besides the dispatch record: the label ``placer.dev/hub`` (which hub placed
it) and the annotation ``placer.dev/hub-uid`` (the hub object's uid). A copy marked by this hub
whose hub object is gone, or whose record names another cluster, is stale and is deleted.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from placer.definitions import workload_ref
from placer.dispatch.record import (
    ANNOTATION_CLUSTER,
    ANNOTATION_DECISION,
    ANNOTATION_PLACED_AT,
    LABEL_DECISION,
    LABEL_HUB,
    LABEL_PLACED_BY,
    LABEL_PLACED_CLUSTER,
    label_value,
)
from placer.dispatch.spread import ANNOTATION_SPREAD, spread_copies_of
from placer.errors import PlacerError
from placer.model import LABEL_QUEUE, PodAssignment, Workload, WorkloadRef
from placer.objects import (
    annotations_of,
    finalizers_of,
    labels_of,
    meta,
    name_key,
    version_of,
)
from placer.timestamps import parse_rfc3339, rfc3339

__all__ = [
    "ANNOTATION_CLUSTER",
    "ANNOTATION_DECISION",
    "ANNOTATION_HUB_LABELS",
    "ANNOTATION_HUB_UID",
    "ANNOTATION_PHASE",
    "ANNOTATION_PLACED_AT",
    "ANNOTATION_REPLICAS",
    "CONDITION",
    "FINALIZER",
    "JSON",
    "LABEL_HUB",
    "MESSAGE_LIMIT",
    "RESERVED_CONDITION",
    "TERMINAL_PHASES",
    "CopyRef",
    "Record",
    "as_written",
    "clear_record_patch",
    "condition_of",
    "copied_labels",
    "copy_marks",
    "cut_message",
    "finalizer_patch",
    "has_finalizer",
    "is_opted_in",
    "is_own_copy",
    "key_of",
    "mark_copy",
    "merge_conditions",
    "phase_patch",
    "placed_condition",
    "placed_counts",
    "record_of",
    "record_patch",
    "recorded_workload",
    "replicas_annotation",
    "rv_of",
    "status_patch",
]

#: a Kubernetes object as the API serves it.
JSON = dict[str, Any]

ANNOTATION_PHASE = "placer.dev/phase"
FINALIZER = "placer.dev/placement"
CONDITION = "Placed"
#: placer's other condition on hub objects (:mod:`placer.controller.preemption`): kept, like
#: ``Placed``, when the member copy's status is mirrored.
PREEMPTED_CONDITION = "Preempted"
#: a pending hub object's reservation (:mod:`placer.controller.reserving`): dropped when it is
#: placed.
RESERVED_CONDITION = "Reserved"
#: on member copies: the uid of the hub object the copy stands for.
ANNOTATION_HUB_UID = "placer.dev/hub-uid"
#: on member copies: the keys of the hub object's labels the copy was given, comma-separated
#: (:func:`mark_copy`): a label removed on the hub is removed from the copy, while labels the
#: member's controllers or people put on the copy stay (:func:`copied_labels`).
ANNOTATION_HUB_LABELS = "placer.dev/hub-labels"
#: labels placer itself sets on every copy (its record's and the hub mark): never the hub's.
_OWN_COPY_LABELS = frozenset({LABEL_PLACED_BY, LABEL_DECISION, LABEL_PLACED_CLUSTER, LABEL_HUB})
#: on placed hub objects of elastic workloads: the count each elastic component's copy runs
#: (its decision's choice, or its growth since), JSON by component label (``{"worker": 7}``):
#: what the queues count it at, read from the hub alone.
ANNOTATION_REPLICAS = "placer.dev/replicas"
#: phases after which a copy is never re-created.
TERMINAL_PHASES = frozenset({"Completed", "Failed"})
#: phases that prove the copy's pods exist (so capacity gathering sees them).
OBSERVED_PHASES = frozenset({"Running", "Completed", "Failed", "Degraded"})
#: characters of a condition's or Event's message at most.
MESSAGE_LIMIT = 1024


@dataclass(frozen=True)
class Record:
    """What the hub object says about its placement."""

    cluster: str
    decision: str = ""
    placed_at: float | None = None
    #: whether the member accepted the copy (``Placed=True``); False: intent only.
    confirmed: bool = False
    #: the mirrored phase (``Running``...), empty when none yet.
    phase: str = ""
    #: a workload spread over clusters (:mod:`placer.controller.spread`): the cluster of
    #: every copy (``cluster`` is the first); empty for a workload placed whole.
    copies: tuple[str, ...] = ()
    #: the counts its elastic components run at (:data:`ANNOTATION_REPLICAS`), by label.
    replicas: Mapping[str, int] = field(default_factory=dict)

    @property
    def clusters(self) -> tuple[str, ...]:
        """Every cluster holding a copy of the workload."""
        return self.copies or (self.cluster,)

    @property
    def terminal(self) -> bool:
        return bool(TERMINAL_PHASES & set(self.phase.split(",")))

    @property
    def observed(self) -> bool:
        """Whether the copy's phase shows its pods exist (see ``OBSERVED_PHASES``)."""
        return bool(OBSERVED_PHASES & set(self.phase.split(",")))


def key_of(obj: Mapping[str, Any]) -> WorkloadRef:
    """The object's identity (raises :class:`~placer.errors.InterpretationError` if it has none)."""
    return workload_ref(obj)


def is_opted_in(obj: Mapping[str, Any]) -> bool:
    """Whether the object carries the ``placer.dev/queue`` label."""
    return LABEL_QUEUE in labels_of(obj)


def condition_of(obj: Mapping[str, Any], kind: str = CONDITION) -> dict[str, Any] | None:
    """The condition of type ``kind`` in ``status.conditions``, or ``None``."""
    status = obj.get("status")
    if not isinstance(status, Mapping):
        return None
    for item in status.get("conditions") or ():
        if isinstance(item, Mapping) and item.get("type") == kind:
            return dict(item)
    return None


def record_of(obj: Mapping[str, Any]) -> Record | None:
    """The placement record, or ``None`` when the object has not been placed."""
    annotations = annotations_of(obj)
    cluster = annotations.get(ANNOTATION_CLUSTER)
    if not cluster:
        return None
    condition = condition_of(obj) or {}
    confirmed = (
        condition.get("status") == "True"
        and condition.get("reason") == "Placed"
        and _cluster_in(condition) == cluster
    )
    return Record(
        cluster=cluster,
        decision=annotations.get(ANNOTATION_DECISION, ""),
        placed_at=parse_rfc3339(annotations.get(ANNOTATION_PLACED_AT)),
        confirmed=confirmed,
        phase=annotations.get(ANNOTATION_PHASE, ""),
        copies=tuple(spread.copies) if (spread := spread_copies_of(obj)) is not None else (),
        replicas=_replicas(annotations.get(ANNOTATION_REPLICAS)),
    )


def _replicas(text: str | None) -> dict[str, int]:
    """:data:`ANNOTATION_REPLICAS` read (nothing when absent or not as placer writes it)."""
    if not text:
        return {}
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(found, Mapping):
        return {}
    return {str(k): v for k, v in found.items() if isinstance(v, int) and not isinstance(v, bool)}


def replicas_annotation(workload: Workload, counts: Mapping[str, int]) -> str | None:
    """:data:`ANNOTATION_REPLICAS` of ``workload`` (a hub object's, its elastic components at
    their minimum) running its components at ``counts`` (by label; a component left out runs
    its minimum); ``None`` when it has no elastic component."""
    elastic = {c.label: counts.get(c.label, c.replicas) for c in workload.components if c.elastic}
    return json.dumps(elastic, sort_keys=True, separators=(",", ":")) if elastic else None


def placed_counts(pods: Iterable[PodAssignment]) -> dict[str, int]:
    """Pods per component label of a placement."""
    return dict(Counter(f"{p.component}/{p.instance}" if p.instance else p.component for p in pods))


def recorded_workload(workload: Workload, record: Record) -> Workload:
    """``workload`` (a placed hub object's) with each elastic component at the count its
    record says it runs (within its range), not at its minimum; as it is without one."""
    if not record.replicas or not workload.elastic:
        return workload
    components = tuple(
        replace(c, replicas=min(max(record.replicas[c.label], c.replicas), c.max_replicas or 0))
        if c.elastic and c.label in record.replicas
        else c
        for c in workload.components
    )
    return replace(workload, components=components)


def _cluster_in(condition: Mapping[str, Any]) -> str:
    """The cluster a ``Placed=True`` condition names (its message starts ``cluster NAME``)."""
    message = str(condition.get("message") or "")
    if not message.startswith("cluster "):
        return ""
    return message[len("cluster ") :].split(" ", 1)[0].rstrip(":;,")


# --------------------------------------------------------------------------------------------
# patches for the hub object


def has_finalizer(obj: Mapping[str, Any]) -> bool:
    """Whether placer's finalizer is on the object."""
    return FINALIZER in finalizers_of(obj)


def record_patch(
    obj: Mapping[str, Any],
    cluster: str,
    decision: str,
    placed_at: str,
    spread: str | None = None,
    replicas: str | None = None,
) -> dict[str, Any]:
    """Merge patch recording the placement on ``cluster`` (with the finalizer); ``spread``:
    the copies of a spread workload (:data:`~placer.dispatch.spread.ANNOTATION_SPREAD`'s
    value; ``None`` removes it); ``replicas``: :data:`ANNOTATION_REPLICAS` (``None`` removes it).

    It carries the object's resourceVersion, so the server refuses it (409) if the object
    changed since it was read; the caller reads it again and retries (the finalizer list must
    not lose someone else's entry).
    """
    finalizers = finalizers_of(obj)
    if FINALIZER not in finalizers:
        finalizers.append(FINALIZER)
    return {
        "metadata": {
            "resourceVersion": meta(obj).get("resourceVersion"),
            "finalizers": finalizers,
            "labels": {LABEL_PLACED_CLUSTER: label_value(cluster)},
            "annotations": {
                ANNOTATION_CLUSTER: cluster,
                ANNOTATION_DECISION: decision,
                ANNOTATION_PLACED_AT: placed_at,
                ANNOTATION_PHASE: None,
                ANNOTATION_SPREAD: spread,
                ANNOTATION_REPLICAS: replicas,
            },
        }
    }


def clear_record_patch(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Merge patch forgetting the placement (failover); keeps the finalizer."""
    return {
        "metadata": {
            "resourceVersion": meta(obj).get("resourceVersion"),
            "labels": {LABEL_PLACED_CLUSTER: None},
            "annotations": {
                ANNOTATION_CLUSTER: None,
                ANNOTATION_DECISION: None,
                ANNOTATION_PLACED_AT: None,
                ANNOTATION_PHASE: None,
                ANNOTATION_SPREAD: None,
                ANNOTATION_REPLICAS: None,
            },
        }
    }


def finalizer_patch(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """Merge patch removing placer's finalizer, or ``None`` when it is not there."""
    finalizers = finalizers_of(obj)
    if FINALIZER not in finalizers:
        return None
    return {
        "metadata": {
            "resourceVersion": meta(obj).get("resourceVersion"),
            "finalizers": [f for f in finalizers if f != FINALIZER] or None,
        }
    }


def phase_patch(phase: str) -> dict[str, Any]:
    """Merge patch of the mirrored phase annotation."""
    return {"metadata": {"annotations": {ANNOTATION_PHASE: phase or None}}}


def cut_message(message: str) -> str:
    """``message`` cut to :data:`MESSAGE_LIMIT` characters (ending ``...`` when cut)."""
    if len(message) > MESSAGE_LIMIT:
        return message[: MESSAGE_LIMIT - 3] + "..."
    return message


def placed_condition(
    status: bool,
    reason: str,
    message: str,
    now: float,
    *,
    generation: object = None,
) -> dict[str, Any]:
    """A ``Placed`` condition (message cut to 1,024 characters, as Events are)."""
    message = cut_message(message)
    condition: dict[str, Any] = {
        "type": CONDITION,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": rfc3339(now),
    }
    if isinstance(generation, int):
        condition["observedGeneration"] = generation
    return condition


def merge_conditions(
    existing: Sequence[Mapping[str, Any]] | None, condition: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """``existing`` with ``condition`` replacing the one of its type.

    ``lastTransitionTime`` is kept when the status did not change (Kubernetes' convention).
    """
    result: list[dict[str, Any]] = []
    replaced = False
    for item in existing or ():
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == condition.get("type"):
            new = dict(condition)
            if item.get("status") == condition.get("status") and item.get("lastTransitionTime"):
                new["lastTransitionTime"] = item["lastTransitionTime"]
            result.append(new)
            replaced = True
        else:
            result.append(dict(item))
    if not replaced:
        result.append(dict(condition))
    return result


def status_patch(
    obj: Mapping[str, Any],
    condition: Mapping[str, Any],
    mirrored: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Merge patch of ``status``: ``mirrored`` (the member copy's status) plus ``condition``.

    ``mirrored=None`` keeps the hub's status and only sets the condition. Fields the hub has
    but the mirrored status lacks are removed (``null``). The conditions of the mirrored status
    are kept, with placer's own replacing any of the same type. ``None`` when nothing changes.
    """
    current = obj.get("status")
    current = dict(current) if isinstance(current, Mapping) else {}
    base = dict(mirrored) if mirrored is not None else dict(current)
    listed = [dict(c) for c in base.get("conditions") or () if isinstance(c, Mapping)]
    others = [c for c in listed if c.get("type") not in (CONDITION, PREEMPTED_CONDITION)]
    if condition.get("type") == CONDITION and condition.get("status") == "True":
        others = [c for c in others if c.get("type") != RESERVED_CONDITION]  # placed: released
    # placer's: Placed as the hub has it; Preempted as given (a caller's status), else the hub's
    preempted = next((c for c in listed if c.get("type") == PREEMPTED_CONDITION), None)
    own = [*_own(obj), *([preempted] if preempted is not None else [])]
    owned = {str(c.get("type")): c for c in own}
    desired = {**base, "conditions": merge_conditions([*others, *owned.values()], condition)}
    if desired == current:
        return None
    patch: dict[str, Any] = {k: v for k, v in desired.items() if current.get(k) != v}
    for key in current:
        if key not in desired:
            patch[key] = None
    return {"status": patch}


def _own(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """placer's conditions on ``obj`` (``Placed``, ``Preempted``)."""
    found = (condition_of(obj), condition_of(obj, PREEMPTED_CONDITION))
    return [c for c in found if c is not None]


def copy_marks(hub: str, uid: str) -> tuple[dict[str, str], dict[str, str]]:
    """Labels and annotations that mark a member copy as this hub's copy of one object."""
    return {LABEL_HUB: hub}, {ANNOTATION_HUB_UID: uid}


def mark_copy(body: Mapping[str, Any], hub: str, uid: str, hub_labels: Iterable[str] = ()) -> JSON:
    """``body`` marked as hub ``hub``'s copy of the hub object ``uid`` (:func:`copy_marks`),
    with the keys of the hub object's labels it carries (``hub_labels``, placer's own left
    out) in :data:`ANNOTATION_HUB_LABELS`; a mirrored phase annotation is not carried over."""
    metadata = dict(meta(body))
    labels, annotations = copy_marks(hub, uid)
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels}
    kept = {
        k: v
        for k, v in annotations_of(body).items()
        if k not in (ANNOTATION_PHASE, ANNOTATION_HUB_LABELS)
    }
    copied = sorted(set(hub_labels) - _OWN_COPY_LABELS)
    if copied:
        kept[ANNOTATION_HUB_LABELS] = ",".join(copied)
    metadata["annotations"] = {**kept, **annotations}
    return {**body, "metadata": metadata}


def copied_labels(copy: Mapping[str, Any]) -> set[str]:
    """The keys of the hub object's labels ``copy`` was last given (:func:`mark_copy`)."""
    text = annotations_of(copy).get(ANNOTATION_HUB_LABELS, "")
    return {key for key in text.split(",") if key}


def is_own_copy(copy: Mapping[str, Any], hub: str, uid: str) -> bool:
    """Whether a member copy carries hub ``hub``'s marks for the hub object ``uid``."""
    return labels_of(copy).get(LABEL_HUB) == hub and hub_uid_of(copy) == uid


def rv_of(obj: Mapping[str, Any]) -> int:
    """The resourceVersion as a number for ordering (0 when absent or not numeric).

    NB: Kubernetes says resourceVersions are opaque; comparing them is only used to avoid
    overwriting a newer cached object with the controller's own older write, and every server
    placer meets (etcd-backed, or the loopback one) uses increasing integers.
    """
    text = version_of(obj)
    return int(text) if text.isdigit() else 0


def as_written(obj: Mapping[str, Any]) -> str:
    """What the user wrote, as far as placement reads it: generation, labels, annotations.

    Status writes (placer's own conditions) change the resourceVersion but not this, so an
    object reported invalid is not tried again until its owner changes it.
    """
    metadata = meta(obj)
    annotations = {
        k: v for k, v in (metadata.get("annotations") or {}).items() if k != ANNOTATION_PHASE
    }
    return repr(
        (
            metadata.get("generation"),
            sorted((metadata.get("labels") or {}).items()),
            sorted(annotations.items()),
        )
    )


class CopyRef(NamedTuple):
    """A member copy: the cluster it is on and its identity there."""

    cluster: str
    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, cluster: str, api_version: str, kind: str, copy: Mapping[str, Any]) -> CopyRef:
        namespace, name = name_key(copy)
        return cls(cluster, api_version, kind, namespace, name)

    @classmethod
    def on(cls, cluster: str, ref: WorkloadRef) -> CopyRef:
        """The copy of hub object ``ref`` on ``cluster`` (same namespace and name)."""
        return cls(cluster, ref.api_version, ref.kind, ref.namespace, ref.name)

    @property
    def workload(self) -> WorkloadRef:
        return WorkloadRef(self.api_version, self.kind, self.namespace, self.name)


def hub_uid_of(copy: Mapping[str, Any]) -> str:
    """The hub uid a member copy stands for (empty when unmarked)."""
    return annotations_of(copy).get(ANNOTATION_HUB_UID, "")


def describe_error(err: BaseException) -> str:
    """An error as one line for conditions and Events (placer's own text when it is one)."""
    if isinstance(err, PlacerError):
        return str(err).replace("\n", " ")
    return f"{type(err).__name__}: {err}".replace("\n", " ")
