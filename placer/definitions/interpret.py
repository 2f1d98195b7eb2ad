"""Reading a workload object through its definition: instances, replicas, pod templates, status.

This is upstream's extraction (spec sections 4 and 5) with placer's improvements:

* **One libjq call per object.** Every jq path a definition needs for extraction and status is
  fused into one program (:class:`~placer.definitions.jq.JqBatch`), compiled once per
  definition and cached (:func:`plan_for`).
* **Instances and pairing** exactly as upstream: ``instanceIdPath`` outputs are the instance ids
  (strings, non-empty); every other path of the component is paired with them BY POSITION and
  must yield exactly as many outputs ("instance ids count (2) does not match results count (3)").
* **Replicas**: numbers or numeric strings (int32); ``null`` is absent. Upstream's
  ``replicasOf``: replicas if set, else minReplicas, else 1. Unlike upstream, a negative count
  or a fraction is an error naming the path, not a silent conversion; so is a string in a
  field of the object a scale path reads as a value (``parallelism: "3"``: Kubernetes rejects
  it in an integer field, and jq would compare or add it as text: ``[\"3\", 10] | min`` is 10),
  :func:`check_count_fields`, naming the field (``spec.parallelism``) and what to write.
* **Pod templates** in the three shapes. For ``podSpecPath`` only real PodSpec fields with a
  value are kept (KServe's transformer spec mixes in ``minReplicas`` etc.; a PodSpec built with
  jq object construction may carry nulls); for fragmented definitions a PodSpec
  is synthesised from the fragments (containers + container; the custom resource's
  ``resources`` go to the main container when the containers request nothing, as upstream
  counts them).
* **Injected containers** (placer's ``specDefinition.injectedContainers`` extension): the
  containers a framework adds to every pod (Knative's queue-proxy, KServe's storage-initializer)
  are added to the template where their ``whenPath`` (jq on the object, one output per instance
  or one for all) is true, as containers, init containers or native sidecars; a container the
  template already names is left as the user wrote it.
* **Status** in upstream's fixed order, OR across matchers, AND within a matcher,
  ``byExpression`` on the first output of ``(expr) | tostring``; ``("Undefined",)`` when
  nothing matches.

Every error names the object, the definition, the component and the field (and the jq path for
jq failures).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placer.decoding import whole_number_problem
from placer.definitions.jq import DEFAULT_LIMITS, JqBatch, JqLimits, compile_batch
from placer.definitions.jqsyntax import JqSyntaxError, Segment, parse, value_paths
from placer.definitions.model import (
    STATUS_ORDER,
    Component,
    Definition,
    InjectedContainer,
    StatusDefinition,
)
from placer.definitions.validate import check_definition
from placer.errors import InterpretationError

__all__ = [
    "POD_SPEC_FIELDS",
    "ExtractedInstance",
    "Extraction",
    "Scale",
    "check_count_fields",
    "extract",
    "plan_for",
    "replicas_of",
]

#: PodSpec fields (Kubernetes 1.33); anything else in a ``podSpecPath`` output is dropped.
POD_SPEC_FIELDS = frozenset(
    "activeDeadlineSeconds affinity automountServiceAccountToken containers dnsConfig dnsPolicy "
    "enableServiceLinks ephemeralContainers hostAliases hostIPC hostNetwork hostPID hostUsers "
    "hostname hostnameOverride imagePullSecrets initContainers nodeName nodeSelector os overhead "
    "preemptionPolicy priority priorityClassName readinessGates resourceClaims resources "
    "restartPolicy runtimeClassName schedulerName schedulingGates securityContext serviceAccount "
    "serviceAccountName setHostnameAsFQDN shareProcessNamespace subdomain "
    "terminationGracePeriodSeconds tolerations topologySpreadConstraints volumes".split()
)
_INT32 = 2**31 - 1


@dataclass(frozen=True)
class Scale:
    """Replica counts of one instance as declared (``None`` = absent)."""

    replicas: int | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None


def replicas_of(scale: Scale | None) -> int:
    """Upstream's desired count: replicas if set (even 0), else minReplicas, else 1."""
    if scale is None:
        return 1
    if scale.replicas is not None:
        return scale.replicas
    if scale.min_replicas is not None:
        return scale.min_replicas
    return 1


@dataclass(frozen=True)
class ExtractedInstance:
    """One instance of a component: its id, declared scale and pod template (if pod-bearing)."""

    id: str
    scale: Scale | None
    #: ``{"metadata": {...}, "spec": {...}}`` for pod-bearing components, else ``None``; with
    #: the definition's injected containers added, as the framework runs the pod.
    template: Mapping[str, Any] | None
    #: the definition's injected containers this template got (placer extension).
    injected: tuple[InjectedContainer, ...] = ()

    @property
    def replicas(self) -> int:
        return replicas_of(self.scale)


@dataclass(frozen=True)
class Extraction:
    """Everything read from one object: instances per component (definition order), status."""

    instances: Mapping[str, tuple[ExtractedInstance, ...]]
    phases: tuple[str, ...]


# --------------------------------------------------------------------------------------------
# The plan: which expressions to evaluate, fused, per definition


@dataclass(frozen=True)
class _Slot:
    component: Component
    #: field path inside the component, e.g. ``scaleDefinition.replicasPath``.
    field: str


class _Plan:
    """The fused jq batch of a definition and where each expression's outputs go."""

    def __init__(self, definition: Definition, *, status_only: bool = False) -> None:
        self.definition = definition
        texts: list[str] = []
        self.slots: list[_Slot] = []
        self.index: dict[tuple[str, str], int] = {}
        #: (component, scale field, object field path) for every field of the object a scale
        #: path reads as a value (:func:`check_count_fields`).
        self.count_fields: list[tuple[Component, str, tuple[Segment, ...]]] = []

        def add(component: Component, field: str, text: str | None) -> None:
            if text is None:
                return
            self.index[(component.name, field)] = len(texts)
            texts.append(text)
            self.slots.append(_Slot(component, field))

        if not status_only:
            for c in definition.components:
                add(c, "instanceIdPath", c.instance_id_path)
                if c.spec is not None:
                    add(c, "specDefinition.podTemplateSpecPath", c.spec.pod_template_spec_path)
                    add(c, "specDefinition.podSpecPath", c.spec.pod_spec_path)
                    add(c, "specDefinition.metadataPath", c.spec.metadata_path)
                    if c.spec.fragmented is not None:
                        for key, text in c.spec.fragmented.paths():
                            add(c, f"specDefinition.fragmentedPodSpecDefinition.{key}", text)
                    for i, injected in enumerate(c.spec.injected):
                        add(
                            c,
                            f"specDefinition.injectedContainers[{i}].whenPath",
                            injected.when_path,
                        )
                if c.scale is not None:
                    paths: tuple[tuple[str, str | None], ...] = (
                        ("replicasPath", c.scale.replicas_path),
                        ("minReplicasPath", c.scale.min_replicas_path),
                        ("maxReplicasPath", c.scale.max_replicas_path),
                    )
                    for key, scale_path in paths:
                        add(c, f"scaleDefinition.{key}", scale_path)
                        self.count_fields += [
                            (c, f"scaleDefinition.{key}", path) for path in _read_fields(scale_path)
                        ]
        root = definition.root
        status = root.status
        if status is not None:
            add(root, "statusDefinition.phaseDefinition.path", status.phase_path)
            if status.conditions is not None:
                add(root, "statusDefinition.conditionsDefinition.path", status.conditions.path)
            for name, matchers in status.mappings.items():
                for i, matcher in enumerate(matchers):
                    if matcher.by_expression is not None:
                        field = f"statusDefinition.statusMappings.{name.lower()}[{i}].byExpression"
                        add(root, field, f"({matcher.by_expression.expression}\n\n) | tostring")
        self.batch: JqBatch = compile_batch(tuple(texts))

    def run(self, input_text: str, limits: JqLimits, where: str) -> list[list[Any]]:
        def locate(index: int) -> str:
            slot = self.slots[index]
            return f"{where}: {slot.component.label} {slot.field}"

        return self.batch.run(input_text, limits=limits, locate=locate)


_PLANS: weakref.WeakKeyDictionary[Definition, _Plan] = weakref.WeakKeyDictionary()
_STATUS_PLANS: weakref.WeakKeyDictionary[Definition, _Plan] = weakref.WeakKeyDictionary()


def plan_for(definition: Definition, *, status_only: bool = False) -> _Plan:
    """The cached plan of ``definition`` (validated once; invalid definitions raise)."""
    cache = _STATUS_PLANS if status_only else _PLANS
    plan = cache.get(definition)
    if plan is None:
        check_definition(definition)
        plan = _Plan(definition, status_only=status_only)
        cache[definition] = plan
    return plan


# --------------------------------------------------------------------------------------------
# Extraction


def extract(
    input_text: str,
    definition: Definition,
    *,
    where: str,
    limits: JqLimits = DEFAULT_LIMITS,
) -> Extraction:
    """Instances of every component and the matched statuses of the JSON object ``input_text``.

    ``where`` names the object in messages (``jobset.yaml: JobSet/demo: definition 'x'``).
    """
    plan = plan_for(definition)
    outputs = plan.run(input_text, limits, where)

    def get(component: Component, field: str) -> list[Any] | None:
        index = plan.index.get((component.name, field))
        return None if index is None else outputs[index]

    instances: dict[str, tuple[ExtractedInstance, ...]] = {}
    for component in definition.components:
        at = f"{where}: {component.label}"
        ids = _instance_ids(component, get(component, "instanceIdPath"), at)
        scales = _scales(component, get, ids, at)
        templates = _templates(component, get, ids, at)
        injected = _injected(component, get, ids, at)
        instances[component.name] = tuple(
            ExtractedInstance(
                id_,
                scales[i],
                _inject(templates[i], injected[i]),
                injected[i] if templates[i] is not None else (),
            )
            for i, id_ in enumerate(ids)
        )
    phases = _phases(
        definition.root.status,
        lambda field: get(definition.root, field),
        f"{where}: {definition.root.label}",
    )
    return Extraction(instances, phases)


def check_count_fields(obj: Mapping[str, Any], definition: Definition, *, where: str) -> None:
    """Every field of ``obj`` a scale path of ``definition`` reads as a value holds no string
    (see the module docstring, "Replicas"); labels and annotations (any ``metadata``: the
    object's, a pod template's) are strings by their schema and not looked at.

    Raises:
        InterpretationError: naming the object, component and field and what to write.
    """
    for component, field, path in plan_for(definition).count_fields:
        for at, value in _values_at(obj, path):
            if not isinstance(value, str):
                continue
            raise InterpretationError(
                f"{where}: {component.label}: {at} {whole_number_problem(value)} (Kubernetes "
                f"requires an integer there and rejects the object as it is; the definition's "
                f"{field} reads it as a count)"
            )


def _read_fields(text: str | None) -> list[tuple[Segment, ...]]:
    if text is None:
        return []
    try:
        paths = value_paths(parse(text))
    except JqSyntaxError:  # libjq decides whether it compiles; nothing to check here
        return []
    return [p for p in paths if "metadata" not in p]


def _values_at(value: Any, path: Sequence[Segment], at: str = "") -> list[tuple[str, Any]]:
    """The values at ``path`` in ``value`` with their field paths (``spec.jobs[0].replicas``);
    none where the path does not lead."""
    if not path:
        return [(at, value)]
    head, rest = path[0], path[1:]
    if head is None:
        if not isinstance(value, list):
            return []
        return [v for i, item in enumerate(value) for v in _values_at(item, rest, f"{at}[{i}]")]
    if not isinstance(value, Mapping) or head not in value:
        return []
    return _values_at(value[head], rest, f"{at}.{head}" if at else head)


def status_phases(
    input_text: str, definition: Definition, *, where: str, limits: JqLimits = DEFAULT_LIMITS
) -> tuple[str, ...]:
    """Only the matched statuses (cheaper than :func:`extract`)."""
    plan = plan_for(definition, status_only=True)
    outputs = plan.run(input_text, limits, where)

    def get(field: str) -> list[Any] | None:
        index = plan.index.get((definition.root.name, field))
        return None if index is None else outputs[index]

    return _phases(definition.root.status, get, f"{where}: {definition.root.label}")


def _instance_ids(component: Component, outputs: list[Any] | None, at: str) -> list[str]:
    if outputs is None:
        return [""]
    field = f"{at} instanceIdPath {component.instance_id_path!r}"
    ids = []
    for i, value in enumerate(outputs):
        if not isinstance(value, str):
            raise InterpretationError(
                f"{field}: output {i} is {_describe(value)}, expected a string instance id"
            )
        ids.append(value)
    empty = [v for v in ids if v == ""]
    if empty:
        raise InterpretationError(
            f"{field}: instance id path contained empty string values {ids}",
        )
    return ids


def _zip(outputs: Sequence[Any], ids: Sequence[str], field: str) -> list[Any]:
    if len(outputs) != len(ids):
        raise InterpretationError(
            f"{field}: instance ids count ({len(ids)}) does not match results count "
            f"({len(outputs)})",
        )
    return list(outputs)


def _scales(
    component: Component,
    get: Callable[[Component, str], list[Any] | None],
    ids: Sequence[str],
    at: str,
) -> list[Scale | None]:
    if component.scale is None:
        return [None] * len(ids)
    scale = component.scale
    columns = []
    for key, text in (
        ("replicasPath", scale.replicas_path),
        ("minReplicasPath", scale.min_replicas_path),
        ("maxReplicasPath", scale.max_replicas_path),
    ):
        field = f"scaleDefinition.{key}"
        outputs = get(component, field) or []
        where = f"{at} {field} {text!r}"
        columns.append([_count(v, i, where) for i, v in enumerate(outputs)])
    count = max(len(column) for column in columns)
    rows = [
        Scale(*(column[i] if i < len(column) else None for column in columns)) for i in range(count)
    ]
    return _zip(rows, ids, f"{at} scaleDefinition")


def _count(value: Any, index: int, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise InterpretationError(f"{field}: output {index} is a boolean, expected a number")
    if isinstance(value, str):
        text = value.strip()
        try:
            number = int(text, 10)
        except ValueError:
            raise InterpretationError(
                f"{field}: replicas value {value!r} at index {index} is not a number"
            ) from None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float):
        if not value.is_integer():
            raise InterpretationError(
                f"{field}: replicas value {value!r} at index {index} is not a whole number"
            )
        number = int(value)
    else:
        raise InterpretationError(
            f"{field}: output {index} is {_describe(value)}, expected a number"
        )
    if number < 0:
        raise InterpretationError(f"{field}: replicas value {number} at index {index} is negative")
    if number > _INT32:
        raise InterpretationError(
            f"{field}: replicas value {number} at index {index} is out of range (int32)"
        )
    return number


def _templates(
    component: Component,
    get: Callable[[Component, str], list[Any] | None],
    ids: Sequence[str],
    at: str,
) -> list[Mapping[str, Any] | None]:
    spec = component.spec
    if spec is None or not spec.has_pod_definition:
        return [None] * len(ids)
    if spec.pod_template_spec_path is not None:
        field = "specDefinition.podTemplateSpecPath"
        where = f"{at} {field} {spec.pod_template_spec_path!r}"
        values = _zip(get(component, field) or [], ids, where)
        return [_template_from_template(v, f"{where}[{i}]") for i, v in enumerate(values)]
    if spec.pod_spec_path is not None:
        field = "specDefinition.podSpecPath"
        where = f"{at} {field} {spec.pod_spec_path!r}"
        specs = _zip(get(component, field) or [], ids, where)
        metas: list[Any] = [None] * len(ids)
        if spec.metadata_path is not None:
            meta_field = "specDefinition.metadataPath"
            metas = _zip(
                get(component, meta_field) or [],
                ids,
                f"{at} {meta_field} {spec.metadata_path!r}",
            )
        templates: list[Mapping[str, Any] | None] = []
        for i, value in enumerate(specs):
            pod_spec = _mapping(value, f"{where}[{i}]", "a PodSpec")
            meta = _mapping(metas[i], f"{at} specDefinition.metadataPath[{i}]", "an ObjectMeta")
            templates.append(
                {
                    "metadata": _metadata(meta, f"{at} specDefinition.metadataPath[{i}]"),
                    "spec": {
                        k: v for k, v in pod_spec.items() if k in POD_SPEC_FIELDS and v is not None
                    },
                }
            )
        return templates
    return _fragmented(component, get, ids, at)


def _injected(
    component: Component,
    get: Callable[[Component, str], list[Any] | None],
    ids: Sequence[str],
    at: str,
) -> list[tuple[InjectedContainer, ...]]:
    """Per instance, the injected containers (placer extension) whose ``whenPath`` holds."""
    spec = component.spec
    if spec is None or not spec.injected:
        return [()] * len(ids)
    chosen: list[list[InjectedContainer]] = [[] for _ in ids]
    for i, injected in enumerate(spec.injected):
        if injected.when_path is None:
            for row in chosen:
                row.append(injected)
            continue
        field = f"specDefinition.injectedContainers[{i}].whenPath"
        outputs = get(component, field) or []
        where = f"{at} {field} {injected.when_path!r}"
        if len(outputs) == 1 and len(ids) != 1:
            outputs = outputs * len(ids)
        for row, value in zip(chosen, _zip(outputs, ids, where), strict=True):
            if value is not None and not isinstance(value, bool):
                raise InterpretationError(f"{where}: is {_describe(value)}, expected true or false")
            if value:
                row.append(injected)
    return [tuple(row) for row in chosen]


def _inject(
    template: Mapping[str, Any] | None, injected: Sequence[InjectedContainer]
) -> Mapping[str, Any] | None:
    """``template`` with the injected containers added where the framework puts them."""
    if template is None or not injected:
        return template
    spec = dict(template.get("spec") or {})
    containers = list(spec.get("containers") or [])
    inits = list(spec.get("initContainers") or [])
    names = {c.get("name") for c in (*containers, *inits) if isinstance(c, Mapping)}
    for item in injected:
        if item.name in names:  # the user already wrote it (e.g. to size it): theirs counts
            continue
        container: dict[str, Any] = {"name": item.name, "resources": dict(item.resources)}
        if item.kind == "container":
            containers.append(container)
        elif item.kind == "sidecar":
            inits.append({**container, "restartPolicy": "Always"})
        else:
            inits.append(container)
    spec["containers"] = containers
    if inits:
        spec["initContainers"] = inits
    return {**template, "spec": spec}


def _template_from_template(value: Any, where: str) -> Mapping[str, Any]:
    template = _mapping(value, where, "a PodTemplateSpec")
    metadata = _mapping(template.get("metadata"), f"{where}.metadata", "an ObjectMeta")
    spec = _mapping(template.get("spec"), f"{where}.spec", "a PodSpec")
    return {"metadata": _metadata(metadata, f"{where}.metadata"), "spec": dict(spec)}


def _metadata(meta: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is None:
            continue
        out[key] = _string_map(value, f"{where}.{key}")
    return out


def _fragmented(
    component: Component,
    get: Callable[[Component, str], list[Any] | None],
    ids: Sequence[str],
    at: str,
) -> list[Mapping[str, Any] | None]:
    assert component.spec is not None and component.spec.fragmented is not None
    fragments = component.spec.fragmented
    base = "specDefinition.fragmentedPodSpecDefinition"
    columns: dict[str, list[Any]] = {}
    for key, _text in fragments.paths():
        columns[key] = get(component, f"{base}.{key}") or []
    count = max((len(c) for c in columns.values()), default=0)
    if count != len(ids):
        raise InterpretationError(
            f"{at} {base}: instance ids count ({len(ids)}) does not match results count ({count})"
        )
    templates: list[Mapping[str, Any] | None] = []
    for i in range(count):

        def value(key: str, i: int = i) -> Any:
            column = columns.get(key)
            return column[i] if column is not None and i < len(column) else None

        def where(key: str, i: int = i) -> str:
            text = dict(fragments.paths())[key]
            return f"{at} {base}.{key} {text!r} (output {i})"

        templates.append(_synthesise(value, where))
    return templates


def _synthesise(value: Callable[[str], Any], where: Callable[[str], str]) -> Mapping[str, Any]:
    containers: list[dict[str, Any]] = []
    listed = value("containersPath")
    if listed is not None:
        if not isinstance(listed, list):
            raise InterpretationError(
                f"{where('containersPath')}: is {_describe(listed)}, expected a list of containers"
            )
        for j, item in enumerate(listed):
            containers.append(
                dict(_mapping(item, f"{where('containersPath')}[{j}]", "a Container"))
            )
    single = value("containerPath")
    if single is not None:
        containers.append(dict(_mapping(single, where("containerPath"), "a Container")))
    resources = value("resourcesPath")
    if resources is not None:
        resources = _mapping(resources, where("resourcesPath"), "a ResourceRequirements")
        requests_nothing = not any(
            (c.get("resources") or {}).get("requests") or (c.get("resources") or {}).get("limits")
            for c in containers
        )
        if requests_nothing:
            if not containers:
                containers.append({"name": "main"})
            containers[0]["resources"] = dict(resources)
    image = value("imagePath")
    if image is not None:
        if not isinstance(image, str):
            raise InterpretationError(
                f"{where('imagePath')}: is {_describe(image)}, expected a string"
            )
        if not containers:
            containers.append({"name": "main"})
        containers[0].setdefault("image", image)
    spec: dict[str, Any] = {"containers": containers}
    for key, field, label in (
        ("schedulerNamePath", "schedulerName", "a string"),
        ("priorityClassNamePath", "priorityClassName", "a string"),
    ):
        text = value(key)
        if text is not None:
            if not isinstance(text, str):
                raise InterpretationError(f"{where(key)}: is {_describe(text)}, expected {label}")
            if text:
                spec[field] = text
    affinity: dict[str, Any] = {}
    for key, field in (("podAffinityPath", "podAffinity"), ("nodeAffinityPath", "nodeAffinity")):
        part = value(key)
        if part is not None:
            affinity[field] = dict(_mapping(part, where(key), "an affinity object"))
    if affinity:
        spec["affinity"] = affinity
    claims = value("resourceClaimsPath")
    if claims is not None:
        if not isinstance(claims, list):
            raise InterpretationError(
                f"{where('resourceClaimsPath')}: is {_describe(claims)}, expected a list"
            )
        spec["resourceClaims"] = claims
    metadata: dict[str, Any] = {}
    for key, field in (("labelsPath", "labels"), ("annotationsPath", "annotations")):
        part = value(key)
        if part is not None:
            metadata[field] = _string_map(part, where(key))
    return {"metadata": metadata, "spec": spec}


def _mapping(value: Any, where: str, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InterpretationError(f"{where}: is {_describe(value)}, expected {what}")
    return value


def _string_map(value: Any, where: str) -> dict[str, str]:
    mapping = _mapping(value, where, "a map of strings")
    out = {}
    for key, item in mapping.items():
        if not isinstance(item, str):
            raise InterpretationError(
                f"{where}: value of {key!r} is {_describe(item)}, expected a string"
            )
        out[str(key)] = item
    return out


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return "an object"


# --------------------------------------------------------------------------------------------
# Status


def _phases(
    status: StatusDefinition | None, get: Callable[[str], list[Any] | None], at: str
) -> tuple[str, ...]:
    if status is None:
        return ("Undefined",)
    phase: str | None = None
    phase_outputs = get("statusDefinition.phaseDefinition.path")
    if phase_outputs:
        first = phase_outputs[0]
        if first is None:
            phase = ""
        elif isinstance(first, str):
            phase = first
        else:
            raise InterpretationError(
                f"{at} statusDefinition.phaseDefinition.path {status.phase_path!r}: "
                f"is {_describe(first)}, expected a string"
            )
    conditions: dict[str, tuple[str | None, str | None]] = {}
    if status.conditions is not None:
        spec = status.conditions
        for output in get("statusDefinition.conditionsDefinition.path") or []:
            if output is None:
                continue
            if not isinstance(output, list):
                raise InterpretationError(
                    f"{at} statusDefinition.conditionsDefinition.path {spec.path!r}: "
                    f"is {_describe(output)}, expected a list of conditions"
                )
            for item in output:
                if not isinstance(item, Mapping):
                    continue
                ctype = item.get(spec.type_field)
                cstatus = item.get(spec.status_field)
                reason = item.get(spec.reason_field)
                conditions[ctype if isinstance(ctype, str) else ""] = (
                    cstatus if isinstance(cstatus, str) else None,
                    reason if isinstance(reason, str) else None,
                )
    matched = []
    for name in STATUS_ORDER:
        matchers = status.mappings.get(name)
        if not matchers:
            continue
        for i, matcher in enumerate(matchers):
            if matcher.by_phase and phase != matcher.by_phase:
                continue
            if matcher.by_conditions is not None and not all(
                _condition_holds(conditions, expected.type, expected.status, expected.reason)
                for expected in matcher.by_conditions
            ):
                continue
            if matcher.by_expression is not None:
                field = f"statusDefinition.statusMappings.{name.lower()}[{i}].byExpression"
                outputs = get(field) or []
                if not outputs or outputs[0] != matcher.by_expression.expected_result:
                    continue
            matched.append(name)
            break
    return tuple(matched) if matched else ("Undefined",)


def _condition_holds(
    conditions: Mapping[str, tuple[str | None, str | None]],
    ctype: str,
    status: str | None,
    reason: str | None,
) -> bool:
    if ctype not in conditions:
        return False
    actual_status, actual_reason = conditions[ctype]
    if status and (actual_status or "") != status:
        return False
    return not (reason and (actual_reason or "") != reason)
