"""Writes on hub objects that keep the controller's hub cache current.

:class:`HubWriter` merge-patches a hub object's metadata (reading it again on a conflict) or
its status (the ``status`` subresource where the kind has one), and puts every answer in the
:class:`~placer.controller.hubcache.HubCache` — except when the write removed the object for
good (its last finalizer went while it was being deleted): then ``on_gone`` forgets it, since
the answer can arrive after the watch's DELETED event and must not bring the object back.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from placer.controller.hubcache import HubCache
from placer.controller.records import JSON, placed_condition, record_of, status_patch
from placer.errors import ConflictError
from placer.kube import KubeClient
from placer.model import WorkloadRef
from placer.objects import finalizers_of, generation_of, is_deleting, uid_of

__all__ = ["HubWriter"]

#: attempts of a metadata patch refused with 409 (the object is read again in between).
_ATTEMPTS = 5


class HubWriter:
    """Hub writes (see the module docstring).

    Args:
        hub: a client for the hub.
        cache: the hub cache to keep current.
        on_gone: ``on_gone(ref, uid)`` when a write removed the object for good.
    """

    def __init__(
        self, hub: KubeClient, cache: HubCache, on_gone: Callable[[WorkloadRef, str], None]
    ) -> None:
        self.client = hub
        self.cache = cache
        self._on_gone = on_gone

    def patch_meta(self, ref: WorkloadRef, obj: JSON, build: Callable[[JSON], JSON | None]) -> JSON:
        """Merge-patch metadata built from the object; on 409 read it again and rebuild."""
        for attempt in range(_ATTEMPTS):
            patch = build(obj)
            if patch is None:
                return obj
            try:
                result = self.client.patch(
                    ref.api_version, ref.kind, ref.name, patch, namespace=ref.namespace
                )
            except ConflictError:
                if attempt == _ATTEMPTS - 1:
                    raise
                obj = self.client.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
                continue
            self.remember(ref, result)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def patch(self, ref: WorkloadRef, patch: JSON) -> JSON:
        """Merge-patch the object (no conflict check)."""
        result = self.client.patch(
            ref.api_version, ref.kind, ref.name, patch, namespace=ref.namespace
        )
        self.remember(ref, result)
        return result

    def patch_status(self, ref: WorkloadRef, obj: JSON, patch: JSON | None) -> JSON:
        """Merge-patch the status (its subresource when the kind has one); ``None``: nothing
        to write, ``obj`` is returned."""
        if patch is None:
            return obj
        resource = self.client.resource(ref.api_version, ref.kind)
        subresource = "status" if "status" in resource.subresources else ""
        result = self.client.patch(
            ref.api_version,
            ref.kind,
            ref.name,
            patch,
            namespace=ref.namespace,
            subresource=subresource,
        )
        self.remember(ref, result)
        return result

    def confirm(self, ref: WorkloadRef, obj: JSON, cluster: str, how: str) -> JSON:
        """``Placed=True`` naming ``cluster``, ``how`` and the recorded decision."""
        record = record_of(obj)
        decision = record.decision if record else ""
        condition = placed_condition(
            True,
            "Placed",
            f"cluster {cluster}: {how} by decision {decision or '-'}",
            time.time(),
            generation=generation_of(obj),
        )
        return self.patch_status(ref, obj, status_patch(obj, condition))

    def remember(self, ref: WorkloadRef, obj: JSON) -> None:
        """Keep what a hub write answered, unless the object is gone meanwhile.

        NB: the answer to a write can arrive after the watch's DELETED event for the same
        object (the write that removes the last finalizer is such a write): an object the
        caches no longer hold is never put back.
        """
        if is_deleting(obj) and not finalizers_of(obj):
            self._on_gone(ref, uid_of(obj))  # that write removed it for good
            return
        self.cache.refresh(ref, obj)
