"""Changing a workload's pod templates where its definition says they are (pure).

A definition tells with jq paths where each pod-bearing component keeps its pod template
(``podTemplateSpecPath``), or its PodSpec and pod metadata (``podSpecPath``, ``metadataPath``),
or the fragments of one (``fragmentedPodSpecDefinition``). :func:`template_sites` turns those
paths into the concrete locations in one object — one :class:`TemplateSite` per component
instance, paired with the instance ids by position as extraction pairs them — and
:func:`edit_templates` writes a :class:`TemplateEdit` there (pod labels and annotations, the
``schedulerName``, a required node affinity) on a copy of the object. This is how placer hands a
workload to a member's gang scheduler without any framework-specific code.

jq paths are asked of libjq as ``path(<expression>)`` (the definitions' safety rules still hold:
no assignment runs). A metadata path that builds its value (``.spec.predictor | {labels,
annotations}``) is followed to where the keys come from when it only picks them; otherwise that
site cannot take labels or annotations and :attr:`EditResult.problems` says so, naming the
definition, the component and the path.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placer.definitions.jq import DEFAULT_LIMITS, JqLimits, compile_jq, normalize, to_json_text
from placer.definitions.model import Component, Definition
from placer.errors import InterpretationError, JqError

__all__ = ["EditResult", "TemplateEdit", "TemplateSite", "edit_templates", "template_sites"]

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class TemplateSite:
    """Where one component instance keeps its pod template in the object.

    ``None`` for a part the definition does not locate (or builds, so it cannot be written).
    """

    component: str
    instance: str
    #: the PodSpec (``template.spec``, the ``podSpecPath`` output).
    spec: Path | None = None
    #: the pod ObjectMeta (``template.metadata``, the ``metadataPath`` output).
    metadata: Path | None = None
    #: fragmented definitions: the fields themselves.
    scheduler_name: Path | None = None
    labels: Path | None = None
    annotations: Path | None = None
    node_affinity: Path | None = None
    #: why a part could not be located, in words (definition, component, path).
    problems: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.component}/{self.instance}" if self.instance else self.component


@dataclass(frozen=True)
class TemplateEdit:
    """What to change in one pod template (empty fields change nothing)."""

    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    scheduler_name: str = ""
    #: node names the pods must run on: a required node affinity on ``metadata.name``, added
    #: to every required term the template already has (both must hold).
    nodes: tuple[str, ...] = ()
    #: the topology domain the pods must stay in: node label key -> value, a required node
    #: affinity ``key In (value)`` added to every required term (placer.topology).
    domain: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(
            self.labels or self.annotations or self.scheduler_name or self.nodes or self.domain
        )


@dataclass(frozen=True)
class EditResult:
    """The edited copy, and what could not be written (each naming the site and field)."""

    body: dict[str, Any]
    problems: tuple[str, ...] = ()
    #: the component instances changed, as ``component[/instance]``.
    edited: tuple[str, ...] = ()


def template_sites(
    obj: Mapping[str, Any], definition: Definition, *, limits: JqLimits = DEFAULT_LIMITS
) -> tuple[TemplateSite, ...]:
    """One site per instance of every pod-bearing component of ``obj`` (definition order).

    Raises:
        InterpretationError: a path's outputs cannot be paired with the instance ids.
    """
    text = to_json_text(normalize(obj))
    sites: list[TemplateSite] = []
    for component in definition.components:
        spec = component.spec
        if spec is None or not spec.has_pod_definition:
            continue
        at = f"{definition.label}, {component.label}"
        ids = _instance_ids(component, text, limits, at)
        sites += _component_sites(component, text, ids, limits, at)
    return tuple(sites)


def edit_templates(
    obj: Mapping[str, Any],
    definition: Definition,
    edit_for: Callable[[TemplateSite], TemplateEdit | None],
    *,
    limits: JqLimits = DEFAULT_LIMITS,
) -> EditResult:
    """A copy of ``obj`` with ``edit_for(site)`` written at every site (``None``: untouched)."""
    body: dict[str, Any] = copy.deepcopy(dict(obj))
    problems: list[str] = []
    edited: list[str] = []
    for site in template_sites(obj, definition, limits=limits):
        edit = edit_for(site)
        if not edit:
            continue
        assert edit is not None
        before = len(problems)
        _write(body, site, edit, problems)
        if len(problems) == before:
            edited.append(site.label)
    return EditResult(body, tuple(dict.fromkeys(problems)), tuple(edited))


# --------------------------------------------------------------------------------------------


def _write(
    body: dict[str, Any], site: TemplateSite, edit: TemplateEdit, problems: list[str]
) -> None:
    def missing(part: str) -> None:
        reason = "; ".join(site.problems) or "the definition does not say where it is"
        problems.append(f"{site.label}: cannot write the pod's {part} ({reason})")

    meta = site.metadata
    for part, values, fragment in (
        ("labels", edit.labels, site.labels),
        ("annotations", edit.annotations, site.annotations),
    ):
        if not values:
            continue
        target = fragment if fragment is not None else ((*meta, part) if meta is not None else None)
        if target is None:
            missing(part)
            continue
        current = _get(body, target)
        merged = dict(current) if isinstance(current, Mapping) else {}
        merged.update(values)
        _set(body, target, merged)
    if edit.scheduler_name:
        target = site.scheduler_name or (
            (*site.spec, "schedulerName") if site.spec is not None else None
        )
        if target is None:
            missing("schedulerName")
        else:
            _set(body, target, edit.scheduler_name)
    if edit.nodes or edit.domain:
        target = site.node_affinity
        if target is None and site.spec is not None:
            target = (*site.spec, "affinity", "nodeAffinity")
        if target is None:
            missing("node affinity")
        else:
            affinity = _get(body, target)
            if edit.nodes:
                affinity = _pinned(affinity, edit.nodes)
            if edit.domain:
                affinity = _in_domain(affinity, edit.domain)
            _set(body, target, affinity)


def _pinned(current: Any, nodes: Sequence[str]) -> dict[str, Any]:
    """A nodeAffinity whose required terms each also demand one of ``nodes`` by name."""
    affinity = copy.deepcopy(dict(current)) if isinstance(current, Mapping) else {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    pin = {"key": "metadata.name", "operator": "In", "values": sorted(set(nodes))}
    kept = [dict(t) for t in terms or () if isinstance(t, Mapping)] or [{}]
    for term in kept:
        fields = [f for f in term.get("matchFields") or () if f.get("key") != "metadata.name"]
        term["matchFields"] = [*fields, pin]
    affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": kept}
    return affinity


def _in_domain(current: Any, domain: Mapping[str, str]) -> dict[str, Any]:
    """A nodeAffinity whose required terms each also demand the label values of ``domain``
    (``key In (value)``; an expression of the template on the same key is replaced)."""
    affinity = copy.deepcopy(dict(current)) if isinstance(current, Mapping) else {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    kept = [dict(t) for t in terms or () if isinstance(t, Mapping)] or [{}]
    for term in kept:
        expressions = [
            e
            for e in term.get("matchExpressions") or ()
            if not (isinstance(e, Mapping) and e.get("key") in domain)
        ]
        term["matchExpressions"] = [
            *expressions,
            *({"key": k, "operator": "In", "values": [v]} for k, v in sorted(domain.items())),
        ]
    affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": kept}
    return affinity


def _instance_ids(component: Component, text: str, limits: JqLimits, at: str) -> list[str]:
    if component.instance_id_path is None:
        return [""]
    outputs = _run(component.instance_id_path, text, limits, f"{at} instanceIdPath")
    return [str(v) for v in outputs if v is not None]


def _component_sites(
    component: Component, text: str, ids: Sequence[str], limits: JqLimits, at: str
) -> list[TemplateSite]:
    spec = component.spec
    assert spec is not None
    columns: dict[str, list[Path | None]] = {}
    problems: list[str] = []

    def locate(key: str, expression: str | None) -> None:
        if expression is None:
            return
        paths, problem = _paths(expression, text, limits, f"{at} specDefinition.{key}")
        if problem:
            problems.append(problem)
            return
        if len(paths) != len(ids):
            raise InterpretationError(
                f"{at} specDefinition.{key}: instance ids count ({len(ids)}) does not match "
                f"results count ({len(paths)})"
            )
        columns[key] = list(paths)

    if spec.pod_template_spec_path is not None:
        locate("podTemplateSpecPath", spec.pod_template_spec_path)
        bases = columns.pop("podTemplateSpecPath", None)
        if bases is not None:
            columns["spec"] = [(*b, "spec") if b is not None else None for b in bases]
            columns["metadata"] = [(*b, "metadata") if b is not None else None for b in bases]
    elif spec.pod_spec_path is not None:
        locate("podSpecPath", spec.pod_spec_path)
        locate("metadataPath", spec.metadata_path)
        if "podSpecPath" in columns:
            columns["spec"] = columns.pop("podSpecPath")
        if "metadataPath" in columns:
            columns["metadata"] = columns.pop("metadataPath")
    elif spec.fragmented is not None:
        fragments = spec.fragmented
        base = "fragmentedPodSpecDefinition"
        locate(f"{base}.schedulerNamePath", fragments.scheduler_name_path)
        locate(f"{base}.labelsPath", fragments.labels_path)
        locate(f"{base}.annotationsPath", fragments.annotations_path)
        locate(f"{base}.nodeAffinityPath", fragments.node_affinity_path)
        for key, name in (
            ("schedulerNamePath", "scheduler_name"),
            ("labelsPath", "labels"),
            ("annotationsPath", "annotations"),
            ("nodeAffinityPath", "node_affinity"),
        ):
            if f"{base}.{key}" in columns:
                columns[name] = columns.pop(f"{base}.{key}")
    sites: list[TemplateSite] = []
    for index, instance in enumerate(ids):
        parts = {key: column[index] for key, column in columns.items()}
        sites.append(
            TemplateSite(
                component.name,
                instance,
                spec=parts.get("spec"),
                metadata=parts.get("metadata"),
                scheduler_name=parts.get("scheduler_name"),
                labels=parts.get("labels"),
                annotations=parts.get("annotations"),
                node_affinity=parts.get("node_affinity"),
                problems=tuple(problems),
            )
        )
    return sites


def _paths(expression: str, text: str, limits: JqLimits, where: str) -> tuple[list[Path], str]:
    """The concrete paths ``expression`` reads, or why not."""
    candidates = [expression]
    picked = _picked_from(expression)
    if picked is not None:
        candidates.append(picked)
    problem = ""
    for candidate in candidates:
        try:
            outputs = _run(f"path({candidate}\n\n)", text, limits, where)
        except JqError as exc:
            problem = f"{where} {expression!r} builds a value, so it cannot be written ({exc})"
            continue
        paths: list[Path] = []
        for output in outputs:
            if not isinstance(output, list) or not all(
                isinstance(k, (str, int)) and not isinstance(k, bool) for k in output
            ):
                return [], f"{where} {expression!r}: unusable path {output!r}"
            paths.append(tuple(output))
        return paths, ""
    return [], problem


def _picked_from(expression: str) -> str | None:
    """``X`` when ``expression`` is ``X | {labels, annotations}`` (keys picked as they are)."""
    try:
        tree = compile_jq(expression).tree
    except JqError:
        return None
    if tree.kind != "pipe" or len(tree.children) != 2:
        return None
    left, right = tree.children
    if right.kind != "object" or not right.children:
        return None
    for entry in right.children:
        if len(entry.children) != 1 or entry.children[0].kind != "literal":
            return None
        if entry.children[0].value not in ("labels", "annotations"):
            return None
    return expression[left.start : left.end]


def _run(expression: str, text: str, limits: JqLimits, where: str) -> list[Any]:
    return compile_jq(expression).run(text, limits=limits, location=where)


def _get(body: Any, path: Path) -> Any:
    node = body
    for key in path:
        if isinstance(key, str) and isinstance(node, Mapping):
            node = node.get(key)
        elif isinstance(key, int) and isinstance(node, list) and 0 <= key < len(node):
            node = node[key]
        else:
            return None
    return node


def _set(body: dict[str, Any], path: Path, value: Any) -> None:
    if not path:
        raise InterpretationError("cannot replace the whole object")
    node: Any = body
    for depth, key in enumerate(path[:-1]):
        following = path[depth + 1]
        fresh: Any = [] if isinstance(following, int) else {}
        if isinstance(key, str):
            if node.get(key) is None:
                node[key] = fresh
            node = node[key]
        else:
            while len(node) <= key:
                node.append(None)
            if node[key] is None:
                node[key] = fresh
            node = node[key]
    last = path[-1]
    if isinstance(last, str):
        node[last] = value
    else:
        while len(node) <= last:
            node.append(None)
        node[last] = value
