"""Elastic components: the replica range a workload accepts, and writing the chosen count.

A definition annotated ``placer.dev/elastic: "true"`` (:attr:`Definition.elastic`) says that its
components with a ``scaleDefinition.minReplicasPath`` or ``maxReplicasPath`` (Workload Map's
scale fields) may run any replica count in that range: PyTorchJob's ``elasticPolicy``, Ray's
worker groups. For each instance of such a component:

* **range** (:func:`replica_range`): ``low`` = ``minReplicas`` when it is set and positive,
  else the declared count (upstream's *effective minimum*, the same count the gang's
  ``minMember`` adds up, :mod:`placer.definitions.gangs`); ``high`` = ``maxReplicas`` when set,
  else the declared count; a declared count above ``maxReplicas`` with no positive minimum is
  clamped to it (as KubeRay does). ``minReplicas > maxReplicas`` is an error naming the
  definition, component and fields. The instance is elastic when ``high > low``.
* **writing** (:func:`write_replicas`): the chosen count goes into the object through the
  component's ``replicasPath`` — no framework code. placer tries, in order of appearance, the
  plain fields the path reads (``.spec.pytorchReplicaSpecs.Worker.replicas``; for a
  multi-instance path ``.spec.workerGroupSpecs[]? | ...`` the fields of the instance's element),
  writes the count there and reads the object again through the definition: a field is used
  only when the instance then reads exactly the chosen count, with its minimum and maximum
  unchanged, and every other instance reads what it read before. A path no field of which
  reads back (a multi-host Ray group whose pods are ``replicas x numOfHosts``) cannot be
  written: such an instance is placed at its declared count
  (:func:`placer.definitions.decompose.decompose` says so in a warning).

Pure: no I/O.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from placer.definitions.interpret import Extraction, Scale, extract, replicas_of
from placer.definitions.jq import DEFAULT_LIMITS, JqLimits, normalize, to_json_text
from placer.definitions.model import Component, Definition
from placer.errors import InterpretationError

__all__ = ["replica_range", "write_replicas"]

#: a path that enumerates instances: ``.a.b[]`` or ``.a.b[]?``, then ``| rest`` or ``.rest``.
_ENUMERATION = re.compile(
    r"^\s*(?P<prefix>(?:\.[A-Za-z_][A-Za-z0-9_]*)+)\s*\[\]\??\s*(?:\|\s*)?(?P<rest>.*)$", re.S
)
#: a plain field chain (``.spec.replicas``) not preceded by a name, bracket or parenthesis.
_CHAIN = re.compile(r"(?<![\w\]\)\"])((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def replica_range(
    component: Component, scale: Scale | None, *, where: str
) -> tuple[int, int] | None:
    """``(low, high)`` of an instance of a component with a scale range (module docstring), or
    ``None`` when the component declares no range. ``where`` names the object and instance."""
    definition_scale = component.scale
    if definition_scale is None or scale is None:
        return None
    if definition_scale.min_replicas_path is None and definition_scale.max_replicas_path is None:
        return None
    low_declared, high_declared = scale.min_replicas, scale.max_replicas
    if low_declared is not None and high_declared is not None and low_declared > high_declared:
        raise InterpretationError(
            f"{where}: {component.field}.scaleDefinition.minReplicasPath gives {low_declared}, "
            f"more than maxReplicasPath's {high_declared}: set minReplicas at most maxReplicas"
        )
    declared = replicas_of(scale)
    low = low_declared if low_declared is not None and low_declared > 0 else declared
    high = high_declared if high_declared is not None else declared
    return min(low, high), high


def write_replicas(
    obj: Mapping[str, Any],
    definition: Definition,
    counts: Mapping[tuple[str, str], int],
    *,
    where: str,
    limits: JqLimits = DEFAULT_LIMITS,
    extraction: Extraction | None = None,
) -> dict[str, Any]:
    """A copy of ``obj`` in which each ``(component, instance)`` of ``counts`` reads its count
    through ``definition`` (module docstring). ``extraction``: ``obj`` as ``definition``
    already read it, when the caller has it (saves reading it again). Raises
    :class:`InterpretationError` naming the component, instance and ``replicasPath`` when no
    field of the path reads back."""
    if not counts:
        return copy.deepcopy(dict(obj))
    before = (
        _replicas(obj, definition, where, limits)
        if extraction is None
        else _counts(extraction, definition)
    )
    result: Mapping[str, Any] = obj  # every trial below writes on a copy of its own
    for (name, instance), count in counts.items():
        component = definition.component(name)
        label = f"{name}/{instance}" if instance else name
        path = component.scale.replicas_path if component.scale is not None else None
        field = f"{component.field}.scaleDefinition.replicasPath"
        if (name, instance) not in before:
            raise InterpretationError(f"{where}: component {label!r} has no such instance")
        if before[(name, instance)][0] == count:
            continue
        if not path:
            raise InterpretationError(
                f"{where}: component {label!r}: {field} is missing, so placer cannot write "
                f"{count} replicas: add the jq path of the replicas field to the definition"
            )
        position = [key for key in before if key[0] == name].index((name, instance))
        written = None
        for keys in _candidates(path, position, component.instance_id_path is not None):
            trial = _set(result, keys, count)
            if trial is None:
                continue
            now = _replicas(trial, definition, where, limits)
            wanted = (count, *before[(name, instance)][1:])
            if now.get((name, instance)) == wanted and all(
                now.get(key) == value for key, value in before.items() if key != (name, instance)
            ):
                written = trial
                break
        if written is None:
            raise InterpretationError(
                f"{where}: component {label!r}: cannot write {count} replicas through {field} "
                f"`{path}`: no field of the path reads back as {count}"
            )
        result = written
        before[(name, instance)] = (count, *before[(name, instance)][1:])
    return copy.deepcopy(dict(obj)) if result is obj else dict(result)


def _replicas(
    obj: Mapping[str, Any], definition: Definition, where: str, limits: JqLimits
) -> dict[tuple[str, str], tuple[int, int | None, int | None]]:
    """Every pod-bearing instance's count, minimum and maximum as the definition reads them,
    in position order."""
    extraction = extract(to_json_text(normalize(obj)), definition, where=where, limits=limits)
    return _counts(extraction, definition)


def _counts(
    extraction: Extraction, definition: Definition
) -> dict[tuple[str, str], tuple[int, int | None, int | None]]:
    """:func:`_replicas` of an object already extracted."""
    return {
        (component.name, instance.id): (
            instance.replicas,
            instance.scale.min_replicas if instance.scale is not None else None,
            instance.scale.max_replicas if instance.scale is not None else None,
        )
        for component in definition.components
        if component.has_pod_definition
        for instance in extraction.instances[component.name]
    }


def _candidates(path: str, position: int, multi: bool) -> list[tuple[str | int, ...]]:
    """Where to try writing: each plain field chain of ``path``, in order of appearance; for a
    multi-instance path, those after the enumeration, inside the instance's element."""
    prefix: tuple[str | int, ...] = ()
    text = path
    if multi:
        match = _ENUMERATION.match(path)
        if match is None:
            return []
        prefix = (*match.group("prefix").split(".")[1:], position)
        text = match.group("rest")
    chains = dict.fromkeys(m.group(1) for m in _CHAIN.finditer(text))
    return [(*prefix, *chain.split(".")[1:]) for chain in chains]


def _set(obj: Mapping[str, Any], keys: tuple[str | int, ...], value: int) -> dict[str, Any] | None:
    """A copy of ``obj`` with ``value`` at ``keys`` (missing mappings created at the end of the
    chain), or ``None`` when the chain runs into something else than mappings and lists, or
    the field holds something else than a number (or nothing)."""
    result: dict[str, Any] = copy.deepcopy(dict(obj))
    target: Any = result
    for key in keys[:-1]:
        if isinstance(key, int):
            if not isinstance(target, list) or key >= len(target):
                return None
            target = target[key]
            continue
        if not isinstance(target, dict):
            return None
        child = target.get(key)
        if child is None:
            child = target[key] = {}
        target = child
    last = keys[-1]
    if not isinstance(target, dict) or not isinstance(last, str):
        return None
    current = target.get(last)
    if current is not None and (isinstance(current, bool) or not isinstance(current, int | str)):
        return None
    target[last] = value
    return result
