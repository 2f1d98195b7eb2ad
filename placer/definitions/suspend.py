"""Suspending and resuming a workload object as its definition says (``suspendDefinition``).

Each action assigns a JSON value at a jq path (``.spec.suspend = true``). Upstream runs
``(<path>) = $value`` in gojq; placer asks libjq only for the paths (``path(<path>)``, which
keeps the jq safety rules: definitions may not contain assignments) and sets them itself on a
copy, so the original object is never modified. Actions run in order, each on the result of the
previous one.

The placement controller uses :func:`resume` when it dispatches a workload that waits suspended
on the hub.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from placer.definitions.jq import DEFAULT_LIMITS, JqLimits, compile_jq, normalize, relocate
from placer.definitions.jq import to_json_text as _json
from placer.definitions.model import Component, Definition, SuspendAction
from placer.errors import DefinitionError, InterpretationError, JqError

__all__ = ["can_suspend", "resume", "suspend"]


def _suspending_component(definition: Definition) -> Component | None:
    for component in definition.components:
        if component.suspend is not None and component.suspend.suspend_actions:
            return component
    return None


def can_suspend(definition: Definition) -> bool:
    """Whether ``definition`` says how to suspend (and resume) its workloads."""
    return _suspending_component(definition) is not None


def suspend(
    obj: Mapping[str, Any], definition: Definition, *, limits: JqLimits = DEFAULT_LIMITS
) -> dict[str, Any]:
    """A suspended copy of ``obj``; raises :class:`DefinitionError` if it cannot be suspended."""
    return _apply(obj, definition, "suspend", limits)


def resume(
    obj: Mapping[str, Any], definition: Definition, *, limits: JqLimits = DEFAULT_LIMITS
) -> dict[str, Any]:
    """A resumed copy of ``obj``; raises :class:`DefinitionError` if it cannot be resumed."""
    return _apply(obj, definition, "resume", limits)


def _apply(
    obj: Mapping[str, Any], definition: Definition, verb: str, limits: JqLimits
) -> dict[str, Any]:
    component = _suspending_component(definition)
    if component is None or component.suspend is None:
        kind = definition.target
        raise DefinitionError(
            f"{definition.label} has no suspendDefinition: {kind} workloads cannot be {verb}d",
            hint="add spec.structureDefinition.rootComponent.suspendDefinition to the definition",
        )
    actions: Sequence[SuspendAction] = (
        component.suspend.suspend_actions if verb == "suspend" else component.suspend.resume_actions
    )
    key = "suspendActions" if verb == "suspend" else "resumeActions"
    result: dict[str, Any] = copy.deepcopy(dict(obj))
    for i, action in enumerate(actions):
        field = f"{definition.label}, {component.label} suspendDefinition.{key}[{i}]"
        try:
            value = json.loads(action.value)
        except ValueError:
            raise DefinitionError(f"{field}.value: {action.value!r} is not JSON") from None
        program = compile_jq(f"path({action.path}\n\n)")
        try:
            paths = program.run(_json(normalize(result)), limits=limits)
        except JqError as exc:
            raise relocate(exc, f"{field}.path") from None
        for path in paths:
            _set(result, path, copy.deepcopy(value), f"{field}.path {action.path!r}")
    return result


def _set(target: Any, path: Any, value: Any, where: str) -> None:
    if not isinstance(path, list) or not path:
        raise InterpretationError(f"{where}: cannot assign to the whole object")
    node = target
    for depth, key in enumerate(path):
        last = depth == len(path) - 1
        follower: Any = None if last else path[depth + 1]
        fresh: Any = [] if isinstance(follower, int) else {}
        if isinstance(key, str):
            if not isinstance(node, dict):
                raise InterpretationError(f"{where}: cannot set key {key!r} on a non-object")
            if last:
                node[key] = value
            else:
                if node.get(key) is None:
                    node[key] = fresh
                node = node[key]
        elif isinstance(key, int) and not isinstance(key, bool):
            if not isinstance(node, list) or key < 0:
                raise InterpretationError(f"{where}: cannot set index {key} here")
            while len(node) <= key:
                node.append(None)
            if last:
                node[key] = value
            else:
                if node[key] is None:
                    node[key] = fresh
                node = node[key]
        else:
            raise InterpretationError(f"{where}: unsupported path element {key!r}")
