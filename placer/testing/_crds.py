"""CustomResourceDefinitions: the documents, and the resource types they serve.

On a real cluster a custom resource exists because a CustomResourceDefinition object says so;
the loopback server keeps that arrangement (``Store.register_resource`` writes a CRD, and a CRD
written by a client registers its resource), so discovery, ``kubectl get crd`` and the objects
agree. These pure functions translate between the CRD document and :class:`ResourceType`; the
store calls them when a CRD is stored or deleted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from placer.testing._resources import ResourceType

__all__ = [
    "CRD_GROUP",
    "crd_document",
    "crd_identity",
    "crd_status",
    "established_at",
    "guess_plural",
    "served_types",
    "version_document",
]

CRD_GROUP = "apiextensions.k8s.io"
JsonObj = dict[str, Any]


def guess_plural(kind: str) -> str:
    """English plural of a kind, lower-cased (``Policy`` -> ``policies``, ``Box`` -> ``boxes``)."""
    lower = kind.lower()
    if lower.endswith(("s", "x", "ch", "sh")):
        return lower + "es"
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return lower[:-1] + "ies"
    return lower + "s"


def version_document(
    version: str,
    *,
    status: bool,
    scale: bool,
    selectable_fields: Iterable[str],
    printer_columns: Iterable[Mapping[str, Any]] = (),
) -> JsonObj:
    """One ``spec.versions[]`` entry, served and stored (``scale``: ``spec.replicas``,
    ``status.replicas`` and ``status.selector``, the usual paths; ``printer_columns``: the
    ``additionalPrinterColumns`` that ``kubectl get`` shows)."""
    doc: JsonObj = {"name": version, "served": True, "storage": True}
    columns = [dict(c) for c in printer_columns]
    if columns:
        doc["additionalPrinterColumns"] = columns
    subresources: JsonObj = {}
    if status:
        subresources["status"] = {}
    if scale:
        subresources["scale"] = {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        }
    if subresources:
        doc["subresources"] = subresources
    fields = [{"jsonPath": "." + f.lstrip(".")} for f in selectable_fields]
    if fields:
        doc["selectableFields"] = fields
    return doc


def crd_document(
    group: str,
    kind: str,
    plural: str,
    version: JsonObj,
    *,
    namespaced: bool,
    short_names: Iterable[str],
    singular: str | None,
    categories: Iterable[str],
) -> JsonObj:
    """A CustomResourceDefinition serving one version."""
    names: JsonObj = {
        "plural": plural,
        "singular": singular or kind.lower(),
        "kind": kind,
        "listKind": f"{kind}List",
    }
    if short_names:
        names["shortNames"] = list(short_names)
    if categories:
        names["categories"] = list(categories)
    return {
        "apiVersion": f"{CRD_GROUP}/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": names,
            "scope": "Namespaced" if namespaced else "Cluster",
            "versions": [version],
        },
    }


def crd_identity(crd: JsonObj) -> tuple[str, str] | None:
    """``(group, plural)`` the CRD defines, or ``None`` when it names neither."""
    spec = crd.get("spec") or {}
    group, plural = spec.get("group"), (spec.get("names") or {}).get("plural")
    if not group or not plural:
        return None
    return str(group), str(plural)


def crd_status(crd: JsonObj, now: str) -> JsonObj:
    """The status the apiextensions controllers would write: names accepted, established."""
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    if names.get("kind"):
        names.setdefault("singular", str(names["kind"]).lower())
        names.setdefault("listKind", f"{names['kind']}List")
    storage = [
        v["name"] for v in spec.get("versions") or () if isinstance(v, dict) and v.get("storage")
    ]
    return {
        "acceptedNames": names,
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": now,
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": now,
            },
        ],
        "storedVersions": storage,
    }


def established_at(crd: JsonObj) -> str | None:
    """When the CRD was established (its conditions' transition time), if it was."""
    for condition in (crd.get("status") or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == "Established":
            return str(condition.get("lastTransitionTime") or "") or None
    return None


def served_types(crd: JsonObj) -> list[ResourceType]:
    """The resource types a CRD serves (one per served version)."""
    identity = crd_identity(crd)
    if identity is None:
        return []
    group, plural = identity
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    kind = str(names.get("kind"))
    types = []
    for version in spec.get("versions") or ():
        if not isinstance(version, dict) or not version.get("served", True):
            continue
        labels = tuple(
            str(f.get("jsonPath", "")).lstrip(".")
            for f in version.get("selectableFields") or ()
            if isinstance(f, dict)
        )
        scale_doc = (version.get("subresources") or {}).get("scale")
        scale = None
        if isinstance(scale_doc, dict) and scale_doc.get("specReplicasPath"):
            scale = (
                str(scale_doc["specReplicasPath"]).lstrip("."),
                str(scale_doc.get("statusReplicasPath", ".status.replicas")).lstrip("."),
                str(scale_doc.get("labelSelectorPath") or "").lstrip("."),
            )
        types.append(
            ResourceType(
                group=group,
                version=str(version["name"]),
                kind=kind,
                plural=plural,
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                status="status" in (version.get("subresources") or {}),
                short_names=tuple(names.get("shortNames") or ()),
                singular=str(names.get("singular") or kind.lower()),
                categories=tuple(names.get("categories") or ()),
                builtin=False,
                field_labels=labels,
                scale=scale,
                schema=_schema_text(version),
            )
        )
    return types


def _schema_text(version: JsonObj) -> str:
    schema = (version.get("schema") or {}).get("openAPIV3Schema")
    return json.dumps(schema, sort_keys=True) if isinstance(schema, dict) else ""
