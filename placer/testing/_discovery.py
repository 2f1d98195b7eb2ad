"""Aggregated discovery (``apidiscovery.k8s.io``), as a real API server serves it on ``/api``
and ``/apis``.

A client that sends ``Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList``
(kubectl and client-go since 1.26 do, with ``v2beta1`` and plain JSON as fallbacks) gets, in one
response, every group, version and resource the server serves — the ``APIGroupDiscoveryList`` —
instead of the legacy ``APIVersions``/``APIGroupList``, which make it ask each group/version for
its ``APIResourceList`` (one request per group/version). The format (Kubernetes 1.30, stable):

* the list: ``kind: APIGroupDiscoveryList``, ``apiVersion: apidiscovery.k8s.io/v2``,
  ``metadata``, ``items``: one ``APIGroupDiscovery`` per group (``/api``: the core group alone,
  its ``metadata.name`` empty);
* a group: ``metadata.name``, ``versions`` preferred first, each ``{version, resources,
  freshness: Current}``;
* a resource: ``resource`` (the plural), ``responseKind`` ``{group, version, kind}``, ``scope``
  (``Cluster`` or ``Namespaced``), ``singularResource``, ``verbs``, ``shortNames``,
  ``categories`` and ``subresources``, each ``{subresource, responseKind, verbs}``.

The documents are built from the same legacy ``APIResourceList`` documents the server serves on
``/api/<v>`` and ``/apis/<g>/<v>`` (:meth:`placer.testing._resources.Registry.api_resource_list`),
so both forms always say the same. The response carries its media type (the one the client
asked for: clients read the ``Content-Type`` to tell aggregated discovery from legacy JSON),
``Vary: Accept`` and an ``ETag``; a request whose ``If-None-Match`` names the current ETag gets
``304 Not Modified``, as from a real server.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from placer.testing._resources import Registry

__all__ = ["DISCOVERY_GROUP", "aggregated_discovery", "aggregated_media", "etag_of"]

#: the API group of aggregated discovery documents.
DISCOVERY_GROUP = "apidiscovery.k8s.io"
#: the versions of it served, preferred first.
_VERSIONS = ("v2", "v2beta1")

JSON = dict[str, Any]


def aggregated_media(accept: str) -> tuple[str, str] | None:
    """``(version, media type)`` of the aggregated discovery an ``Accept`` header asks for, or
    ``None`` when it asks for legacy JSON first (or for nothing this server has).

    The media ranges are taken in the client's order (kubectl lists ``v2``, then ``v2beta1``,
    then ``application/json``); the first one served wins.
    """
    for part in accept.split(","):
        pieces = [p.strip() for p in part.split(";")]
        media = pieces[0].lower()
        params = {k.strip(): v.strip() for k, _, v in (p.partition("=") for p in pieces[1:])}
        if media not in ("application/json", "application/*", "*/*"):
            continue
        if params.get("g") == DISCOVERY_GROUP and params.get("as") == "APIGroupDiscoveryList":
            version = params.get("v", "")
            if version in _VERSIONS:
                return version, (
                    f"application/json;g={DISCOVERY_GROUP};v={version};as=APIGroupDiscoveryList"
                )
            continue
        if "as" not in params:
            return None  # plain JSON first: the legacy document
    return None


def aggregated_discovery(registry: Registry, *, core: bool, version: str = "v2") -> JSON:
    """The ``APIGroupDiscoveryList`` of ``/api`` (``core``) or ``/apis`` (call under the store's
    lock)."""
    groups = [""] if core else registry.groups()
    items = []
    for group in groups:
        versions = []
        for api_version in registry.versions(group):
            listing = registry.api_resource_list(group, api_version)
            if listing is not None:
                versions.append(_version(group, api_version, listing))
        if versions:
            items.append({"metadata": {"name": group} if group else {}, "versions": versions})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"{DISCOVERY_GROUP}/{version}",
        "metadata": {},
        "items": items,
    }


def etag_of(document: Mapping[str, Any]) -> str:
    """A strong ETag of a document (quoted, as HTTP wants it)."""
    digest = hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()
    return f'"{digest[:32].upper()}"'


def _version(group: str, version: str, listing: Mapping[str, Any]) -> JSON:
    """One ``APIVersionDiscovery`` from the group/version's ``APIResourceList``."""
    entries = [e for e in listing.get("resources") or () if isinstance(e, Mapping)]
    resources: dict[str, JSON] = {}
    for entry in entries:
        name = str(entry.get("name", ""))
        if "/" in name:
            continue
        resource: JSON = {
            "resource": name,
            "responseKind": _kind(entry, group, version),
            "scope": "Namespaced" if entry.get("namespaced") else "Cluster",
            "singularResource": entry.get("singularName", ""),
            "verbs": list(entry.get("verbs") or ()),
        }
        for field in ("shortNames", "categories"):
            if entry.get(field):
                resource[field] = list(entry[field])
        resources[name] = resource
    for entry in entries:
        parent, _, sub = str(entry.get("name", "")).partition("/")
        if sub and parent in resources:
            resources[parent].setdefault("subresources", []).append(
                {
                    "subresource": sub,
                    "responseKind": _kind(entry, group, version),
                    "verbs": list(entry.get("verbs") or ()),
                }
            )
    return {"version": version, "resources": list(resources.values()), "freshness": "Current"}


def _kind(entry: Mapping[str, Any], group: str, version: str) -> JSON:
    """``responseKind``: the entry's own group and version where it names them (a ``scale``
    subresource answers ``autoscaling/v1``), else those of the list."""
    return {
        "group": str(entry.get("group", group)),
        "version": str(entry.get("version", version)),
        "kind": str(entry.get("kind", "")),
    }
