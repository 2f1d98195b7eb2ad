"""Definition validation: upstream's rule set (spec section 10) plus the checks it forgot.

Upstream's rules, in upstream's order: unique component names (stop if not); the root has a full
kind, no owner and a status definition; every child has an existing owner; no component has
two pod-spec shapes; ``instanceIdPath`` and ``componentInstanceSelector`` come together; no
ownership cycle; alpha gang members exist; every jq field parses and passes the safety rules
(:func:`placer.definitions.jqsyntax.safety_violations`).

Added by placer for safety: no jq field may reach outside the object (``$ENV``, ``env``,
``input``, ``now``, ``debug``, ``import``...: :func:`placer.definitions.jqsyntax.
isolation_violations`), since definitions (hub Kartas, ``--catalog`` files) are untrusted and run
in placer's own process; nor may its cost grow exponentially with the expression (``.+. | .+.
| ...``: :mod:`placer.definitions.jqcost`).

Added by placer, because each of these otherwise fails later with a worse message (or
silently): an empty jq string (gojq cannot run it), ``componentTypeSelector`` without
``keyPath`` nor ``matchLabels`` and ``value`` without ``keyPath`` (the CRD's CEL rules, which
files never meet), suspend action values that are not JSON, and ``podGroup.subGroups`` naming a
component that does not exist.

Every problem names the component (when there is one) and the field path in the document.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterator

from placer.definitions.jq import compile_jq, compile_problems
from placer.definitions.jqsyntax import isolation_violations, safety_violations
from placer.definitions.model import ANNOTATION_ELASTIC, Component, Definition
from placer.errors import DefinitionInvalidError, JqError

__all__ = ["check_definition", "jq_fields", "remember_valid", "validate_definition"]


def validate_definition(definition: Definition) -> list[str]:
    """Every problem of ``definition`` (empty list when it is valid)."""
    problems: list[str] = []
    names = [c.name for c in (*definition.children, definition.root)]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            problems.append(f"component name {name} is not unique")
        seen.add(name)
    if problems:
        return problems

    structural: list[str] = []
    root = definition.root
    kind = root.kind
    if kind is None or not kind.version or not kind.kind or (not kind.group and kind.kind != "Pod"):
        structural.append(f"{_at(root)}: root component must have full kind (group, version, kind)")
    if root.owner:
        structural.append(f"{_at(root)}: root component cannot have owner ref")
    if root.status is None:
        structural.append(f"{_at(root)}: root component must have status definition")
    structural.extend(_component_problems(root))
    known = set(names)
    for child in definition.children:
        if not child.owner:
            structural.append(f"{_at(child)}: child component '{child.name}' has no owner ref")
        elif child.owner not in known:
            structural.append(
                f"{_at(child)}: child component '{child.name}' has owner ref to non-existing "
                f"component '{child.owner}'"
            )
        structural.extend(_component_problems(child))
    problems.extend(structural)
    if not structural:
        cycle = _cycle(definition)
        if cycle is not None:
            problems.append(f"ownership cycle detected involving component {cycle}")

    gang = definition.gang
    if gang is not None:
        for g, group in enumerate(gang.pod_groups):
            for m, member in enumerate(group.members):
                if member.component_name not in known:
                    problems.append(
                        f"spec.optimizationInstructions.gangScheduling.podGroups[{g}].members[{m}]"
                        f": pod-group member component '{member.component_name}' is not defined "
                        "(should be a root or child component)"
                    )
        if gang.pod_group is not None:
            for s, sub in enumerate(gang.pod_group.sub_groups):
                if sub.component_name not in known:
                    problems.append(
                        f"spec.optimizationInstructions.gangScheduling.podGroup.subGroups[{s}]: "
                        f"sub-group component '{sub.component_name}' is not defined"
                    )

    if definition.elastic:
        problems.extend(_elastic_problems(definition))

    for component in definition.components:
        if component.suspend is None:
            continue
        for key, actions in (
            ("suspendActions", component.suspend.suspend_actions),
            ("resumeActions", component.suspend.resume_actions),
        ):
            field = f"{component.field}.suspendDefinition.{key}"
            if not actions:
                problems.append(f"{_named(component)} {field}: needs at least one action")
            for i, action in enumerate(actions):
                try:
                    json.loads(action.value)
                except ValueError:
                    problems.append(
                        f"{_named(component)} {field}[{i}].value: {action.value!r} is not JSON "
                        "(write strings with quotes, e.g. '\"Suspended\"')"
                    )

    fields = list(jq_fields(definition))
    analysed: list[tuple[str, str]] = []
    for where, expression in fields:
        found = _jq_problems(where, expression)
        problems.extend(found)
        if not found and expression.strip():
            analysed.append((where, expression))
    # libjq's own check (undefined functions or variables...), one compile for all of them
    complaints = compile_problems([expression for _, expression in analysed])
    for where, expression in analysed:
        if expression in complaints:
            problems.append(
                f"{where}: failed to parse JQ expression {expression!r}: "
                f"does not compile: {complaints[expression]}"
            )
    return problems


_VALID: weakref.WeakSet[Definition] = weakref.WeakSet()


def check_definition(definition: Definition) -> Definition:
    """``definition`` itself when valid; raises :class:`DefinitionInvalidError` otherwise.

    A definition found valid is remembered (definitions are immutable), so catalogs and the
    interpreter can both insist on validity without paying for it twice.
    """
    if definition in _VALID:
        return definition
    problems = validate_definition(definition)
    if problems:
        raise DefinitionInvalidError(definition.name, problems, source=definition.source)
    _VALID.add(definition)
    return definition


def remember_valid(definition: Definition) -> None:
    """Take ``definition`` as valid without validating it again: for the compiled catalog
    (:mod:`placer.definitions.compiled`), whose definitions this same code validated when the
    cache entry was written."""
    _VALID.add(definition)


def _at(component: Component) -> str:
    return f"{_named(component)} {component.field}"


def _named(component: Component) -> str:
    return f"component '{component.name}'" if component.name else "component"


def _component_problems(component: Component) -> list[str]:
    problems = []
    if not component.name:
        problems.append(f"{component.field}: component name is empty")
    spec = component.spec
    if spec is not None:
        shapes = [
            spec.pod_template_spec_path is not None,
            spec.pod_spec_path is not None,
            spec.fragmented is not None,
        ]
        if sum(shapes) > 1:
            problems.append(
                f"{_at(component)}: component '{component.name}' has multiple pod spec definitions"
            )
    selector = component.pod_selector
    has_instance_selector = selector is not None and selector.component_instance is not None
    if component.instance_id_path is not None and not has_instance_selector:
        problems.append(
            f"{_at(component)}: component '{component.name}' has instance id path but no pod "
            "component instance selector"
        )
    if has_instance_selector and component.instance_id_path is None:
        problems.append(
            f"{_at(component)}: component '{component.name}' has pod component instance selector "
            "but no instance id path"
        )
    if selector is not None and selector.component_type is not None:
        type_selector = selector.component_type
        field = f"{component.field}.podSelector.componentTypeSelector"
        if not type_selector.key_path and not type_selector.match_labels:
            problems.append(
                f"{_named(component)} {field}: at least one of keyPath or matchLabels must be set"
            )
        if type_selector.value is not None and not type_selector.key_path:
            problems.append(f"{_named(component)} {field}: value requires keyPath")
    return problems


def _elastic_problems(definition: Definition) -> list[str]:
    """An elastic definition writes the chosen count through ``replicasPath``: a component
    with a range must have one, and some component must have a range."""
    problems = []
    ranged = 0
    for component in definition.components:
        scale = component.scale
        if scale is None or (scale.min_replicas_path is None and scale.max_replicas_path is None):
            continue
        ranged += 1
        if not scale.replicas_path:
            problems.append(
                f"{definition.label}: {_named(component)} "
                f"{component.field}.scaleDefinition.replicasPath: missing; "
                f"the definition is elastic ({ANNOTATION_ELASTIC}) and placer writes the chosen "
                "replica count there: add the jq path of the replicas field"
            )
    if not ranged:
        problems.append(
            f"{definition.label}: metadata.annotations[{ANNOTATION_ELASTIC}]: no component has a "
            "scaleDefinition.minReplicasPath or maxReplicasPath to place elastically: add them, "
            "or remove the annotation"
        )
    return problems


def _cycle(definition: Definition) -> str | None:
    owners = {c.name: c.owner for c in definition.children}
    for child in definition.children:
        seen = {child.name}
        current = child.owner
        while current is not None and current in owners:
            if current in seen:
                return child.name
            seen.add(current)
            current = owners[current]
    return None


def jq_fields(definition: Definition) -> Iterator[tuple[str, str]]:
    """(``component 'x' <field path>``, jq text) for every jq-valued field of the definition."""
    for c in definition.components:
        at = _at(c)
        if c.spec is not None:
            spec = f"{at}.specDefinition"
            for key, value in (
                ("podTemplateSpecPath", c.spec.pod_template_spec_path),
                ("podSpecPath", c.spec.pod_spec_path),
                ("metadataPath", c.spec.metadata_path),
            ):
                if value is not None:
                    yield f"{spec}.{key}", value
            if c.spec.fragmented is not None:
                for key, value in c.spec.fragmented.paths():
                    yield f"{spec}.fragmentedPodSpecDefinition.{key}", value
            for i, injected in enumerate(c.spec.injected):
                if injected.when_path is not None:
                    yield f"{spec}.injectedContainers[{i}].whenPath", injected.when_path
        if c.scale is not None:
            for key, maybe in (
                ("replicasPath", c.scale.replicas_path),
                ("minReplicasPath", c.scale.min_replicas_path),
                ("maxReplicasPath", c.scale.max_replicas_path),
            ):
                if maybe is not None:
                    yield f"{at}.scaleDefinition.{key}", maybe
        if c.status is not None:
            status = f"{at}.statusDefinition"
            if c.status.phase_path is not None:
                yield f"{status}.phaseDefinition.path", c.status.phase_path
            if c.status.conditions is not None:
                yield f"{status}.conditionsDefinition.path", c.status.conditions.path
            for name, matchers in c.status.mappings.items():
                for i, matcher in enumerate(matchers):
                    if matcher.by_expression is not None:
                        yield (
                            f"{status}.statusMappings.{name.lower()}[{i}].byExpression.expression",
                            matcher.by_expression.expression,
                        )
        if c.suspend is not None:
            for key, actions in (
                ("suspendActions", c.suspend.suspend_actions),
                ("resumeActions", c.suspend.resume_actions),
            ):
                for i, action in enumerate(actions):
                    yield f"{at}.suspendDefinition.{key}[{i}].path", action.path
        if c.instance_id_path is not None:
            yield f"{at}.instanceIdPath", c.instance_id_path
        selector = c.pod_selector
        if selector is not None:
            sel = f"{at}.podSelector"
            if selector.component_type is not None and selector.component_type.key_path:
                yield f"{sel}.componentTypeSelector.keyPath", selector.component_type.key_path
            if selector.component_instance is not None:
                yield f"{sel}.componentInstanceSelector.idPath", selector.component_instance.id_path
            if selector.replica is not None:
                yield f"{sel}.replicaSelector.keyPath", selector.replica.key_path
    if definition.gang is not None:
        base = "spec.optimizationInstructions.gangScheduling.podGroups"
        for g, group in enumerate(definition.gang.pod_groups):
            for m, member in enumerate(group.members):
                for k, path in enumerate(member.group_by_key_paths):
                    yield f"{base}[{g}].members[{m}].groupByKeyPaths[{k}]", path
                for k, path in enumerate(member.filters):
                    yield f"{base}[{g}].members[{m}].filters[{k}]", path


def _jq_problems(where: str, expression: str) -> list[str]:
    if not expression.strip():
        return [f"{where}: empty jq expression (gojq cannot run it; remove the field instead)"]
    try:
        program = compile_jq(expression)
    except JqError as exc:
        return [f"{where}: failed to parse JQ expression {expression!r}: {_plain(exc)}"]
    violations = [*safety_violations(program.tree), *isolation_violations(program.tree)]
    if program.bound.excessive:
        violations.append(
            f"{program.bound.reason}: it could exhaust the memory or time of placer "
            "(each step like `.+.`, `[.,.]` or `(.,.)` doubles it); simplify the expression"
        )
    return [
        f"{where}: JQ expression {expression!r} failed validation: {violation}"
        for violation in violations
    ]


def _plain(exc: JqError) -> str:
    text = exc.message
    prefix = f"jq {exc.expression!r}: "
    return text.removeprefix(prefix)
