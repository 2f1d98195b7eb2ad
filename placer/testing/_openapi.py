"""The OpenAPI documents of the loopback server, built from what it serves.

kubectl needs them: ``create``/``apply`` validation reads ``/openapi/v3`` (the root lists one
document per group/version, ``/openapi/v3/apis/<g>/<v>``; a resource whose PATCH operation
takes the ``fieldValidation`` query parameter is validated by the server, so kubectl sends
``fieldValidation=Strict`` instead of validating itself) and falls back to ``/openapi/v2``
(asked for in protobuf, :mod:`placer.testing._gnostic`); ``kubectl explain`` reads the v3
schemas. Without them ``kubectl apply`` fails with "failed to download openapi".

What is in them, for every served resource (built-in kinds and every registered custom
resource):

* paths — list/create on the collection (and the all-namespaces list), get/replace/patch/
  delete on an object, each operation with ``x-kubernetes-action`` and
  ``x-kubernetes-group-version-kind``, its path and query parameters (``dryRun``,
  ``fieldManager``, ``fieldValidation``, ``force`` for patches);
* schemas — ``ObjectMeta`` in full (its fields as the real schema names them); per kind
  ``apiVersion``, ``kind``, ``metadata`` and ``spec``/``status`` as objects that keep unknown
  fields — the real built-in schemas are not carried; a custom resource whose CRD has an
  ``openAPIV3Schema`` gets that schema in v3 (kubectl explain shows its fields). In v2 every
  kind is an open object: kubectl's client-side validation (used only against servers without
  field validation) then accepts what this server accepts.

The server does not validate against these schemas (see :mod:`placer.testing._validation`);
with ``fieldValidation=Strict`` it rejects unknown ``metadata`` fields, the part of an object
whose schema it has. Definition names follow the real server's (``io.k8s.api.core.v1.Pod``,
``io.x-k8s.jobset.v1alpha2.JobSet`` for a CRD's group reversed). Pure functions.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from placer.testing._resources import ResourceType

__all__ = [
    "OBJECT_META_FIELDS",
    "definition_name",
    "group_version_path",
    "openapi_v2",
    "openapi_v3_document",
    "openapi_v3_root",
]

JsonObj = dict[str, Any]
#: CRD schemas: (group, version, kind) -> openAPIV3Schema.
Schemas = Mapping[tuple[str, str, str], Mapping[str, Any]]

_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_OWNER = "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference"
_MANAGED = "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry"
_STATUS = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
_BUILTIN_PREFIX = {
    "": "io.k8s.api.core",
    "apps": "io.k8s.api.apps",
    "batch": "io.k8s.api.batch",
    "coordination.k8s.io": "io.k8s.api.coordination",
    "events.k8s.io": "io.k8s.api.events",
    "scheduling.k8s.io": "io.k8s.api.scheduling",
    "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions",
}

_API_VERSION = (
    "APIVersion defines the versioned schema of this representation of an object. Servers "
    "should convert recognized schemas to the latest internal value, and may reject "
    "unrecognized values."
)
_KIND = (
    "Kind is a string value representing the REST resource this object represents. Servers "
    "may infer this from the endpoint the client submits requests to. Cannot be updated. In "
    "CamelCase."
)
_METADATA = "Standard object's metadata."
_SPEC = "Spec defines the desired state of the object (its fields are not listed here)."
_STATUS_TEXT = "Status is the most recently observed state (its fields are not listed here)."

#: ObjectMeta's fields: name -> (schema without description, description).
OBJECT_META_FIELDS: Mapping[str, tuple[JsonObj, str]] = {
    "annotations": (
        {"type": "object", "additionalProperties": {"type": "string"}},
        "Annotations is an unstructured key value map stored with a resource.",
    ),
    "creationTimestamp": (
        {"type": "string", "format": "date-time"},
        "The server time when this object was created (RFC 3339, UTC). Read-only.",
    ),
    "deletionGracePeriodSeconds": (
        {"type": "integer", "format": "int64"},
        "Seconds allowed for this object to terminate gracefully. Read-only.",
    ),
    "deletionTimestamp": (
        {"type": "string", "format": "date-time"},
        "When this resource will be deleted (RFC 3339). Set by the server. Read-only.",
    ),
    "finalizers": (
        {"type": "array", "items": {"type": "string"}},
        "Must be empty before the object is deleted from the registry.",
    ),
    "generateName": (
        {"type": "string"},
        "An optional prefix, used by the server to generate a unique name.",
    ),
    "generation": (
        {"type": "integer", "format": "int64"},
        "A sequence number representing a specific generation of the desired state.",
    ),
    "labels": (
        {"type": "object", "additionalProperties": {"type": "string"}},
        "Map of string keys and values that can be used to organize and categorize objects.",
    ),
    "managedFields": (
        {"type": "array", "items": {"$ref": _MANAGED}},
        "Maps workflow-id and version to the set of fields managed by that workflow.",
    ),
    "name": ({"type": "string"}, "Name must be unique within a namespace."),
    "namespace": (
        {"type": "string"},
        "Namespace defines the space within which each name must be unique.",
    ),
    "ownerReferences": (
        {"type": "array", "items": {"$ref": _OWNER}},
        "List of objects depended by this object.",
    ),
    "resourceVersion": (
        {"type": "string"},
        "An opaque value that represents the internal version of this object.",
    ),
    "selfLink": ({"type": "string"}, "Deprecated: selfLink is a legacy read-only field."),
    "uid": ({"type": "string"}, "The unique in time and space value for this object."),
}

#: the first sentence of each built-in kind's description (``kubectl explain`` shows it).
_KIND_DESCRIPTIONS: Mapping[str, str] = {
    "Pod": "Pod is a collection of containers that can run on a host. This resource is created "
    "by clients and scheduled onto hosts.",
    "Node": "Node is a worker node in Kubernetes.",
    "Namespace": "Namespace provides a scope for Names. Use of multiple namespaces is optional.",
    "Service": "Service is a named abstraction of software service consisting of local port "
    "that the proxy listens on, and the selector that determines which pods will answer "
    "requests sent through the proxy.",
    "ConfigMap": "ConfigMap holds configuration data for pods to consume.",
    "Secret": "Secret holds secret data of a certain type.",
    "Event": "Event is a report of an event somewhere in the cluster.",
    "ServiceAccount": "ServiceAccount binds together a name, a principal that can be "
    "authenticated and authorized, and a set of secrets.",
    "ResourceQuota": "ResourceQuota sets aggregate quota restrictions enforced per namespace.",
    "PersistentVolumeClaim": "PersistentVolumeClaim is a user's request for and claim to a "
    "persistent volume.",
    "PersistentVolume": "PersistentVolume (PV) is a storage resource provisioned by an "
    "administrator. It is analogous to a node.",
    "Deployment": "Deployment enables declarative updates for Pods and ReplicaSets.",
    "StatefulSet": "StatefulSet represents a set of pods with consistent identities.",
    "ReplicaSet": "ReplicaSet ensures that a specified number of pod replicas are running at "
    "any given time.",
    "DaemonSet": "DaemonSet represents the configuration of a daemon set.",
    "Job": "Job represents the configuration of a single job.",
    "CronJob": "CronJob represents the configuration of a single cron job.",
    "Lease": "Lease defines a lease concept.",
    "PriorityClass": "PriorityClass defines mapping from a priority class name to the priority "
    "integer value.",
    "CustomResourceDefinition": "CustomResourceDefinition represents a resource that should be "
    "exposed on the API server.",
}


def _description(rt: ResourceType) -> str:
    known = _KIND_DESCRIPTIONS.get(rt.kind) if rt.builtin else None
    return known or f"{rt.kind} ({rt.api_version})."


_OWNER_FIELDS = ("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")
_MANAGED_FIELDS = (
    "apiVersion",
    "fieldsType",
    "fieldsV1",
    "manager",
    "operation",
    "subresource",
    "time",
)


def definition_name(rt: ResourceType) -> str:
    """The real server's schema name of a kind (``io.k8s.api.apps.v1.Deployment``)."""
    prefix = _BUILTIN_PREFIX.get(rt.group) if rt.builtin else None
    if prefix is None:
        prefix = ".".join(reversed(rt.group.split(".")))
    return f"{prefix}.{rt.version}.{rt.kind}"


def group_version_path(group: str, version: str) -> str:
    """The key of a group/version in the v3 root (``api/v1``, ``apis/apps/v1``)."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _gvk(rt: ResourceType) -> JsonObj:
    return {"group": rt.group, "kind": rt.kind, "version": rt.version}


# -- schemas ------------------------------------------------------------------------------------


def _ref(name: str, v3: bool) -> str:
    return f"#/components/schemas/{name}" if v3 else f"#/definitions/{name}"


def _meta_schemas(v3: bool) -> dict[str, JsonObj]:
    fields: dict[str, JsonObj] = {}
    for name, (schema, description) in OBJECT_META_FIELDS.items():
        item = copy.deepcopy(schema)
        if "items" in item and "$ref" in item["items"]:
            item["items"] = {"$ref": _ref(item["items"]["$ref"], v3)}
        fields[name] = {**item, "description": description}
    text = {"type": "string"}
    owner = {name: dict(text) for name in _OWNER_FIELDS}
    owner["controller"] = owner["blockOwnerDeletion"] = {"type": "boolean"}
    managed: dict[str, JsonObj] = {name: dict(text) for name in _MANAGED_FIELDS}
    managed["fieldsV1"] = {"type": "object"}
    managed["time"] = {"type": "string", "format": "date-time"}
    return {
        _META: {
            "description": "ObjectMeta is metadata that all persisted resources must have.",
            "type": "object",
            "properties": fields,
        },
        _OWNER: {
            "description": "OwnerReference contains enough information to identify an owner.",
            "type": "object",
            "required": ["apiVersion", "kind", "name", "uid"],
            "properties": owner,
        },
        _MANAGED: {
            "description": "ManagedFieldsEntry is a workflow-id, a FieldSet and the group "
            "version of the resource that the fieldset applies to.",
            "type": "object",
            "properties": managed,
        },
        _STATUS: {
            "description": "Status is a return value for calls that don't return other objects.",
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
        },
    }


def _kind_schema_v3(rt: ResourceType, crd_schema: Mapping[str, Any] | None) -> JsonObj:
    meta = {"allOf": [{"$ref": _ref(_META, True)}], "default": {}, "description": _METADATA}
    if crd_schema:
        schema = copy.deepcopy(dict(crd_schema))
        properties = schema.setdefault("properties", {})
        properties["metadata"] = meta
        schema.setdefault("type", "object")
    else:
        keep = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        schema = {
            "description": _description(rt),
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string", "description": _API_VERSION},
                "kind": {"type": "string", "description": _KIND},
                "metadata": meta,
                "spec": {**keep, "description": _SPEC},
                "status": {**keep, "description": _STATUS_TEXT},
            },
            "x-kubernetes-preserve-unknown-fields": True,
        }
    schema["x-kubernetes-group-version-kind"] = [_gvk(rt)]
    return schema


def _kind_schema_v2(rt: ResourceType) -> JsonObj:
    """An open object: kubectl's client-side validation accepts any fields of it."""
    return {
        "description": _description(rt),
        "type": "object",
        "x-kubernetes-group-version-kind": [_gvk(rt)],
    }


# -- paths ----------------------------------------------------------------------------------------


def _query(name: str, description: str, kind: str = "string") -> JsonObj:
    return {"name": name, "in": "query", "description": description, "type": kind}


_DRY_RUN = _query("dryRun", "When present, modifications are not persisted (All).")
_FIELD_MANAGER = _query("fieldManager", "A name associated with the actor making the change.")
_FIELD_VALIDATION = _query(
    "fieldValidation",
    "How the server handles unknown or duplicate fields: Ignore, Warn or Strict.",
)
_FORCE = _query("force", "Force an apply request, taking over conflicting fields.", "boolean")
_PRETTY = _query("pretty", "If 'true', the output is pretty printed.")
_LIST_QUERY = [
    _query("labelSelector", "A selector on labels."),
    _query("fieldSelector", "A selector on fields."),
    _query("limit", "Most items to return.", "integer"),
    _query("continue", "The continue token of the previous chunk."),
    _query("resourceVersion", "The resource version to list or watch from."),
    _query("watch", "Watch for changes.", "boolean"),
]


def _path_param(name: str, what: str) -> JsonObj:
    return {"name": name, "in": "path", "description": what, "required": True, "type": "string"}


def _paths(rt: ResourceType, v3: bool) -> dict[str, JsonObj]:
    base = rt.base_path
    ref = {"$ref": _ref(definition_name(rt), v3)}
    status_ref = {"$ref": _ref(_STATUS, v3)}
    ns = [_path_param("namespace", "object name and auth scope, such as for teams and projects")]
    name = [_path_param("name", f"name of the {rt.kind}")]
    scope = ns if rt.namespaced else []
    collection = (
        f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"
    )
    singular = f"{collection}/{{name}}"

    def op(action: str, verb: str, params: Sequence[JsonObj], body: bool, ok: JsonObj) -> JsonObj:
        operation: JsonObj = {
            "description": f"{verb} {rt.kind}",
            "operationId": f"{action}{rt.kind}",
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": _gvk(rt),
        }
        if v3:
            operation["parameters"] = [_v3_parameter(p) for p in params]
            if body:
                operation["requestBody"] = {
                    "content": {"*/*": {"schema": ref}},
                    "required": True,
                }
            operation["responses"] = {
                "200": {"description": "OK", "content": {"application/json": {"schema": ok}}},
                "401": {"description": "Unauthorized"},
            }
        else:
            operation["parameters"] = list(params) + (
                [{"name": "body", "in": "body", "required": True, "schema": ref}] if body else []
            )
            operation["consumes"] = ["*/*"]
            operation["produces"] = ["application/json", "application/yaml"]
            operation["responses"] = {"200": {"description": "OK", "schema": ok}}
        return operation

    writes = [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION]
    paths = {
        collection: {
            "get": op("list", "list or watch objects of kind", [*scope, *_LIST_QUERY], False, ref),
            "post": op("post", "create a", [*scope, *writes], True, ref),
        },
        singular: {
            "get": op("get", "read the specified", [*scope, *name, _PRETTY], False, ref),
            "put": op("put", "replace the specified", [*scope, *name, *writes], True, ref),
            "patch": op(
                "patch",
                "partially update the specified",
                [*scope, *name, *writes, _FORCE],
                True,
                ref,
            ),
            "delete": op("delete", "delete a", [*scope, *name, _DRY_RUN], False, status_ref),
        },
    }
    if rt.namespaced:
        paths[f"{base}/{rt.plural}"] = {
            "get": op("list", "list or watch objects of kind", list(_LIST_QUERY), False, ref)
        }
    return paths


def _v3_parameter(param: Mapping[str, Any]) -> JsonObj:
    out: JsonObj = {
        "name": param["name"],
        "in": param["in"],
        "description": param.get("description", ""),
        "schema": {"type": param.get("type", "string"), "uniqueItems": True},
    }
    if param.get("required"):
        out["required"] = True
    return out


# -- documents ------------------------------------------------------------------------------------


def openapi_v2(types: Iterable[ResourceType], version: str) -> JsonObj:
    """The whole ``/openapi/v2`` document (JSON form; protobuf: :mod:`._gnostic`)."""
    paths: dict[str, JsonObj] = {}
    definitions = _meta_schemas(v3=False)
    for rt in sorted(types, key=lambda t: (t.group, t.version, t.plural)):
        paths.update(_paths(rt, v3=False))
        definitions[definition_name(rt)] = _kind_schema_v2(rt)
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": version},
        "paths": dict(sorted(paths.items())),
        "definitions": dict(sorted(definitions.items())),
    }


def openapi_v3_document(
    types: Iterable[ResourceType], group: str, api_version: str, version: str, schemas: Schemas
) -> JsonObj | None:
    """The v3 document of one group/version, or ``None`` when nothing is served there."""
    served = [t for t in types if t.group == group and t.version == api_version]
    if not served:
        return None
    paths: dict[str, JsonObj] = {}
    components = _meta_schemas(v3=True)
    for rt in sorted(served, key=lambda t: t.plural):
        paths.update(_paths(rt, v3=True))
        components[definition_name(rt)] = _kind_schema_v3(
            rt, None if rt.builtin else schemas.get((rt.group, rt.version, rt.kind))
        )
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": version},
        "paths": dict(sorted(paths.items())),
        "components": {"schemas": dict(sorted(components.items()))},
    }


def openapi_v3_root(types: Iterable[ResourceType], version: str, schemas: Schemas) -> JsonObj:
    """``/openapi/v3``: every group/version with the URL (and content hash) of its document."""
    served = list(types)
    paths: dict[str, JsonObj] = {}
    for group, api_version in sorted({(t.group, t.version) for t in served}):
        doc = openapi_v3_document(served, group, api_version, version, schemas)
        digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest().upper()
        key = group_version_path(group, api_version)
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": paths}
