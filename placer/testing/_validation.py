"""Validation and defaulting of objects, the part of a real server's registry strategies that
client code notices.

What is checked (422 Invalid with one ``cause`` per field, worded like the real server):
object names (RFC 1123 subdomain, or label for namespaces), label keys and values, and a few
required fields of built-in kinds: pod containers with name and image, workload selectors that
match their template labels, job restart policy, cronjob schedule, and the parts of a
CustomResourceDefinition the server needs to serve it. What is not checked: OpenAPI schemas of
CRDs, immutability of pod specs, most value ranges. Defaults applied on create: pod
``restartPolicy``/``schedulerName``/``dnsPolicy``/``terminationGracePeriodSeconds`` and
``status.phase: Pending``, deployment ``replicas``, namespace label, finalizer and phase. Defaults
applied on create and update: the ``default`` values of a custom resource's structural schema
(through ``properties``, ``additionalProperties`` and ``items``), as the real server does.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Mapping
from typing import Any

from placer.testing._resources import ResourceType
from placer.testing._selectors import label_key_problem, label_value_problem
from placer.testing._status import StatusError, cause, invalid

__all__ = ["default_from_schema", "default_on_create", "validate"]

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_WORKLOADS = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"})


def _required(field: str, detail: str = "") -> dict[str, str]:
    message = "Required value" + (f": {detail}" if detail else "")
    return cause(field, message, "FieldValueRequired")


def _bad(field: str, value: Any, detail: str) -> dict[str, str]:
    return cause(field, f"Invalid value: {_go_repr(value)}: {detail}", "FieldValueInvalid")


def _go_repr(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def _get(obj: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj


def default_on_create(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Apply the defaults and status resets a real server applies on create (in place)."""
    meta = obj.setdefault("metadata", {})
    if rt.builtin and rt.group == "" and rt.kind == "Pod":
        spec = obj.setdefault("spec", {})
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        obj["status"] = {"phase": "Pending"}
    elif rt.builtin and rt.group == "" and rt.kind == "Namespace":
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name", "")
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
    elif rt.builtin and rt.kind == "Node":
        pass  # kubelets register nodes with their status: kept on create
    elif rt.builtin and rt.group == "apiextensions.k8s.io":
        pass  # status computed by the store when the CRD is served
    elif rt.status:
        if rt.builtin:
            obj["status"] = {}
        else:
            obj.pop("status", None)
    if rt.builtin and rt.group == "apps" and rt.kind in {"Deployment", "ReplicaSet", "StatefulSet"}:
        obj.setdefault("spec", {}).setdefault("replicas", 1)


def default_from_schema(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Fill in the ``default`` values of a custom resource's schema that ``obj`` lacks (in place).

    As the real server's structural defaulting: a property absent from an object gets its
    schema's default; defaults are then applied inside present objects, map values and list items.
    """
    if rt.schema:
        _fill_defaults(_parsed_schema(rt.schema), obj)


@functools.lru_cache(maxsize=64)
def _parsed_schema(text: str) -> dict[str, Any]:
    parsed = json.loads(text)
    return parsed if isinstance(parsed, dict) else {}


def _fill_defaults(schema: Mapping[str, Any], value: Any) -> None:
    if isinstance(value, dict):
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            for key, sub in properties.items():
                if not isinstance(sub, Mapping):
                    continue
                if key not in value and "default" in sub:
                    value[key] = copy.deepcopy(sub["default"])
                if key in value:
                    _fill_defaults(sub, value[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            known = properties if isinstance(properties, Mapping) else {}
            for key, item in value.items():
                if key not in known:
                    _fill_defaults(extra, item)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for item in value:
                _fill_defaults(items, item)


def validate(rt: ResourceType, obj: Mapping[str, Any]) -> None:
    """Raise 422 Invalid when ``obj`` breaks a rule the real server enforces.

    Raises:
        StatusError: 422 with every offending field as a cause.
    """
    name = _get(obj, "metadata", "name") or ""
    causes: list[dict[str, str]] = []
    if not name:
        causes.append(_required("metadata.name", "name or generateName is required"))
    elif rt.builtin and rt.kind == "Namespace":
        if len(name) > 63 or not _LABEL.match(name):
            causes.append(_bad("metadata.name", name, _LABEL_MSG))
    elif len(name) > 253 or not _SUBDOMAIN.match(name):
        causes.append(_bad("metadata.name", name, _SUBDOMAIN_MSG))
    labels = _get(obj, "metadata", "labels")
    if labels is not None and not isinstance(labels, Mapping):
        causes.append(_bad("metadata.labels", labels, "must be a map of strings"))
    for key, value in (labels or {}).items():
        problem = label_key_problem(str(key))
        if problem:
            causes.append(_bad("metadata.labels", key, problem))
        if not isinstance(value, str):
            causes.append(_bad(f"metadata.labels[{key}]", value, "must be a string"))
        elif label_value_problem(value):
            causes.append(_bad("metadata.labels", value, label_value_problem(value) or ""))
    annotations = _get(obj, "metadata", "annotations")
    for key, value in (annotations or {}).items():
        if not isinstance(value, str):
            causes.append(_bad(f"metadata.annotations[{key}]", value, "must be a string"))
    if rt.builtin:
        causes.extend(_builtin_causes(rt, obj))
    if causes:
        raise invalid(rt.kind, name, rt.group, causes)


def _pod_spec_causes(spec: Any, prefix: str) -> list[dict[str, str]]:
    causes: list[dict[str, str]] = []
    containers = _get(spec, "containers")
    if not isinstance(containers, list) or not containers:
        return [_required(f"{prefix}.containers")]
    for n, container in enumerate(containers):
        where = f"{prefix}.containers[{n}]"
        if not isinstance(container, Mapping):
            causes.append(_bad(where, container, "must be an object"))
            continue
        cname = container.get("name")
        if not cname:
            causes.append(_required(f"{where}.name"))
        elif not isinstance(cname, str) or len(cname) > 63 or not _LABEL.match(cname):
            causes.append(_bad(f"{where}.name", cname, _LABEL_MSG))
        if not container.get("image"):
            causes.append(_required(f"{where}.image"))
    return causes


def _builtin_causes(rt: ResourceType, obj: Mapping[str, Any]) -> list[dict[str, str]]:
    kind = rt.kind
    if kind == "Pod":
        return _pod_spec_causes(obj.get("spec"), "spec")
    if kind in _WORKLOADS and rt.group == "apps":
        causes: list[dict[str, str]] = []
        selector = _get(obj, "spec", "selector")
        if not isinstance(selector, Mapping) or not (
            selector.get("matchLabels") or selector.get("matchExpressions")
        ):
            causes.append(_required("spec.selector"))
        else:
            template_labels = _get(obj, "spec", "template", "metadata", "labels") or {}
            wanted = selector.get("matchLabels") or {}
            if any(template_labels.get(k) != v for k, v in wanted.items()):
                causes.append(
                    _bad(
                        "spec.template.metadata.labels",
                        template_labels,
                        "`selector` does not match template `labels`",
                    )
                )
        causes.extend(_pod_spec_causes(_get(obj, "spec", "template", "spec"), "spec.template.spec"))
        return causes
    if kind == "Job" and rt.group == "batch":
        causes = _pod_spec_causes(_get(obj, "spec", "template", "spec"), "spec.template.spec")
        policy = _get(obj, "spec", "template", "spec", "restartPolicy")
        if policy not in {"OnFailure", "Never"}:
            causes.append(
                cause(
                    "spec.template.spec.restartPolicy",
                    f"Unsupported value: {_go_repr(policy or '')}: "
                    'supported values: "OnFailure", "Never"',
                    "FieldValueNotSupported",
                )
            )
        return causes
    if kind == "CronJob" and rt.group == "batch":
        causes = []
        if not _get(obj, "spec", "schedule"):
            causes.append(_required("spec.schedule"))
        if not isinstance(_get(obj, "spec", "jobTemplate"), Mapping):
            causes.append(_required("spec.jobTemplate"))
        return causes
    if kind == "CustomResourceDefinition":
        return _crd_causes(obj)
    return []


def _crd_causes(obj: Mapping[str, Any]) -> list[dict[str, str]]:
    causes: list[dict[str, str]] = []
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    group = spec.get("group")
    names = spec.get("names") if isinstance(spec.get("names"), Mapping) else {}
    assert isinstance(names, Mapping)
    if not group:
        causes.append(_required("spec.group"))
    elif not isinstance(group, str) or "." not in group or not _SUBDOMAIN.match(group):
        causes.append(_bad("spec.group", group, "should be a domain with at least one dot"))
    plural = names.get("plural")
    if not plural:
        causes.append(_required("spec.names.plural"))
    if not names.get("kind"):
        causes.append(_required("spec.names.kind"))
    if spec.get("scope") not in {"Namespaced", "Cluster"}:
        causes.append(
            cause(
                "spec.scope",
                f"Unsupported value: {_go_repr(spec.get('scope') or '')}: "
                'supported values: "Cluster", "Namespaced"',
                "FieldValueNotSupported",
            )
        )
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        causes.append(
            _required("spec.versions", "must have exactly one version marked as storage version")
        )
    else:
        storage = [v for v in versions if isinstance(v, Mapping) and v.get("storage")]
        if len(storage) != 1:
            causes.append(
                _bad(
                    "spec.versions",
                    [v.get("name") for v in versions if isinstance(v, Mapping)],
                    "must have exactly one version marked as storage version",
                )
            )
        for n, version in enumerate(versions):
            if not isinstance(version, Mapping) or not version.get("name"):
                causes.append(_required(f"spec.versions[{n}].name"))
    name = _get(obj, "metadata", "name")
    if plural and group and name != f"{plural}.{group}":
        causes.append(_bad("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    return causes


def check_namespace_match(rt: ResourceType, obj: Mapping[str, Any], namespace: str | None) -> None:
    """400 when the body's namespace differs from the request's."""
    body_ns = _get(obj, "metadata", "namespace")
    if rt.namespaced and body_ns and namespace and body_ns != namespace:
        raise StatusError(
            400,
            "the namespace of the provided object does not match the namespace sent on the request",
        )
