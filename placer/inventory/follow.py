"""Following the workloads of the fleet as they change (``placer get -w``).

:class:`Follower` watches every catalog kind (or the kinds asked for) on every member cluster —
one list-then-watch per cluster and kind (:class:`placer.kube.Watcher`: bookmarks, resuming
from the last resourceVersion, a fresh list after ``410 Gone``), each in its own thread — and
hands over one :class:`Change` per change of a workload's row: it appeared, its phase,
components or GPUs changed, or it was deleted. Object changes that leave the row as it was (a
status heartbeat, a label) are not passed on, so the output follows phases as ``kubectl get
-w`` follows its columns. The rows already shown (``placer get``'s first listing) are given
at the start: only what differs from them is passed on.

Kinds a cluster does not serve are skipped; a watch that fails for good (the cluster stopped
answering past the watcher's retries, a 403) ends with a problem handed to ``on_problem``,
and the others go on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placer.definitions import Catalog, Definition
from placer.errors import KubeError, NotFoundError
from placer.inventory.listing import (
    LiveWorkload,
    components_text,
    covered_kinds,
    live_workload,
    top_level,
)
from placer.kube import KubeClient, Listed, WatchEvent

__all__ = ["ADDED", "DELETED", "MODIFIED", "Change", "Follower", "row_key"]

log = logging.getLogger(__name__)

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


@dataclass(frozen=True)
class Change:
    """A workload that appeared (``ADDED``), changed its row (``MODIFIED``) or went
    (``DELETED``: ``workload`` is its last state)."""

    type: str
    workload: LiveWorkload


def row_key(workload: LiveWorkload) -> tuple[str, ...]:
    """What a row shows that can change: phase, components, GPUs (not the age)."""
    return (",".join(workload.phases), components_text(workload), workload.gpu_text)


class Follower:
    """Watches the fleet's workloads and reports their changes (module docstring).

    Args:
        clients: the member clusters, by name.
        catalog: the definitions (what a workload is, its phase).
        namespace: one namespace, or ``None`` for all.
        definitions: the kinds to follow (default: every catalog kind).
        on_change: called with each :class:`Change`, from the watch threads, one at a time.
        on_problem: called with ``(cluster, text)`` when a watch ends for good.
        shown: the workloads already shown, by ``(cluster, uid)``.
    """

    def __init__(
        self,
        clients: Mapping[str, KubeClient],
        catalog: Catalog,
        *,
        namespace: str | None,
        definitions: Sequence[Definition] | None = None,
        on_change: Callable[[Change], None],
        on_problem: Callable[[str, str], None],
        shown: Iterable[LiveWorkload] = (),
    ) -> None:
        self.clients = dict(clients)
        self.catalog = catalog
        self.namespace = namespace
        chosen = definitions if definitions is not None else catalog.definitions
        self.definitions = [d for d in chosen if d.target is not None]
        self.on_change = on_change
        self.on_problem = on_problem
        self._covered = covered_kinds(catalog)
        self._lock = threading.Lock()
        shown = list(shown)
        #: (cluster, uid) -> the row last passed on.
        self._rows: dict[tuple[str, str], tuple[str, ...]] = {
            (w.cluster, w.uid): row_key(w) for w in shown
        }
        #: (cluster, uid) -> the last state seen of a workload with a row (what a deletion
        #: found by a re-list shows).
        self._last: dict[tuple[str, str], LiveWorkload] = {(w.cluster, w.uid): w for w in shown}
        self._watchers: list[Any] = []
        self._threads: list[threading.Thread] = []
        self._stopped = threading.Event()

    def start(self) -> Follower:
        """One watch thread per cluster and kind; returns ``self``."""
        for cluster, client in self.clients.items():
            for definition in self.definitions:
                thread = threading.Thread(
                    target=self._follow,
                    args=(cluster, client, definition),
                    name=f"follow-{cluster}-{definition.name}",
                    daemon=True,
                )
                self._threads.append(thread)
                thread.start()
        return self

    def stop(self) -> None:
        """Stop every watch (unblocks their reads) and wait for the threads (a few seconds at
        most)."""
        self._stopped.set()
        with self._lock:
            watchers = list(self._watchers)
        for watcher in watchers:
            watcher.stop()
        for thread in self._threads:
            thread.join(timeout=5.0)

    def alive(self) -> bool:
        """Whether any watch is still running."""
        return any(t.is_alive() for t in self._threads)

    # ----------------------------------------------------------------------------------------

    def _follow(self, cluster: str, client: KubeClient, definition: Definition) -> None:
        target = definition.target
        assert target is not None
        try:
            client.resource(target.api_version, target.kind)
        except NotFoundError:
            return  # the kind is not served there
        except KubeError as err:
            self.on_problem(cluster, f"{target.kind}: {err.message}")
            return
        watcher = client.watch(target.api_version, target.kind, namespace=self.namespace)
        with self._lock:
            self._watchers.append(watcher)
        if self._stopped.is_set():
            return
        try:
            for item in watcher:
                if isinstance(item, Listed):
                    self._relisted(cluster, definition, item.items)
                elif isinstance(item, WatchEvent):
                    self._event(cluster, definition, item)
        except KubeError as err:
            if not self._stopped.is_set():
                self.on_problem(cluster, f"{target.kind}: watch ended: {err.message}")

    def _relisted(
        self, cluster: str, definition: Definition, items: Sequence[dict[str, Any]]
    ) -> None:
        """A (re-)list: what differs from the rows passed on, and what is gone."""
        target = definition.target
        assert target is not None
        present: set[str] = set()
        for item in items:
            if not top_level(item, self._covered):
                continue
            workload = live_workload(cluster, item, definition, self.catalog)
            present.add(workload.uid)
            self._report(ADDED, workload)
        with self._lock:
            known = [uid for (c, uid) in self._rows if c == cluster]
        for uid in known:
            if uid in present:
                continue
            with self._lock:
                gone = self._last.get((cluster, uid))
            if gone is not None and gone.kind == target.kind:
                self._report(DELETED, gone)

    def _event(self, cluster: str, definition: Definition, event: WatchEvent) -> None:
        if not top_level(event.object, self._covered):
            return
        workload = live_workload(cluster, event.object, definition, self.catalog)
        self._report(DELETED if event.type == DELETED else ADDED, workload)

    def _report(self, kind: str, workload: LiveWorkload) -> None:
        """Pass a change on when it changes the row (or removes it)."""
        key = (workload.cluster, workload.uid)
        row = row_key(workload)
        with self._lock:
            previous = self._rows.get(key)
            if kind == DELETED:
                if previous is None:
                    return
                del self._rows[key]
                self._last.pop(key, None)
                change = Change(DELETED, workload)
            else:
                self._last[key] = workload
                if previous == row:
                    return
                self._rows[key] = row
                change = Change(ADDED if previous is None else MODIFIED, workload)
            self.on_change(change)
