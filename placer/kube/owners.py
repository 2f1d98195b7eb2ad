"""Owner scoping (Workload Map spec section 7.2): does an object belong to a workload?

Selectors say which *role* a pod plays, never which *workload* it belongs to, so pods are first
scoped by ownership: a pod belongs to the workload whose root object's uid appears in any of
its owner references, or in those of the object its controller reference points to, followed
up to :data:`MAX_OWNER_DEPTH` levels (JobSet -> Job -> Pod, LWS -> StatefulSet -> Pod).
Fetched owners are cached per object, misses included; any fetch error means "not owned".
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from placer.errors import KubeError
from placer.kube.client import KubeClient
from placer.objects import namespace_of, owner_references_of

__all__ = ["MAX_OWNER_DEPTH", "OwnerLookup", "OwnerWalker"]

MAX_OWNER_DEPTH = 6
#: ``lookup(api_version, kind, namespace, name)``: an owner from a cache (``None``: fetch it).
OwnerLookup = Callable[[str, str, str, str], Mapping[str, Any] | None]


class OwnerWalker:
    """Owner-chain walks on one cluster, with a fetch cache (use one per listing).

    ``lookup``: where an owner is looked for before it is fetched (a watch cache).
    """

    def __init__(self, client: KubeClient, *, lookup: OwnerLookup | None = None) -> None:
        self.client = client
        self._lookup = lookup
        self._cache: dict[tuple[str, str, str, str], Mapping[str, Any] | None] = {}

    def owned_by(self, obj: Mapping[str, Any], uid: str) -> bool:
        """Whether ``obj``'s owner chain reaches the object with ``uid``."""
        if not uid:
            return False
        current: Mapping[str, Any] | None = obj
        for _ in range(MAX_OWNER_DEPTH):
            if current is None:
                return False
            refs = owner_references_of(current)
            if any(r.get("uid") == uid for r in refs):
                return True
            controller = next((r for r in refs if r.get("controller")), None)
            if controller is None:
                return False
            current = self._fetch(controller, namespace_of(current))
        return False

    def owner_uids(self, obj: Mapping[str, Any], stop: Collection[str] = ()) -> set[str]:
        """The uids :meth:`owned_by` would find ``obj`` owned by: those of its owner references
        and of those of each controller up the chain — up to the first level naming a uid of
        ``stop`` (the roots looked for: nothing above them is fetched)."""
        uids: set[str] = set()
        current: Mapping[str, Any] | None = obj
        for _ in range(MAX_OWNER_DEPTH):
            if current is None:
                break
            metadata = current.get("metadata") or {}
            refs = metadata.get("ownerReferences") or []
            found = {str(r.get("uid")) for r in refs if r.get("uid")}
            uids |= found
            if not found.isdisjoint(stop):
                break
            controller = next((r for r in refs if r.get("controller")), None)
            if controller is None:
                break
            current = self._fetch(controller, str(metadata.get("namespace") or ""))
        return uids

    def _fetch(self, ref: Mapping[str, Any], namespace: str) -> Mapping[str, Any] | None:
        key = (str(ref.get("apiVersion")), str(ref.get("kind")), namespace, str(ref.get("name")))
        if key in self._cache:
            return self._cache[key]
        found: Mapping[str, Any] | None = None
        if self._lookup is not None:
            found = self._lookup(*key)
            if found is not None and (found.get("metadata") or {}).get("uid") == ref.get("uid"):
                self._cache[key] = found
                return found
        try:
            found = self.client.get(key[0], key[1], key[3], namespace=namespace or None)
        except KubeError:
            found = None
        self._cache[key] = found
        return found
