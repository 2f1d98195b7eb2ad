"""Resource identities: which URL serves a given apiVersion/kind, learnt from discovery.

A :class:`ResourceRef` is what a client needs to build a URL for any kind, built-in or custom:
group, version, plural and scope. It comes from the server's discovery documents
(``/api/v1``, ``/apis/<group>/<version>``, or every group/version at once from the aggregated
discovery of ``/api`` and ``/apis``), parsed here by pure functions; the client caches the
result per group/version. A handful of core kinds that placer itself reads on every run are
known up front (:data:`WELL_KNOWN`) so that gathering capacity costs no discovery round trip.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

__all__ = [
    "AGGREGATED_DISCOVERY",
    "WELL_KNOWN",
    "ResourceRef",
    "api_prefix",
    "resources_from_aggregated",
    "resources_from_discovery",
    "split_api_version",
]


#: the ``Accept`` header asking ``/api`` and ``/apis`` for aggregated discovery
#: (``apidiscovery.k8s.io``, v2 then v2beta1), legacy JSON as fallback — as kubectl asks.
AGGREGATED_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)


@dataclass(frozen=True)
class ResourceRef:
    """Where a kind lives on an API server."""

    #: API group (``""`` for the core group).
    group: str
    version: str
    kind: str
    #: URL name (``jobsets``).
    plural: str
    #: whether objects live in namespaces.
    namespaced: bool
    #: subresources the server offers (``status``, ``scale``…).
    subresources: frozenset[str] = field(default_factory=frozenset)
    #: the names users may type for it besides kind and plural (discovery's ``singularName``
    #: and ``shortNames``: ``lws``, ``deploy``), lower case.
    aliases: tuple[str, ...] = field(default=(), compare=False)

    @property
    def api_version(self) -> str:
        """``group/version`` (``v1`` for the core group)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, *, namespace: str | None = None, name: str | None = None, subresource: str = ""
    ) -> str:
        """URL path of the collection or of one object.

        A namespaced kind without ``namespace`` gives the all-namespaces collection (lists and
        watches only).
        """
        parts = [api_prefix(self.api_version)]
        if self.namespaced and namespace:
            parts += ["namespaces", quote(namespace, safe="")]
        parts.append(self.plural)
        if name is not None:
            parts.append(quote(name, safe=""))
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


def split_api_version(api_version: str) -> tuple[str, str]:
    """``("apps", "v1")`` for ``apps/v1``, ``("", "v1")`` for ``v1``."""
    group, _, version = api_version.rpartition("/")
    return group, version


def api_prefix(api_version: str) -> str:
    """``/api/v1`` for the core group, ``/apis/<group>/<version>`` otherwise."""
    group, version = split_api_version(api_version)
    return f"/apis/{group}/{version}" if group else f"/api/{version}"


def resources_from_discovery(
    api_version: str, document: Mapping[str, Any]
) -> dict[str, ResourceRef]:
    """Kinds served by one group/version, from its ``APIResourceList`` document.

    Subresource entries (``jobsets/status``) are folded into their parent's ``subresources``.
    When several resources share a kind (rare), the first one listed wins.
    """
    group, version = split_api_version(api_version)
    entries = document.get("resources") or []
    subresources: dict[str, set[str]] = {}
    for entry in entries:
        name = str(entry.get("name") or "")
        if "/" in name:
            parent, sub = name.split("/", 1)
            subresources.setdefault(parent, set()).add(sub)
    result: dict[str, ResourceRef] = {}
    for entry in entries:
        name = str(entry.get("name") or "")
        kind = entry.get("kind")
        if not name or "/" in name or not isinstance(kind, str) or kind in result:
            continue
        result[kind] = ResourceRef(
            group=group,
            version=version,
            kind=kind,
            plural=name,
            namespaced=bool(entry.get("namespaced")),
            subresources=frozenset(subresources.get(name, ())),
            aliases=_aliases(entry),
        )
    return result


def resources_from_aggregated(
    document: Mapping[str, Any],
) -> dict[str, dict[str, ResourceRef]] | None:
    """Kinds served per group/version (``apps/v1`` -> kind -> ref), from an aggregated
    discovery document (``APIGroupDiscoveryList``, v2 or v2beta1); ``None`` when ``document``
    is not one (a server answering the legacy ``APIGroupList``/``APIVersions``)."""
    if document.get("kind") != "APIGroupDiscoveryList":
        return None
    found: dict[str, dict[str, ResourceRef]] = {}
    for item in document.get("items") or ():
        group = str((item.get("metadata") or {}).get("name") or "")
        for entry in item.get("versions") or ():
            version = str(entry.get("version") or "")
            if not version:
                continue
            kinds: dict[str, ResourceRef] = {}
            for resource in entry.get("resources") or ():
                plural = str(resource.get("resource") or "")
                kind = (resource.get("responseKind") or {}).get("kind")
                if not plural or not isinstance(kind, str) or not kind or kind in kinds:
                    continue
                names = [resource.get("singularResource"), *(resource.get("shortNames") or ())]
                kinds[kind] = ResourceRef(
                    group=group,
                    version=version,
                    kind=kind,
                    plural=plural,
                    namespaced=resource.get("scope") == "Namespaced",
                    subresources=frozenset(
                        str(s.get("subresource"))
                        for s in resource.get("subresources") or ()
                        if s.get("subresource")
                    ),
                    aliases=tuple(
                        dict.fromkeys(n.lower() for n in names if isinstance(n, str) and n)
                    ),
                )
            found[f"{group}/{version}" if group else version] = kinds
    return found


def _aliases(entry: Mapping[str, Any]) -> tuple[str, ...]:
    names = [entry.get("singularName"), *(entry.get("shortNames") or ())]
    return tuple(dict.fromkeys(n.lower() for n in names if isinstance(n, str) and n))


def _core(kind: str, plural: str, namespaced: bool, *subresources: str) -> ResourceRef:
    return ResourceRef("", "v1", kind, plural, namespaced, frozenset(subresources))


#: Core kinds placer reads on every run, and the access review; known without discovery.
WELL_KNOWN: Mapping[tuple[str, str], ResourceRef] = {
    (ref.api_version, ref.kind): ref
    for ref in (
        _core("Pod", "pods", True, "status", "binding", "eviction"),
        _core("Node", "nodes", False, "status"),
        _core("Namespace", "namespaces", False, "status", "finalize"),
        _core("ConfigMap", "configmaps", True),
        _core("Event", "events", True),
        ResourceRef(
            "authorization.k8s.io",
            "v1",
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
            False,
        ),
    )
}
