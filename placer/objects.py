"""Reading Kubernetes objects as the API serves them (plain JSON mappings): one accessor each.

Objects stay plain dicts at the I/O edge (``docs/architecture.md``); these accessors are the one
way placer reads their ``metadata``. Every accessor tolerates what a hostile or half-written
object may hold: an absent or non-mapping ``metadata`` reads as empty, a missing name as ``""``,
names, uids and versions that are not strings read as ``""``, labels and annotations keep only
their string values, and nothing raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "annotations_of",
    "finalizers_of",
    "generation_of",
    "is_deleting",
    "labels_of",
    "meta",
    "name_key",
    "name_of",
    "namespace_of",
    "owner_references_of",
    "uid_of",
    "version_of",
]

_EMPTY: Mapping[str, Any] = {}


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's ``metadata`` (empty when absent or not a mapping)."""
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else _EMPTY


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def name_of(obj: Mapping[str, Any]) -> str:
    """``metadata.name`` (``""`` when absent)."""
    return _text(meta(obj).get("name"))


def namespace_of(obj: Mapping[str, Any]) -> str:
    """``metadata.namespace`` (``""`` when absent: cluster-scoped, or not yet defaulted)."""
    return _text(meta(obj).get("namespace"))


def name_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``(namespace, name)`` of an object (empty strings for what it lacks)."""
    metadata = meta(obj)
    return _text(metadata.get("namespace")), _text(metadata.get("name"))


def uid_of(obj: Mapping[str, Any]) -> str:
    """``metadata.uid`` (``""`` when absent)."""
    return _text(meta(obj).get("uid"))


def version_of(obj: Mapping[str, Any]) -> str:
    """``metadata.resourceVersion`` (``""`` when absent)."""
    return _text(meta(obj).get("resourceVersion"))


def generation_of(obj: Mapping[str, Any]) -> int | None:
    """``metadata.generation`` (``None`` when absent or not a whole number)."""
    value = meta(obj).get("generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _strings(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """``metadata.labels`` (a new dict; entries whose value is not a string left out)."""
    return _strings(meta(obj).get("labels"))


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """``metadata.annotations`` (a new dict; entries whose value is not a string left out)."""
    return _strings(meta(obj).get("annotations"))


def finalizers_of(obj: Mapping[str, Any]) -> list[str]:
    """``metadata.finalizers`` (every one, placer's and others')."""
    value = meta(obj).get("finalizers")
    return [f for f in value if isinstance(f, str)] if isinstance(value, list | tuple) else []


def owner_references_of(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``metadata.ownerReferences`` (entries that are not mappings left out)."""
    value = meta(obj).get("ownerReferences")
    return [r for r in value if isinstance(r, Mapping)] if isinstance(value, list | tuple) else []


def is_deleting(obj: Mapping[str, Any]) -> bool:
    """Whether the object has a ``deletionTimestamp`` (it goes once its finalizers are gone)."""
    return bool(meta(obj).get("deletionTimestamp"))
