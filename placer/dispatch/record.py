"""The placement record: what placer writes on every object it dispatches (pure).

A dispatched object carries, next to the user's own metadata:

* labels (valid label values, so ``kubectl get -l`` and label selectors work):
  ``placer.dev/placed-by: placer``, ``placer.dev/decision: <decision id>`` and
  ``placer.dev/placed-cluster: <cluster>`` (the cluster name made label-safe when it is not a
  valid label value: invalid characters become ``-``, and a hash suffix keeps it unique);
* annotations (exact values): ``placer.dev/placed-cluster`` (the cluster name as configured),
  ``placer.dev/decision``, ``placer.dev/placed-at`` (RFC 3339, UTC) and ``placer.dev/pod-nodes``,
  the decision's pod-to-node plan as compact JSON ``{"worker/0": ["node-a", "node-b"], ...}``
  (pods of each component instance by replica index). The plan is informative for real
  clusters (kube-scheduler decides) and honoured by the virtual fleet's pod materialisation;
* the annotation ``placer.dev/manifest-hash``: a hash of the manifest as the user wrote it
  (cleaned, without the record: :func:`manifest_hash`), so that a later ``placer submit`` of the
  same file knows the copy is unchanged and one of a changed file knows it changed, whatever
  the API server defaulted or normalised in the stored object;
* while a copy is being moved (``placer submit --move``, :mod:`placer.dispatch.update`), the
  new copy waits suspended with the annotation ``placer.dev/moving-from: <old cluster>``
  until the old copy is gone; the resume removes it.

The record is how placer recognises its own objects: re-submitting an unchanged workload that
carries a record on some member is a no-op (it stays there), a changed one is updated there
(:mod:`placer.dispatch.update`), and ``placer get``/``describe``/``delete`` use it.
Why on the object and not elsewhere: the object is what users and other tools look at, it is
deleted with the workload, and it needs no extra permission.

:func:`dispatch_manifest` builds the body placer applies: a copy of the user's (or hub's)
manifest without server-populated fields (uid, resourceVersion, managedFields, status, owner
references, ...), in its namespace, with the record added.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from placer.model import ANNOTATION_PREFIX, Placement, WorkloadRef
from placer.objects import meta
from placer.timestamps import rfc3339

__all__ = [
    "ANNOTATION_CLUSTER",
    "ANNOTATION_DECISION",
    "ANNOTATION_MANIFEST",
    "ANNOTATION_MOVING_FROM",
    "ANNOTATION_PLACED_AT",
    "ANNOTATION_PLAN",
    "FIELD_MANAGER",
    "LABEL_DECISION",
    "LABEL_HUB",
    "LABEL_PLACED_BY",
    "LABEL_PLACED_CLUSTER",
    "PLACED_BY",
    "PlacementRecord",
    "dispatch_manifest",
    "label_value",
    "manifest_hash",
    "new_decision_id",
    "plan_of",
]

#: the field manager of every server-side apply placer makes.
FIELD_MANAGER = "placer"
PLACED_BY = "placer"
LABEL_PLACED_BY = f"{ANNOTATION_PREFIX}placed-by"
LABEL_DECISION = f"{ANNOTATION_PREFIX}decision"
LABEL_PLACED_CLUSTER = f"{ANNOTATION_PREFIX}placed-cluster"
#: on the copies the placement controller places: the hub they come from
#: (:mod:`placer.controller.records`).
LABEL_HUB = f"{ANNOTATION_PREFIX}hub"
ANNOTATION_CLUSTER = f"{ANNOTATION_PREFIX}placed-cluster"
ANNOTATION_DECISION = f"{ANNOTATION_PREFIX}decision"
ANNOTATION_PLACED_AT = f"{ANNOTATION_PREFIX}placed-at"
ANNOTATION_PLAN = f"{ANNOTATION_PREFIX}pod-nodes"
ANNOTATION_MANIFEST = f"{ANNOTATION_PREFIX}manifest-hash"
ANNOTATION_MOVING_FROM = f"{ANNOTATION_PREFIX}moving-from"

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
#: metadata the API server owns: never sent back, never copied from a hub object.
SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "ownerReferences",
    "finalizers",
)
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def new_decision_id(moment: datetime | None = None) -> str:
    """A fresh decision id: ``YYYYMMDD-HHMMSS-xxxxxx`` (UTC time, 6 random hex digits).

    Sortable by time, unique enough across concurrent submitters, a valid label value.
    """
    stamp = (moment or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


def label_value(text: str) -> str:
    """``text`` if it is a valid label value, else a valid, unique stand-in for it."""
    if len(text) <= 63 and _LABEL_VALUE.match(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:54].strip("-_.")
    return f"{cleaned}-{digest}" if cleaned else digest


def plan_of(placement: Placement) -> dict[str, list[str]]:
    """The pod-to-node plan: ``component[/instance]`` -> node of each replica, by index.

    Empty when some pod has no node (a decision without capacity: nothing was planned).
    """
    if any(not pod.node for pod in placement.pods):
        return {}
    plan: dict[str, dict[int, str]] = {}
    for pod in placement.pods:
        key = f"{pod.component}/{pod.instance}" if pod.instance else pod.component
        plan.setdefault(key, {})[pod.index] = pod.node
    return {key: [nodes[i] for i in sorted(nodes)] for key, nodes in sorted(plan.items())}


@dataclass(frozen=True)
class PlacementRecord:
    """Where and when placer placed an object, and the pod-to-node plan of the decision."""

    cluster: str
    decision: str
    placed_at: str
    plan: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def for_placement(
        cls, placement: Placement, decision: str, placed_at: str | None = None
    ) -> PlacementRecord:
        """The record of ``placement`` made by decision ``decision``."""
        return cls(
            cluster=placement.cluster,
            decision=decision,
            placed_at=placed_at or rfc3339(),
            plan={k: tuple(v) for k, v in plan_of(placement).items()},
        )

    def labels(self) -> dict[str, str]:
        return {
            LABEL_PLACED_BY: PLACED_BY,
            LABEL_DECISION: label_value(self.decision),
            LABEL_PLACED_CLUSTER: label_value(self.cluster),
        }

    def annotations(self) -> dict[str, str]:
        out = {
            ANNOTATION_CLUSTER: self.cluster,
            ANNOTATION_DECISION: self.decision,
            ANNOTATION_PLACED_AT: self.placed_at,
        }
        if self.plan:
            plan = {k: list(v) for k, v in self.plan.items()}
            out[ANNOTATION_PLAN] = json.dumps(plan, separators=(",", ":"), sort_keys=True)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``-o json`` outputs."""
        return {
            "cluster": self.cluster,
            "decision": self.decision,
            "placedAt": self.placed_at,
            "podNodes": {k: list(v) for k, v in self.plan.items()},
        }

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> PlacementRecord | None:
        """The record on a live object, or ``None`` when placer did not place it.

        Tolerant: a record someone edited by hand still yields what can be read (a plan that
        is not JSON is dropped).
        """
        metadata = obj.get("metadata")
        if not isinstance(metadata, Mapping):
            return None
        labels = metadata.get("labels") or {}
        annotations = metadata.get("annotations") or {}
        if not isinstance(labels, Mapping) or not isinstance(annotations, Mapping):
            return None
        if labels.get(LABEL_PLACED_BY) != PLACED_BY:
            return None
        plan: dict[str, tuple[str, ...]] = {}
        text = annotations.get(ANNOTATION_PLAN)
        if isinstance(text, str):
            try:
                data = json.loads(text)
            except ValueError:
                data = None
            if isinstance(data, Mapping):
                for key, nodes in data.items():
                    if isinstance(nodes, list) and all(isinstance(n, str) for n in nodes):
                        plan[str(key)] = tuple(nodes)
        return cls(
            cluster=str(
                annotations.get(ANNOTATION_CLUSTER) or labels.get(LABEL_PLACED_CLUSTER, "")
            ),
            decision=str(annotations.get(ANNOTATION_DECISION) or labels.get(LABEL_DECISION, "")),
            placed_at=str(annotations.get(ANNOTATION_PLACED_AT, "")),
            plan=plan,
        )


def manifest_hash(manifest: Mapping[str, Any], ref: WorkloadRef) -> str:
    """A hash of ``manifest`` as placer applies it, without the record (24 hex digits): equal
    for two submissions of the same object however its keys are ordered, different as soon as
    any field the user wrote differs."""
    body = dispatch_manifest(manifest, ref, None)
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def dispatch_manifest(
    manifest: Mapping[str, Any],
    ref: WorkloadRef,
    record: PlacementRecord | None,
) -> dict[str, Any]:
    """The body to apply on the member: ``manifest`` cleaned, namespaced, with ``record`` and
    the manifest's hash (:data:`ANNOTATION_MANIFEST`).

    ``record=None`` gives the cleaned body without a record or hash (used to compare or to
    dry-run what a user wrote).
    """
    body: dict[str, Any] = copy.deepcopy(dict(manifest))
    body.pop("status", None)
    metadata = dict(meta(body))
    for key in SERVER_METADATA:
        metadata.pop(key, None)
    metadata.pop("generateName", None)
    metadata["name"] = ref.name
    metadata["namespace"] = ref.namespace
    labels = dict(metadata.get("labels") or {})
    annotations = dict(metadata.get("annotations") or {})
    annotations.pop(_LAST_APPLIED, None)
    for key in (ANNOTATION_MANIFEST, ANNOTATION_MOVING_FROM):
        annotations.pop(key, None)
    if record is not None:
        labels.update(record.labels())
        annotations.update(record.annotations())
        annotations[ANNOTATION_MANIFEST] = manifest_hash(manifest, ref)
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    body["metadata"] = metadata
    return body
