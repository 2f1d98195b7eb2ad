"""Reading queues files: ``Queue`` and ``PriorityClass`` documents, strictly.

A queues file (``--queues FILE`` of ``plan``, ``submit`` and ``simulate``) holds YAML documents
of two kinds, in any order::

    apiVersion: placer.dev/v1alpha1
    kind: Queue
    metadata: {name: team-a}
    spec:
      parent: research                 # optional
      reclaimable: true                # optional (default true)
      resources:
        nvidia.com/gpu: {quota: 16, limit: 32, overQuotaWeight: 2, clusterLimits: {east: 8}}
        cpu: {quota: 256}
    ---
    apiVersion: scheduling.k8s.io/v1
    kind: PriorityClass
    metadata: {name: high}
    value: 1000

The PriorityClass documents are Kubernetes' own (``kubectl get priorityclass -o yaml`` output
works); they map a workload's ``priorityClassName`` to its priority. Parsing is strict: unknown
fields, wrong types, negative amounts and bad quantities are
:class:`~placer.errors.QueueError` naming the file, document, queue and field path. The same
functions read Queue objects from a hub (``source`` names the object).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from placer.errors import QueueError
from placer.quantity import resource_amount
from placer.queues.model import PriorityClass, Queue, QueueSet, ResourceRule, queue_set
from placer.yamlload import parse_yaml, read_text

__all__ = [
    "API_VERSION",
    "KIND",
    "load_queues",
    "priority_class_from_dict",
    "queue_from_dict",
    "queues_from_yaml",
]

API_VERSION = "placer.dev/v1alpha1"
KIND = "Queue"
_CLASS_API = "scheduling.k8s.io/v1"
_CLASS_KIND = "PriorityClass"
_SPEC_FIELDS = ("parent", "resources", "reclaimable")
_RULE_FIELDS = ("quota", "limit", "overQuotaWeight", "clusterLimits")
#: Kubernetes' own bound on user PriorityClass values (higher ones are reserved for the system).
MAX_CLASS_VALUE = 1_000_000_000


def load_queues(path: str | Path) -> QueueSet:
    """Every Queue and PriorityClass of a YAML file, validated as a set."""
    source = str(path)
    if source != "-" and not Path(path).exists():
        raise QueueError("no such file", source=source, hint="check the --queues path")
    return queues_from_yaml(read_text(path, QueueError), source=source)


def queues_from_yaml(text: str, *, source: str = "<queues>") -> QueueSet:
    """Parse YAML text holding Queue and PriorityClass documents (empty documents skipped)."""
    documents = [
        d for d in parse_yaml(text, source, QueueError, all_documents=True) if d is not None
    ]
    queues: list[Queue] = []
    classes: list[PriorityClass] = []
    for index, document in enumerate(documents):
        where = source if len(documents) == 1 else f"{source} (document {index + 1})"
        kind = document.get("kind") if isinstance(document, Mapping) else None
        if kind == _CLASS_KIND:
            classes.append(priority_class_from_dict(document, source=where))
        else:
            queues.append(queue_from_dict(document, source=where))
    if not queues:
        raise QueueError(
            "holds no Queue",
            source=source,
            hint=f"write a document with apiVersion {API_VERSION} and kind {KIND}",
        )
    return queue_set(queues, classes, source=source)


def _name(data: Mapping[str, object], source: str) -> str:
    metadata = data.get("metadata")
    if not isinstance(metadata, Mapping):
        raise QueueError("must be a mapping with a name", source=source, field="metadata")
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise QueueError("must be a non-empty string", source=source, field="metadata.name")
    return name


def queue_from_dict(data: object, *, source: str = "<queue>") -> Queue:
    """Validate one parsed Queue document and build the queue (alone: the set is checked by
    :func:`~placer.queues.model.queue_set`)."""
    if not isinstance(data, Mapping):
        raise QueueError(
            "a queue must be a mapping with apiVersion, kind, metadata and spec", source=source
        )
    if data.get("kind") != KIND:
        raise QueueError(
            f"kind is {data.get('kind')!r}, expected {KIND!r} (or {_CLASS_KIND!r})",
            source=source,
            field="kind",
        )
    if data.get("apiVersion") != API_VERSION:
        raise QueueError(
            f"apiVersion is {data.get('apiVersion')!r}, expected {API_VERSION!r}",
            source=source,
            field="apiVersion",
        )
    name = _name(data, source)
    where = f"{source}: queue {name}"
    spec = data.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        raise QueueError("must be a mapping", source=where, field="spec")
    for key in spec:
        if key not in _SPEC_FIELDS:
            raise QueueError(
                f"unknown field {key!r}",
                source=where,
                field=f"spec.{key}",
                hint=f"known fields: {', '.join(_SPEC_FIELDS)}",
            )
    parent = spec.get("parent")
    if parent is not None and (not isinstance(parent, str) or not parent):
        raise QueueError("must be a queue name", source=where, field="spec.parent")
    if parent == name:
        raise QueueError(f"queue {name!r} is its own parent", source=where, field="spec.parent")
    reclaimable = spec.get("reclaimable", True)
    if not isinstance(reclaimable, bool):
        raise QueueError(
            f"must be true or false, got {reclaimable!r}", source=where, field="spec.reclaimable"
        )
    resources_data = spec.get("resources") or {}
    if not isinstance(resources_data, Mapping):
        raise QueueError(
            "must map resource names to {quota, limit, overQuotaWeight, clusterLimits}",
            source=where,
            field="spec.resources",
        )
    resources = {
        str(resource): _rule(str(resource), rule, where)
        for resource, rule in resources_data.items()
    }
    return Queue(
        name=name,
        parent=parent,
        resources=resources,
        reclaimable=reclaimable,
        source=where,
    )


def _rule(resource: str, data: object, where: str) -> ResourceRule:
    at = f"spec.resources.{resource}"
    if not isinstance(data, Mapping):
        raise QueueError(
            "must be a mapping with quota, limit, overQuotaWeight or clusterLimits",
            source=where,
            field=at,
        )
    for key in data:
        if key not in _RULE_FIELDS:
            raise QueueError(
                f"unknown field {key!r}",
                source=where,
                field=f"{at}.{key}",
                hint=f"known fields: {', '.join(_RULE_FIELDS)}",
            )
    quota = _amount(resource, data.get("quota", 0), where, f"{at}.quota")
    limit: int | None = None
    raw_limit = data.get("limit")
    if raw_limit is not None and raw_limit != -1:  # -1: KAI's "no limit"
        limit = _amount(resource, raw_limit, where, f"{at}.limit")
        if limit < quota:
            raise QueueError(
                f"limit {raw_limit} is below the quota {data.get('quota')}",
                source=where,
                field=f"{at}.limit",
                hint="the limit bounds quota and over-quota use together: raise it",
            )
    weight = data.get("overQuotaWeight", 1)
    if (
        isinstance(weight, bool)
        or not isinstance(weight, (int, float))
        or not math.isfinite(weight)
        or weight < 0
    ):
        raise QueueError(
            f"must be a number >= 0, got {weight!r}",
            source=where,
            field=f"{at}.overQuotaWeight",
        )
    caps_data = data.get("clusterLimits") or {}
    if not isinstance(caps_data, Mapping):
        raise QueueError(
            "must map cluster names to amounts", source=where, field=f"{at}.clusterLimits"
        )
    caps = {
        str(cluster): _amount(resource, amount, where, f"{at}.clusterLimits.{cluster}")
        for cluster, amount in caps_data.items()
    }
    return ResourceRule(
        quota=quota, limit=limit, over_quota_weight=float(weight), cluster_limits=caps
    )


def _amount(resource: str, value: object, where: str, at: str) -> int:
    if isinstance(value, bool) or value is None:
        raise QueueError(f"must be a quantity, got {value!r}", source=where, field=at)
    try:
        return resource_amount(resource, value)
    except ValueError as exc:
        raise QueueError(
            f"{exc}", source=where, field=at, hint="amounts are quantities >= 0 (16, 500m, 1Ti)"
        ) from None


def priority_class_from_dict(data: object, *, source: str = "<priorityclass>") -> PriorityClass:
    """Validate one parsed PriorityClass document (Kubernetes' fields; the ones placement does
    not use — description, preemptionPolicy — are accepted and ignored)."""
    if not isinstance(data, Mapping):
        raise QueueError("a PriorityClass must be a mapping", source=source)
    if data.get("apiVersion") != _CLASS_API:
        raise QueueError(
            f"apiVersion is {data.get('apiVersion')!r}, expected {_CLASS_API!r}",
            source=source,
            field="apiVersion",
        )
    name = _name(data, source)
    where = f"{source}: priority class {name}"
    value = data.get("value")
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > MAX_CLASS_VALUE:
        raise QueueError(
            f"must be an integer of at most {MAX_CLASS_VALUE}, got {value!r}",
            source=where,
            field="value",
        )
    default = data.get("globalDefault", False)
    if not isinstance(default, bool):
        raise QueueError(
            f"must be true or false, got {default!r}", source=where, field="globalDefault"
        )
    return PriorityClass(name=name, value=value, global_default=default, source=where)
