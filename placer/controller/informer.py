"""A cache of one kind on one cluster, kept current by :class:`placer.kube.Watcher` in a thread.

The list → watch → re-list rules live in :mod:`placer.kube.watching` (written once); an
:class:`Informer` only adds what the controller needs around them:

* a cache of the objects by ``(namespace, name)``, replaced on every (re-)list, and a
  ``synced`` flag that is true from the first complete list until the cluster stops answering;
* a callback per change, with the old and new object (``None`` for absent), including the
  deletions a re-list reveals (objects missing from the new list);
* resilience: a kind the server does not serve (its CRD is not installed) counts as listed and
  empty, and is looked up again every ``discovery_interval``; a cluster that stops answering
  makes the informer report ``reachable=False`` and retry with backoff until stopped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from placer.controller.reconcile import Backoff
from placer.controller.records import JSON, rv_of
from placer.errors import ClusterUnreachableError, KubeError, NotFoundError
from placer.fleet.gather import failure_reason
from placer.kube import KubeClient, Listed, WatchSettings
from placer.objects import name_key, uid_of

__all__ = ["Change", "Informer", "ObjectKey"]

log = logging.getLogger(__name__)

ObjectKey = tuple[str, str]
#: ``callback(informer, old, new)``: one object changed (``None`` = absent).
Change = Callable[["Informer", JSON | None, JSON | None], None]


class Informer:
    """Watches ``api_version``/``kind`` on ``client``'s cluster (see the module docstring).

    Args:
        client: the cluster.
        api_version, kind: what to watch.
        on_change: called for every change, in the informer's thread (keep it quick).
        on_state: called with ``(informer, reachable, reason)`` when listing or watching
            fails (``reachable`` False when the cluster does not answer at all, True when it
            answers with an error such as 401 or 403; ``reason`` says what failed and what to
            do) and with ``(informer, True, "")`` after each successful list.
        label_selector: only objects matching it.
        namespace: only objects of this namespace (default: every namespace).
        transform: what is kept of each object (client-go's transform; it must keep the
            metadata's name, namespace, uid and resourceVersion), applied before caching and
            callbacks.
        watch: watch settings (server timeout, reconnects).
        discovery_interval: seconds between looks for a kind the server does not serve.
        retry_interval: longest wait between attempts while the cluster does not answer.
    """

    def __init__(
        self,
        client: KubeClient,
        api_version: str,
        kind: str,
        *,
        on_change: Change,
        on_state: Callable[[Informer, bool, str], None] | None = None,
        label_selector: str | None = None,
        namespace: str | None = None,
        transform: Callable[[JSON], JSON] | None = None,
        watch: WatchSettings | None = None,
        discovery_interval: float = 30.0,
        retry_interval: float = 10.0,
    ) -> None:
        self.client = client
        self.api_version = api_version
        self.kind = kind
        self.label_selector = label_selector
        self.namespace = namespace
        self._transform = transform
        self._on_change = on_change
        self._on_state = on_state
        self._watch_settings = watch
        self.discovery_interval = discovery_interval
        self.retry_interval = retry_interval
        #: the wait after each failure in a row: 0.5 s doubling up to ``retry_interval``.
        self._retry = Backoff(0.5, retry_interval)
        self._cache: dict[ObjectKey, JSON] = {}
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._watcher: Any = None
        self._thread: threading.Thread | None = None
        #: whether the server serves the kind (False: treated as listed and empty).
        self.served = True

    def __repr__(self) -> str:
        return f"Informer({self.client.name}, {self.api_version} {self.kind})"

    @property
    def cluster(self) -> str:
        return self.client.name

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    def objects(self) -> list[JSON]:
        with self._lock:
            return list(self._cache.values())

    def get(self, namespace: str, name: str) -> JSON | None:
        with self._lock:
            return self._cache.get((namespace, name))

    def remember(self, obj: Mapping[str, Any]) -> None:
        """Put an object the controller just wrote into the cache (the watch will follow).

        Ignored when the cache already holds a newer version of it.
        """
        key = name_key(obj)
        with self._lock:
            current = self._cache.get(key)
            if current is not None and rv_of(current) > rv_of(obj):
                return
            self._cache[key] = dict(obj)

    def refresh(self, obj: Mapping[str, Any]) -> None:
        """Replace a cached object with a newer version the controller just wrote.

        Unlike :meth:`remember`, nothing happens when the object is not cached (any more):
        an answer that arrives after the watch's DELETED event must not bring it back.
        """
        key = name_key(obj)
        with self._lock:
            current = self._cache.get(key)
            if current is None or uid_of(current) != uid_of(obj) or rv_of(current) > rv_of(obj):
                return
            self._cache[key] = dict(obj)

    def forget(self, namespace: str, name: str) -> None:
        """Drop an object the controller just deleted."""
        with self._lock:
            self._cache.pop((namespace, name), None)

    def start(self) -> Informer:
        self._thread = threading.Thread(
            target=self._run, name=f"informer-{self.cluster}-{self.kind}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        watcher = self._watcher
        if watcher is not None:
            watcher.stop()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    # ----------------------------------------------------------------------------------------

    def _run(self) -> None:
        failures = 0  # in a row
        while not self._stop.is_set():
            try:
                self.client.resource(self.api_version, self.kind)
            except NotFoundError:
                self._not_served()
                continue
            except KubeError as err:
                failures = self._trouble(err, failures)
                continue
            self.served = True
            watcher = self.client.watch(
                self.api_version,
                self.kind,
                namespace=self.namespace,
                label_selector=self.label_selector,
                settings=self._watch_settings,
            )
            self._watcher = watcher
            if self._stop.is_set():
                return
            try:
                kept = self._transform
                for item in watcher:
                    if isinstance(item, Listed):
                        self._listed([kept(o) for o in item.items] if kept else item.items)
                        failures = 0
                    elif item.type == "DELETED":
                        self._delete(kept(item.object) if kept else item.object)
                    else:
                        self._upsert(kept(item.object) if kept else item.object)
                    if self._stop.is_set():
                        return
            except NotFoundError:
                self._not_served()
            except KubeError as err:
                failures = self._trouble(err, failures)
            except Exception:  # a bug in a callback must not end the informer silently
                log.exception("%r: unexpected failure; restarting", self)
                self._stop.wait(self._retry.delay(failures + 1))
            finally:
                self._watcher = None

    def _not_served(self) -> None:
        """The kind is not served: nothing of it exists there; look again later."""
        self.served = False
        self._listed([])
        self.client.forget_discovery()
        self._stop.wait(self.discovery_interval)

    def _trouble(self, err: KubeError, failures: int) -> int:
        """Report a failure, wait before the next attempt; failures in a row now."""
        reachable = not isinstance(err, ClusterUnreachableError)
        log.warning(
            "cluster %s: watching %s failed: %s",
            self.cluster,
            self.kind,
            err,
            extra={"event": "watch-error", "cluster": self.cluster, "kind": self.kind},
        )
        if not reachable:
            self._synced.clear()
        if self._on_state is not None:
            self._on_state(self, reachable, failure_reason(err))
        self._stop.wait(self._retry.delay(failures + 1))
        return failures + 1

    def _listed(self, items: list[JSON]) -> None:
        fresh = {name_key(o): o for o in items}
        with self._lock:
            old = self._cache
            self._cache = dict(fresh)
        # NB: callbacks first, then ``synced``: whoever trusts ``synced`` has seen every object
        for key, obj in old.items():
            if key not in fresh:
                self._on_change(self, obj, None)
        for key, obj in fresh.items():
            previous = old.get(key)
            if previous is None or rv_of(previous) != rv_of(obj):
                self._on_change(self, previous, obj)
        self._synced.set()
        if self._on_state is not None:
            self._on_state(self, True, "")

    def _upsert(self, obj: JSON) -> None:
        key = name_key(obj)
        with self._lock:
            old = self._cache.get(key)
            self._cache[key] = obj
        self._on_change(self, old, obj)

    def _delete(self, obj: JSON) -> None:
        key = name_key(obj)
        with self._lock:
            old = self._cache.pop(key, None)
        self._on_change(self, old or obj, None)
