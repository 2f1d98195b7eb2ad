"""Kubernetes Events about hub objects (``kubectl describe`` shows them), aggregated.

Events are core ``v1`` Events (what ``kubectl describe`` and ``kubectl get events`` read),
written in the object's namespace (``default`` for cluster-scoped objects such as a
PlacementPolicy, as Kubernetes does). A repeat of the same reason and message for the same
object is not a new Event: the existing one gets ``count + 1`` and a new ``lastTimestamp`` —
the way the kubelet and client-go's recorder aggregate — so a workload retried for hours leaves
one Event, not hundreds. Messages are cut to 1,024 characters.

:func:`event_body` is pure; :class:`EventRecorder` does the I/O and never raises (an Event is
information: failing to write one must not stop a placement).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from placer.controller.records import cut_message
from placer.errors import KubeError, NotFoundError
from placer.kube import KubeClient
from placer.objects import meta, name_of, namespace_of, uid_of
from placer.timestamps import rfc3339

__all__ = ["COMPONENT", "EventRecorder", "event_body"]

log = logging.getLogger(__name__)

COMPONENT = "placer-controller"
#: objects whose last Event is remembered for aggregation (the oldest are dropped first; an
#: object gone normally drops its own at once).
_REMEMBERED = 10_000


def event_body(
    obj: Mapping[str, Any],
    *,
    type_: str,
    reason: str,
    message: str,
    now: float,
    instance: str,
) -> dict[str, Any]:
    """A new ``v1`` Event about ``obj``."""
    metadata = meta(obj)
    name = name_of(obj) or "object"
    namespace = namespace_of(obj) or "default"
    message = cut_message(message)
    involved = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "name": name,
        "uid": metadata.get("uid"),
        "resourceVersion": metadata.get("resourceVersion"),
    }
    if metadata.get("namespace"):
        involved["namespace"] = namespace
    stamp = rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name[:200]}.{secrets.token_hex(8)}", "namespace": namespace},
        "involvedObject": {k: v for k, v in involved.items() if v is not None},
        "type": type_,
        "reason": reason,
        "message": message,
        "count": 1,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "action": reason,
    }


@dataclass
class _Last:
    reason: str
    message: str
    name: str
    namespace: str
    count: int


class EventRecorder:
    """Writes Events on the hub, aggregating repeats (see the module docstring)."""

    def __init__(self, client: KubeClient, *, instance: str) -> None:
        self.client = client
        self.instance = instance
        self._last: OrderedDict[str, _Last] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Write (or aggregate) one Event about ``obj``; never raises."""
        metadata = meta(obj)
        uid = uid_of(obj) or (
            f"{obj.get('kind')}/{metadata.get('namespace')}/{metadata.get('name')}"
        )
        now = time.time()
        with self._lock:
            last = self._last.get(uid)
        try:
            if last is not None and last.reason == reason and last.message == cut_message(message):
                last.count += 1
                try:
                    self.client.patch(
                        "v1",
                        "Event",
                        last.name,
                        {"count": last.count, "lastTimestamp": rfc3339(now)},
                        namespace=last.namespace,
                    )
                    return
                except NotFoundError:
                    pass  # expired (events live an hour): write a new one
            body = event_body(
                obj, type_=type_, reason=reason, message=message, now=now, instance=self.instance
            )
            self.client.create(body)
            with self._lock:
                self._last[uid] = _Last(
                    reason,
                    body["message"],
                    body["metadata"]["name"],
                    body["metadata"]["namespace"],
                    1,
                )
                self._last.move_to_end(uid)
                while len(self._last) > _REMEMBERED:
                    self._last.popitem(last=False)
        except KubeError as err:
            log.warning(
                "could not record event %s: %s", reason, err, extra={"event": "event-error"}
            )

    def forget(self, uid: str) -> None:
        """The object is gone: drop its aggregation state."""
        with self._lock:
            self._last.pop(uid, None)
