"""The list → watch → re-list loop, written once.

The rules (the same as kopf's, and as client-go's reflector):

1. **List** everything (paginated) and remember the list's resourceVersion (RV). The consumer
   gets a :class:`Listed` item with the full state: it replaces whatever it had.
2. **Watch** from that RV with ``allowWatchBookmarks``. Every ADDED/MODIFIED/DELETED event is
   passed on as a :class:`WatchEvent`; its object's RV becomes the latest RV.
3. **BOOKMARK** events only move the latest RV forward; they are not passed on.
4. When a watch request ends normally (server ``timeoutSeconds``), watch again from the latest
   RV — no re-list.
5. **410 Gone/Expired** (an ``ERROR`` event with code 410, or an HTTP 410 answer): the RV is
   too old; go back to 1 (a new :class:`Listed`).
6. Any other ``ERROR`` event is fatal: it is raised as the matching :class:`KubeError`.
7. Unknown event types and undecodable lines are logged and skipped.
8. Transport failures of lists and watches are retried with backoff
   (``WatchSettings.max_reconnects`` in a row); a watch resumes from the latest RV.

:class:`WatchState` is the pure part (rules 2, 3, 5, 6, 7 on decoded events) and
:func:`iter_lines` splits a chunked stream into lines; :class:`Watcher` drives them over a
:class:`placer.kube.KubeClient`. ``Watcher.stop()`` may be called from another thread.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from http.client import HTTPException
from typing import TYPE_CHECKING, Any

import urllib3.exceptions

from placer.backoff import Doubling
from placer.errors import ClusterUnreachableError, KubeError
from placer.kube.requests import watch_request
from placer.kube.settings import WatchSettings
from placer.kube.translate import error_from_status
from placer.objects import version_of

if TYPE_CHECKING:
    from placer.kube.client import KubeClient, ObjectList

__all__ = ["Action", "Listed", "WatchEvent", "WatchState", "Watcher", "iter_lines"]

log = logging.getLogger(__name__)

#: the longest wait between reconnects (unless ``reconnect_backoff`` itself is longer).
_MAX_RECONNECT_WAIT = 30.0

#: Event types passed on to consumers.
OBJECT_EVENTS = ("ADDED", "MODIFIED", "DELETED")


@dataclass(frozen=True)
class WatchEvent:
    """An object change: ``type`` is ``ADDED``, ``MODIFIED`` or ``DELETED``."""

    type: str
    object: dict[str, Any]


@dataclass(frozen=True)
class Listed:
    """The complete state after a (re-)list: consumers replace their cache with ``items``."""

    items: list[dict[str, Any]]
    resource_version: str


class Action(Enum):
    """What the driver does after one raw event."""

    EMIT = "emit"
    SKIP = "skip"
    RELIST = "relist"


class WatchState:
    """The latest resourceVersion and the per-event rules (pure).

    Args:
        resource_version: the RV of the last list.
        cluster: member cluster name for errors and logs.
    """

    def __init__(self, resource_version: str = "", *, cluster: str | None = None) -> None:
        self.resource_version = resource_version
        self.cluster = cluster

    def on_line(self, line: bytes | str) -> tuple[Action, WatchEvent | None]:
        """Decode one stream line and apply :meth:`on_event`."""
        try:
            raw = json.loads(line)
        except ValueError:
            log.warning("cluster %s: skipping an undecodable watch line", self.cluster)
            return Action.SKIP, None
        return self.on_event(raw)

    def on_event(self, raw: object) -> tuple[Action, WatchEvent | None]:
        """Apply the rules to one decoded event.

        Raises:
            KubeError: an ``ERROR`` event other than 410.
        """
        if not isinstance(raw, dict) or not isinstance(raw.get("object"), dict):
            log.warning("cluster %s: skipping a malformed watch event", self.cluster)
            return Action.SKIP, None
        kind, obj = raw.get("type"), raw["object"]
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                return Action.RELIST, None
            raise error_from_status(
                int(code) if isinstance(code, int) else 500,
                obj,
                cluster=self.cluster,
                action="watch",
            )
        version = version_of(obj)
        if kind == "BOOKMARK":
            if version:
                self.resource_version = version
            return Action.SKIP, None
        if kind not in OBJECT_EVENTS:
            log.warning("cluster %s: skipping unknown watch event type %r", self.cluster, kind)
            return Action.SKIP, None
        if version:
            self.resource_version = version
        return Action.EMIT, WatchEvent(str(kind), obj)


def iter_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Non-empty lines of a byte stream whose chunks may split or join lines."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        if b"\n" not in chunk:
            continue
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


class Watcher:
    """Iterate over :class:`Listed` and :class:`WatchEvent` items of one kind, until stopped.

    Build it with :meth:`placer.kube.KubeClient.watch`; iterate in one thread, call
    :meth:`stop` from any thread.
    """

    def __init__(
        self,
        client: KubeClient,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        settings: WatchSettings | None = None,
    ) -> None:
        self.client = client
        self.api_version = api_version
        self.kind = kind
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.settings = settings or client.settings.watch
        self.state = WatchState(cluster=client.name)
        self._stop = threading.Event()
        self._response: Any = None
        self._lock = threading.Lock()

    @property
    def resource_version(self) -> str:
        """The latest RV seen (list, events or bookmarks)."""
        return self.state.resource_version

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """End the iteration soon (unblocks a waiting read)."""
        self._stop.set()
        with self._lock:
            response = self._response
        if response is not None:
            try:
                response.shutdown()
            except Exception:  # already closed or released: nothing to unblock
                log.debug("watch response already closed")

    def __iter__(self) -> Iterator[Listed | WatchEvent]:
        while not self.stopped:
            listed = self._list()
            if listed is None:
                return
            self.state.resource_version = listed.resource_version
            yield Listed(listed.items, listed.resource_version)
            yield from self._watch_until_gone()

    def _list(self) -> ObjectList | None:
        """The full list, retried like a watch on transport failures; ``None`` once stopped."""
        backoff = _Backoff(self.settings, self._stop, self.client.name)
        while not self.stopped:
            try:
                return self.client.list(
                    self.api_version,
                    self.kind,
                    namespace=self.namespace,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                )
            except ClusterUnreachableError as err:
                backoff.failed(err, "list")
        return None

    def _watch_until_gone(self) -> Iterator[WatchEvent]:
        """Watch from the latest RV until 410 (return) or stop; reconnect on failures."""
        backoff = _Backoff(self.settings, self._stop, self.client.name)
        ref = self.client.resource(self.api_version, self.kind)
        while not self.stopped:
            request = watch_request(
                ref,
                resource_version=self.state.resource_version,
                namespace=self.namespace,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                timeout_seconds=self.settings.server_timeout,
                allow_bookmarks=self.settings.allow_bookmarks,
            )
            try:
                with self.client.stream(
                    request, read_timeout=self.settings.server_timeout + 15
                ) as response:
                    with self._lock:
                        self._response = response
                    if self.stopped:
                        # NB: stop() came between the loop's check and the line above: it
                        # found no response to shut down, so this stream would wait for data
                        return
                    for line in iter_lines(_chunks(response)):
                        action, event = self.state.on_line(line)
                        if action is Action.RELIST:
                            return
                        if event is not None:
                            backoff.reset()
                            yield event
                        if self.stopped:
                            return
                backoff.reset()
            except KubeError as err:
                if self.stopped or err.code == 410:
                    return
                if not isinstance(err, ClusterUnreachableError):
                    raise
                backoff.failed(err, "watch")
            finally:
                with self._lock:
                    self._response = None


class _Backoff:
    """Consecutive transport failures: wait (doubling, capped at 30 s) or give up (re-raise)."""

    def __init__(self, settings: WatchSettings, stop: threading.Event, cluster: str) -> None:
        self.settings = settings
        self.stop = stop
        self.cluster = cluster
        self.reset()

    def reset(self) -> None:
        initial = self.settings.reconnect_backoff
        self.waits = Doubling(initial, max(initial, _MAX_RECONNECT_WAIT))

    def failed(self, err: ClusterUnreachableError, what: str) -> None:
        """Count ``err``; re-raise it past ``max_reconnects``, else wait before the retry."""
        wait = self.waits.failed()
        if self.waits.failures > self.settings.max_reconnects:
            raise err
        log.warning("cluster %s: %s failed (%s); retrying", self.cluster, what, err)
        self.stop.wait(wait)


def _chunks(response: Any) -> Iterator[bytes]:
    """Bytes as they arrive (``read1`` returns what is available, chunked or not)."""
    while True:
        try:
            chunk = response.read1(65536)
        except (OSError, ValueError, AttributeError, HTTPException, urllib3.exceptions.HTTPError):
            # the socket was shut down by stop(), or the connection dropped: end this stream
            return
        if not chunk:
            return
        yield chunk
