"""Writing a workload's replica count: the copy of a divided workload each cluster gets.

A definition reads replicas with a jq path (``scaleDefinition.replicasPath``). placer can write
the count back where that path is a plain field path on the root object — ``.spec.replicas``,
optionally with a default (``.spec.replicas // 1``) — which covers Deployments, StatefulSets,
ReplicaSets, LeaderWorkerSets' group count and the serving kinds of the catalog. A workload
whose root has such a path is *divisible* (:func:`replicas_field`); any other path is not.
Pure: no I/O.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from placer.definitions.model import Definition

__all__ = ["replicas_field", "with_replicas"]

_FIELD = re.compile(r"^\s*((?:\.[A-Za-z_][A-Za-z0-9_]*)+)\s*(?://\s*[0-9]+\s*)?$")


def replicas_field(definition: Definition) -> tuple[str, ...] | None:
    """The keys of the root object's replicas field (``("spec", "replicas")``), or ``None``
    when the definition's root has no replicas path placer can write."""
    scale = definition.root.scale
    if scale is None or not scale.replicas_path:
        return None
    match = _FIELD.match(scale.replicas_path)
    if match is None:
        return None
    return tuple(match.group(1).split(".")[1:])


def with_replicas(obj: Mapping[str, Any], keys: tuple[str, ...], replicas: int) -> dict[str, Any]:
    """A copy of ``obj`` with ``replicas`` at ``keys`` (missing mappings created)."""
    result: dict[str, Any] = copy.deepcopy(dict(obj))
    target = result
    for key in keys[:-1]:
        child = target.get(key)
        if not isinstance(child, dict):
            child = target[key] = {}
        target = child
    target[keys[-1]] = replicas
    return result
