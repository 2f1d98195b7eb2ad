"""What the controller knows of the hub: its workloads, definitions and policies, kept by informers.

:class:`HubCache` holds

* the **hub objects** of every catalog kind (by name and by uid) as their informers last saw
  them, refreshed by the controller's own writes (:meth:`HubCache.refresh`: an answer that
  arrives after the object's DELETED event never brings it back), with when each was first
  seen (for the placement latency);
* the **decompositions** of those objects, one per live object and only of its latest version,
  counting the devices of the DRA claims their pods name: the hub's ResourceClaimTemplates and
  ResourceClaims in the object's namespace (:data:`CLAIM_KINDS`, watched; a change in a
  namespace makes its objects' decompositions be made again), as ``placer plan`` counts the
  claims given beside a workload;
* the hub's **definitions, policies and queues** as read (:mod:`placer.controller.hubconfig`),
  with what was last reported about each of those objects;
* the **informers** of the hub: one per workload kind, one per config kind (definitions,
  policies) and one per DRA claim kind.

:meth:`HubCache.forget` drops an object that is gone and says whether it did, so that the
controller forgets it everywhere else in the same step. It locks ``lock`` (its own by default;
the controller passes the lock its state objects share).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from placer.accelerators import ClaimIndex
from placer.controller.hubconfig import HubDefinitions, HubPolicies, HubQueues, selected
from placer.controller.informer import Change, Informer
from placer.controller.records import ANNOTATION_CLUSTER, JSON, is_opted_in, rv_of
from placer.definitions import Catalog, Decomposition, decompose
from placer.errors import PlacerError
from placer.kube import KubeClient
from placer.model import WorkloadRef
from placer.objects import annotations_of, name_key, uid_of, version_of
from placer.policy import PlacementPolicy
from placer.queues import QueueSet

__all__ = ["CLAIM_KINDS", "DECOMPOSITIONS", "HubCache", "KindKey"]

log = logging.getLogger(__name__)

#: ``(apiVersion, kind)``.
KindKey = tuple[str, str]
#: the DRA objects a hub workload's pods may name, whose devices count toward its demand (the
#: API version capacity gathering reads, :data:`placer.fleet.devices.DRA_API_VERSION`).
CLAIM_KINDS: tuple[KindKey, ...] = (
    ("resource.k8s.io/v1", "ResourceClaimTemplate"),
    ("resource.k8s.io/v1", "ResourceClaim"),
)
#: decompositions kept at most (the least recently used go first).
DECOMPOSITIONS = 20_000


class HubCache:
    """The hub as the controller sees it (see the module docstring).

    Args:
        hub: a client for the hub (informers list and watch through it).
        catalog: the definitions before the hub's own.
        ignored_namespaces: namespaces whose objects are never placed.
        discovery_interval: seconds between looks for kinds the hub does not serve yet.
        clock: monotonic seconds.
        lock: the lock to hold (default: a new one).
    """

    def __init__(
        self,
        hub: KubeClient,
        catalog: Catalog,
        *,
        ignored_namespaces: Collection[str] = (),
        discovery_interval: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        lock: threading.RLock | None = None,
    ) -> None:
        self.client = hub
        self.base_catalog = catalog
        self.ignored_namespaces = frozenset(ignored_namespaces)
        self.discovery_interval = discovery_interval
        self._clock = clock
        self._lock = lock if lock is not None else threading.RLock()
        self._objects: dict[WorkloadRef, JSON] = {}
        self._by_uid: dict[str, WorkloadRef] = {}
        self._first_seen: dict[WorkloadRef, float] = {}
        #: the hub objects with a placement record (``placer_managed_workloads``).
        self._placed: set[WorkloadRef] = set()
        #: hub object uid -> (resourceVersion, claims generation of its namespace,
        #: decomposition): one entry per live object.
        self._decomposed: OrderedDict[str, tuple[str, int, Decomposition]] = OrderedDict()
        #: namespace -> its DRA claims indexed (built when first needed after a change).
        self._claims: dict[str, ClaimIndex] = {}
        #: namespace -> how many times its DRA claims changed.
        self._claims_generation: dict[str, int] = {}
        self._claim_informers: list[Informer] = []
        self._definitions = HubDefinitions(catalog)
        self._policies = HubPolicies()
        self._queues = HubQueues()
        self._config_versions: dict[str, tuple[tuple[str, str, str], ...]] = {}
        self._reported: dict[str, str] = {}
        self._informers: dict[KindKey, Informer] = {}
        self._config_informers: dict[KindKey, Informer] = {}

    # -- hub objects -----------------------------------------------------------------------------

    def get(self, ref: WorkloadRef) -> JSON | None:
        with self._lock:
            return self._objects.get(ref)

    def ref_of(self, uid: str) -> WorkloadRef | None:
        """The live hub object of ``uid``, if any."""
        with self._lock:
            return self._by_uid.get(uid)

    def items(self) -> list[tuple[WorkloadRef, JSON]]:
        with self._lock:
            return list(self._objects.items())

    def objects(self) -> list[JSON]:
        with self._lock:
            return list(self._objects.values())

    def refs(self, api_version: str | None = None, kind: str | None = None) -> list[WorkloadRef]:
        """Every hub object (of ``api_version``/``kind`` when given)."""
        with self._lock:
            if kind is None:
                return list(self._objects)
            return [r for r in self._objects if (r.api_version, r.kind) == (api_version, kind)]

    def first_seen(self, ref: WorkloadRef) -> float | None:
        with self._lock:
            return self._first_seen.get(ref)

    def placed_count(self) -> int:
        """How many hub objects carry a placement record."""
        with self._lock:
            return len(self._placed)

    def put(self, ref: WorkloadRef, obj: JSON) -> None:
        """The object as its informer saw it (added or changed)."""
        with self._lock:
            self._keep(ref, obj)
            self._by_uid[uid_of(obj)] = ref
            self._first_seen.setdefault(ref, self._clock())

    def _keep(self, ref: WorkloadRef, obj: JSON) -> None:
        self._objects[ref] = obj
        if ANNOTATION_CLUSTER in annotations_of(obj):
            self._placed.add(ref)
        else:
            self._placed.discard(ref)

    def refresh(self, ref: WorkloadRef, obj: JSON) -> None:
        """Keep what a hub write answered, unless the object is gone meanwhile (or replaced by
        another of the same name, or newer already)."""
        with self._lock:
            current = self._objects.get(ref)
            if current is None or uid_of(current) != uid_of(obj):
                return
            informer = self._informers.get((ref.api_version, ref.kind))
            if informer is not None:
                informer.refresh(obj)
            if rv_of(current) <= rv_of(obj):
                self._keep(ref, obj)

    def forget(self, ref: WorkloadRef, uid: str) -> tuple[bool, JSON | None]:
        """The hub object ``ref`` of ``uid`` is gone: drop it (and its decomposition).

        Returns ``(False, None)`` when another object of that name (another uid) is cached,
        which stays; otherwise ``(True, the object dropped or None)``.
        """
        with self._lock:
            current = self._objects.get(ref)
            if current is not None and uid and uid_of(current) != uid:
                return False, None
            self._objects.pop(ref, None)
            self._placed.discard(ref)
            self._first_seen.pop(ref, None)
            if uid:
                self._by_uid.pop(uid, None)
                self._decomposed.pop(uid, None)
            return True, current

    def opted_in(self, obj: Mapping[str, Any], ref: WorkloadRef) -> bool:
        """Whether the object asks to be placed: the ``placer.dev/queue`` label, or a hub
        PlacementPolicy selects it (never in an ignored namespace)."""
        if ref.namespace in self.ignored_namespaces:
            return False
        if is_opted_in(obj):
            return True
        return selected(obj, ref, self.policies) is not None

    # -- decompositions --------------------------------------------------------------------------

    def decompose(self, obj: Mapping[str, Any]) -> Decomposition:
        """The hub object's decomposition, cached per object (its latest version, with the
        claims of its namespace as they are now)."""
        uid, version = uid_of(obj), version_of(obj)
        generation, claims = self.claims(name_key(obj)[0])
        with self._lock:
            cached = self._decomposed.get(uid)
            catalog = self._definitions.catalog
        if cached is not None and cached[:2] == (version, generation):
            return cached[2]
        decomposition = decompose(obj, catalog, source="hub", claims=claims)
        with self._lock:
            if uid in self._by_uid:  # (not for an object gone meanwhile)
                self._decomposed[uid] = (version, generation, decomposition)
                self._decomposed.move_to_end(uid)
            while len(self._decomposed) > DECOMPOSITIONS:
                self._decomposed.popitem(last=False)
        return decomposition

    def claims(self, namespace: str) -> tuple[int, ClaimIndex]:
        """The hub's DRA claims in ``namespace`` and how many times they changed.

        A malformed one is left out (with a warning naming it): the pods that name it count
        its devices as unknown, as for a claim that is not there.
        """
        with self._lock:
            generation = self._claims_generation.get(namespace, 0)
            index = self._claims.get(namespace)
            informers = list(self._claim_informers)
        if index is not None:
            return generation, index
        index = ClaimIndex()
        for informer in informers:
            for obj in informer.objects():
                if name_key(obj)[0] != namespace:
                    continue
                try:
                    index.add(obj, source="hub")
                except PlacerError as err:
                    log.warning(
                        "%s: its devices are not counted", err, extra={"event": "invalid-claim"}
                    )
        with self._lock:
            if self._claims_generation.get(namespace, 0) == generation:
                self._claims[namespace] = index
        return generation, index

    def _claim_changed(self, _informer: Informer, old: JSON | None, new: JSON | None) -> None:
        obj = new if new is not None else old
        if obj is None:
            return
        namespace = name_key(obj)[0]
        with self._lock:
            self._claims.pop(namespace, None)
            self._claims_generation[namespace] = self._claims_generation.get(namespace, 0) + 1

    # -- definitions and policies ----------------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        """The catalog in use: the base one extended with the hub's valid definitions."""
        with self._lock:
            return self._definitions.catalog

    @property
    def definitions(self) -> HubDefinitions:
        with self._lock:
            return self._definitions

    @property
    def policies(self) -> tuple[PlacementPolicy, ...]:
        """The hub's valid PlacementPolicies, in name order."""
        with self._lock:
            return self._policies.policies

    @property
    def queues(self) -> QueueSet | None:
        """The hub's valid queues and priority classes (``None``: no valid Queue)."""
        with self._lock:
            return self._queues.queues

    @property
    def priority_classes(self) -> QueueSet:
        """The hub's PriorityClasses (as a set without queues)."""
        with self._lock:
            return self._queues.classes

    def set_queues(self, queues: HubQueues) -> None:
        with self._lock:
            self._queues = queues

    def set_definitions(self, definitions: HubDefinitions) -> None:
        """Use ``definitions`` (every decomposition is made again)."""
        with self._lock:
            self._definitions = definitions
            self._decomposed.clear()

    def set_policies(self, policies: HubPolicies) -> None:
        with self._lock:
            self._policies = policies

    def config_changed(self, what: str, objects: Sequence[Mapping[str, Any]]) -> bool:
        """Whether the hub's ``what`` (definitions, policies) differ from the last ones read."""
        versions = tuple(sorted((str(o.get("kind")), uid_of(o), version_of(o)) for o in objects))
        with self._lock:
            if self._config_versions.get(what) == versions:
                return False
            self._config_versions[what] = versions
            return True

    def report_changed(self, key: str, state: str) -> bool:
        """Whether ``state`` (a problem, ``""`` for none) is news for config object ``key``."""
        with self._lock:
            if self._reported.get(key) == state:
                return False
            self._reported[key] = state
            return True

    # -- informers -------------------------------------------------------------------------------

    def watch(self, api_version: str, kind: str, on_change: Change) -> bool:
        """Start the informer of a workload kind unless it runs; whether it was started."""
        key = (api_version, kind)
        with self._lock:
            if key in self._informers:
                return False
            informer = Informer(
                self.client,
                api_version,
                kind,
                on_change=on_change,
                discovery_interval=self.discovery_interval,
            )
            self._informers[key] = informer
        informer.start()
        return True

    def watch_config(self, api_version: str, kind: str, on_change: Callable[[], None]) -> None:
        """Start the informer of a config kind; ``on_change`` runs once it is listed and after
        each change."""

        def changed(informer: Informer, _old: JSON | None, _new: JSON | None) -> None:
            if informer.synced:
                on_change()

        informer = Informer(
            self.client,
            api_version,
            kind,
            on_change=changed,
            on_state=lambda inf, ok, _reason: on_change() if ok and inf.synced else None,
            discovery_interval=self.discovery_interval,
        )
        with self._lock:
            self._config_informers[(api_version, kind)] = informer
        informer.start()

    def watch_claims(self) -> None:
        """Start the informers of the DRA claim kinds (:data:`CLAIM_KINDS`)."""
        for api_version, kind in CLAIM_KINDS:
            informer = Informer(
                self.client,
                api_version,
                kind,
                on_change=self._claim_changed,
                discovery_interval=self.discovery_interval,
            )
            with self._lock:
                self._claim_informers.append(informer)
            informer.start()

    def config_objects(self, *kinds: KindKey) -> list[JSON]:
        """The listed objects of config ``kinds``."""
        with self._lock:
            informers = [self._config_informers.get(k) for k in kinds]
        return [obj for i in informers if i is not None for obj in i.objects()]

    def watching(self, api_version: str, kind: str) -> bool:
        """Whether the informer of a workload kind runs."""
        with self._lock:
            return (api_version, kind) in self._informers

    def synced(self, api_version: str, kind: str) -> bool:
        """Whether the hub's objects of a workload kind are listed."""
        with self._lock:
            informer = self._informers.get((api_version, kind))
        return informer is not None and informer.synced

    def wait_config(self, timeout: float) -> None:
        """Until every config and claim informer listed (each at most ``timeout`` seconds)."""
        with self._lock:
            informers = [*self._config_informers.values(), *self._claim_informers]
        for informer in informers:
            informer.wait_synced(timeout=timeout)

    def unlisted(self) -> list[str] | None:
        """The kinds not listed yet (``None`` before any informer runs)."""
        informers = self.all_informers()
        if not informers:
            return None
        return [i.kind for i in informers if not i.synced]

    def informers(self) -> list[Informer]:
        """The informers of the workload kinds."""
        with self._lock:
            return list(self._informers.values())

    def all_informers(self) -> list[Informer]:
        """Every informer on the hub (config and claim kinds first)."""
        with self._lock:
            return [
                *self._config_informers.values(),
                *self._claim_informers,
                *self._informers.values(),
            ]

    def sizes(self) -> dict[str, int]:
        """How many objects (placed ones), uids, first-seen times and decompositions are
        held."""
        with self._lock:
            return {
                "objects": len(self._objects),
                "placed": len(self._placed),
                "by_uid": len(self._by_uid),
                "first_seen": len(self._first_seen),
                "decomposed": len(self._decomposed),
            }
