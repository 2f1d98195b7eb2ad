"""A hub object spread over several members: its copies' status as one (pure).

A workload whose PlacementPolicy has ``replicaScheduling`` is placed as one copy per member
(:mod:`placer.dispatch.spread`); the hub object records them all in the annotation
``placer.dev/spread`` (:data:`~placer.dispatch.spread.ANNOTATION_SPREAD`: every copy's
cluster and replicas), next to the usual record, whose ``placer.dev/placed-cluster`` names the
first copy's cluster.

The hub object's status is the **aggregate** of its copies' (:func:`aggregate_status`), as
Karmada's ``ResourceBinding`` aggregation does for the kinds it knows, but for any kind and
without kind-specific code:

* integer fields of ``status`` (``replicas``, ``readyReplicas``, ``availableReplicas``,
  ``updatedReplicas``, ``succeeded``...) are **summed** over the copies, except the ones that
  are not counts (:data:`NOT_COUNTS`: ``observedGeneration``, ``collisionCount``);
* each condition type is ``True`` only when it is ``True`` on every copy that has it; otherwise
  the first copy where it is not ``True`` gives it, its message prefixed with that cluster;
* every other field comes from the first copy (fleet order) that has it.

Its phase is then read through the definition's status mapping from the hub object with that
aggregated status (:func:`placer.definitions.phases_of`: the definition's own rules), in the
reconciler, which holds the catalog.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["NOT_COUNTS", "aggregate_status"]

#: integer status fields that are not counts: taken from the first copy, not summed.
NOT_COUNTS = frozenset({"observedGeneration", "collisionCount"})


def aggregate_status(statuses: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The status of a spread workload from ``(cluster, status)`` of each copy (module
    docstring)."""
    result: dict[str, Any] = {}
    conditions: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for cluster, status in statuses:
        for key, value in status.items():
            if key == "conditions":
                continue
            if isinstance(value, int) and not isinstance(value, bool) and key not in NOT_COUNTS:
                current = result.get(key, 0)
                if isinstance(current, int) and not isinstance(current, bool):
                    result[key] = current + value
            elif key not in result:
                result[key] = value
        for item in status.get("conditions") or ():
            if not isinstance(item, Mapping) or not isinstance(item.get("type"), str):
                continue
            kind = str(item["type"])
            if kind not in conditions:
                order.append(kind)
                conditions[kind] = _from(cluster, item)
            elif conditions[kind].get("status") == "True" and item.get("status") != "True":
                conditions[kind] = _from(cluster, item)
    if order:
        result["conditions"] = [conditions[kind] for kind in order]
    return result


def _from(cluster: str, condition: Mapping[str, Any]) -> dict[str, Any]:
    """``condition`` as the aggregate shows it: a condition not ``True`` names its cluster."""
    shown = dict(condition)
    if shown.get("status") != "True":
        shown["message"] = f"cluster {cluster}: {shown.get('message') or ''}".rstrip(": ")
    return shown
