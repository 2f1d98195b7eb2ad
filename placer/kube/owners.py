"""Owner scoping (Workload Map spec section 7.2): does an object belong to a workload?

Selectors say which *role* a pod plays, never which *workload* it belongs to, so pods are first
scoped by ownership: a pod belongs to the workload whose root object's uid appears in any of
its owner references, or in those of the object its controller reference points to, followed
up to :data:`MAX_OWNER_DEPTH` levels (JobSet -> Job -> Pod, LWS -> StatefulSet -> Pod).
Fetched owners are cached per object, misses included; any fetch error means "not owned".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from placer.errors import KubeError
from placer.kube.client import KubeClient
from placer.objects import namespace_of, owner_references_of

__all__ = ["MAX_OWNER_DEPTH", "OwnerWalker"]

MAX_OWNER_DEPTH = 6


class OwnerWalker:
    """Owner-chain walks on one cluster, with a fetch cache (use one per listing)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
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

    def _fetch(self, ref: Mapping[str, Any], namespace: str) -> Mapping[str, Any] | None:
        key = (str(ref.get("apiVersion")), str(ref.get("kind")), namespace, str(ref.get("name")))
        if key in self._cache:
            return self._cache[key]
        found: Mapping[str, Any] | None
        try:
            found = self.client.get(key[0], key[1], key[3], namespace=namespace or None)
        except KubeError:
            found = None
        self._cache[key] = found
        return found
