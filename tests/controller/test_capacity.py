"""The members' capacity kept by watches (placer.controller.capacity), over real HTTPS to
loopback API servers: equal to a fresh gather node by node after random churn (410 re-lists
included), members refusing or going away left out as a gather leaves them out, and no LIST
sent to the members once the watches run."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from placer.accelerators import default_accelerators
from placer.controller.capacity import MemberCapacity
from placer.dispatch.ledger import InFlight, Ledger
from placer.dispatch.ledger.store import remove_entries, write_entry
from placer.dispatch.ledger.sync import sync_cluster
from placer.fleet import ClusterSource, FleetConfig, fleet_from_kubeconfigs
from placer.fleet.capacity import GPU_DEVICES_ANNOTATION
from placer.fleet.gather import gather_cluster
from placer.kube import ClientSettings, KubeClient, WatchSettings, open_client
from placer.model import Cluster, Node, Placement, PodAssignment, WorkloadRef
from placer.quantity import GPU
from placer.testing import ApiServer, write_kubeconfig
from tests.builders import objects
from tests.controller.conftest import wait_for
from tests.fleet.churn import Churn

FAST = WatchSettings(server_timeout=2, reconnect_backoff=0.2, max_reconnects=2)
PLURALS = {
    "Node": "nodes",
    "Pod": "pods",
    "ResourceSlice": "resourceslices",
    "ResourceClaim": "resourceclaims",
}


class Members:
    """Loopback members seeded from :class:`Churn`, their fleet config and clients."""

    def __init__(self, tmp: Path, seeds: tuple[int, ...]) -> None:
        self.churns = {f"m{i + 1}": Churn(nodes=25, pods=200, seed=s) for i, s in enumerate(seeds)}
        self.servers = {name: ApiServer().start() for name in self.churns}
        for name, churn in self.churns.items():
            store = self.servers[name].store
            for kind in ("Node", "Pod", "ResourceSlice", "ResourceClaim"):
                store.seed(churn.items(kind))
        path = write_kubeconfig(tmp / "members.kubeconfig", self.servers)
        config = fleet_from_kubeconfigs([path])
        self.config: FleetConfig = replace(
            config, clusters=tuple(replace(s, timeout=5.0) for s in config.clusters)
        )
        settings = ClientSettings(request_timeout=5.0, connect_timeout=2.0, watch=FAST)
        self.clients: dict[str, KubeClient] = {
            s.name: open_client(s.kubeconfig, s.context, name=s.name, settings=settings)  # type: ignore[arg-type]
            for s in self.config.clusters
        }

    def apply(self, name: str, count: int) -> None:
        """``count`` random changes on member ``name``, through its store (as its kubelet,
        scheduler and users would make them)."""
        store = self.servers[name].store
        for kind, old, new in self.churns[name].changes(count):
            if new is None:
                assert old is not None
                meta = old["metadata"]
                store.delete(PLURALS[kind], meta["name"], meta.get("namespace"))
            else:
                body = {**new, "metadata": {**new["metadata"]}}
                body["metadata"].pop("resourceVersion", None)
                store.put(body)

    def gathered(self, name: str) -> Cluster:
        source = next(s for s in self.config.clusters if s.name == name)
        return gather_cluster(source, accelerators=default_accelerators())

    def close(self) -> None:
        for client in self.clients.values():
            client.close()
        for server in self.servers.values():
            server.stop()


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Members]:
    made = Members(tmp_path, (11, 12))
    yield made
    made.close()


@pytest.fixture
def capacity(members: Members) -> Iterator[MemberCapacity]:
    watched = MemberCapacity(members.config, default_accelerators(), watch=FAST, retry_interval=1.0)
    watched.start(members.clients)
    assert watched.wait_synced(10.0)
    yield watched
    watched.stop()
    watched.join(5.0)


def same(members: Members, capacity: MemberCapacity, name: str) -> bool:
    source = next(s for s in members.config.clusters if s.name == name)
    return capacity.cluster(source) == members.gathered(name)


def assert_node_by_node(members: Members, capacity: MemberCapacity, name: str) -> None:
    source = next(s for s in members.config.clusters if s.name == name)
    mine, fresh = capacity.cluster(source), members.gathered(name)
    assert mine.reachable and fresh.reachable
    assert [n.name for n in mine.nodes] == [n.name for n in fresh.nodes]
    for a, b in zip(mine.nodes, fresh.nodes, strict=True):
        assert a == b, a.name
    assert mine.pending == fresh.pending
    assert mine == fresh


def test_watched_capacity_equals_a_fresh_gather_after_random_churn(
    members: Members, capacity: MemberCapacity
) -> None:
    for name in members.churns:
        assert_node_by_node(members, capacity, name)
    for _ in range(4):
        for name in members.churns:
            members.apply(name, 80)
        for name in members.churns:
            wait_for(
                lambda n=name: same(members, capacity, n), timeout=10, what=f"{name} caught up"
            )  # type: ignore[misc]
            assert_node_by_node(members, capacity, name)


def test_gpus_bound_on_an_annotated_node_are_taken_off_its_gpu_devices_annotation(
    members: Members, capacity: MemberCapacity
) -> None:
    """``placer.dev/gpu-devices`` is the devices before the node's pods: whole-GPU pods bound
    later (the annotation unchanged) take whole devices, a fraction packs onto one, and the
    watch cache says so as a fresh gather does, node by node."""
    store = members.servers["m1"].store
    source = next(s for s in members.config.clusters if s.name == "m1")
    store.put(
        objects.node(
            "annotated", gpus=4, annotations={GPU_DEVICES_ANNOTATION: "1000,1000,1000,500"}
        )
    )

    def node() -> Node | None:
        return next((n for n in capacity.cluster(source).nodes if n.name == "annotated"), None)

    first = wait_for(node, timeout=10, what="the node watched")
    assert first.gpu_devices == (1000, 1000, 1000, 500) and first.free[GPU] == 3
    store.put(objects.pod("whole", node="annotated", namespace="team-0", gpus=2))
    store.put(
        objects.pod(
            "half", node="annotated", namespace="team-0", annotations={"gpu-fraction": "0.5"}
        )
    )
    wait_for(lambda: (node() or first).free[GPU] == 1, timeout=10, what="the pods counted")
    taken = node()
    assert taken is not None and taken.gpu_devices == (0, 0, 1000, 0)
    assert store.get("nodes", "annotated")["metadata"]["annotations"] == {
        GPU_DEVICES_ANNOTATION: "1000,1000,1000,500"
    }
    assert_node_by_node(members, capacity, "m1")
    # a finished pod gives its devices back
    done = store.get("pods", "whole", "team-0")
    store.put({**done, "status": {"phase": "Succeeded"}})
    wait_for(lambda: (node() or first).free[GPU] == 3, timeout=10, what="the pod finished")
    back = node()
    assert back is not None and back.gpu_devices == (1000, 1000, 1000, 0)
    assert_node_by_node(members, capacity, "m1")


def test_changes_missed_while_a_member_was_away_come_with_the_re_list_after_410(
    members: Members, capacity: MemberCapacity
) -> None:
    server = members.servers["m1"]
    before = int(server.store.resource_version)
    server.stop()
    members.apply("m1", 120)  # while the watches cannot see them
    server.store.compact()  # the watches' resourceVersion is too old now: 410 Expired
    server.clear_requests()
    server.start()
    wait_for(lambda: same(members, capacity, "m1"), timeout=15, what="m1 listed again")
    assert_node_by_node(members, capacity, "m1")
    # the watch from the old resourceVersion got 410 Expired (an ERROR event), then a re-list
    requests = [(r.verb, r.resource, r.query) for r in server.requests]
    old = next(
        i
        for i, (verb, resource, query) in enumerate(requests)
        if verb == "watch" and resource == "pods" and int(query["resourceVersion"]) <= before
    )
    assert ("list", "pods") in [(verb, resource) for verb, resource, _ in requests[old:]]


def test_a_member_that_goes_away_is_unavailable_with_the_gathers_reason_then_back(
    members: Members, capacity: MemberCapacity
) -> None:
    source = next(s for s in members.config.clusters if s.name == "m2")
    members.servers["m2"].stop()
    down = wait_for(
        lambda: unavailable(capacity, source),
        timeout=15,
        what="m2 unavailable",
    )
    gathered = members.gathered("m2")
    assert not gathered.reachable
    # the same reason, said of the watch that failed rather than of the list
    assert down.reason.split(": ", 1)[1] == gathered.reason.split(": ", 1)[1]
    assert capacity.cluster(next(s for s in members.config.clusters if s.name == "m1")).reachable
    members.servers["m2"].start()
    wait_for(lambda: capacity.cluster(source).reachable, timeout=20, what="m2 back")
    assert_node_by_node(members, capacity, "m2")


def test_a_member_refusing_its_watches_is_unavailable_with_what_to_do(
    members: Members, capacity: MemberCapacity
) -> None:
    source = next(s for s in members.config.clusters if s.name == "m1")
    members.servers["m1"].faults.fail(403, times=None, resource="pods")
    down = wait_for(
        lambda: unavailable(capacity, source),
        timeout=15,
        what="m1 unavailable",
    )
    gathered = members.gathered("m1")
    assert not gathered.reachable
    assert down.reason.replace("watch", "list") == gathered.reason
    assert "forbidden" in down.reason.lower() or "403" in down.reason


def test_no_list_reaches_the_members_once_the_watches_run(
    members: Members, capacity: MemberCapacity
) -> None:
    # every watch has listed (the fixture waits only for the capacity kinds; the ledger's
    # ConfigMaps may list a moment later)
    for informer in capacity.informers():
        assert informer.wait_synced(10.0), (informer.kind, informer.namespace)
    for server in members.servers.values():
        server.clear_requests()
    for _ in range(3):
        for name in members.churns:
            members.apply(name, 20)
        for name in members.churns:
            wait_for(lambda n=name: same_cached(members, capacity, n), timeout=10, what=name)
    for server in members.servers.values():
        lists = [r for r in server.requests if r.verb == "list"]
        assert lists == []


def unavailable(capacity: MemberCapacity, source: ClusterSource) -> Cluster | None:
    cluster = capacity.cluster(source)
    return None if cluster.reachable else cluster


def same_cached(members: Members, capacity: MemberCapacity, name: str) -> Any:
    """The cache caught up (compared with a gather made from the store, not over HTTP)."""
    from placer.fleet.capacity import PodTally, cluster_from_api, node_from_api
    from placer.fleet.devices import node_device_groups

    churn = members.churns[name]
    table = default_accelerators()
    tally = PodTally(table)
    tally.add_all(churn.items("Pod"))
    slices = churn.items("ResourceSlice")
    devices = node_device_groups(slices, churn.items("ResourceClaim"), table) if slices else {}
    source = next(s for s in members.config.clusters if s.name == name)
    expected = cluster_from_api(
        name,
        [node_from_api(n) for n in churn.items("Node")],
        tally,
        labels=source.labels,
        taints=source.taints,
        devices=devices,
    )
    return capacity.cluster(source) == expected


def member_lists(hubfleet: Any) -> dict[str, list[str]]:
    """The LIST requests each member received (``resource namespace?labelSelector``)."""
    return {
        name: [
            f"{r.resource} {r.namespace or ''}?{r.query.get('labelSelector', '')}"
            for r in server.requests
            if r.verb == "list"
        ]
        for name, server in hubfleet.members.items()
    }


def placed(hubfleet: Any, names: list[str]) -> dict[str, str] | None:
    where = {}
    for name in names:
        cluster = hubfleet.placed_cluster(hubfleet.hub.store.get("jobs", name, hubfleet.NAMESPACE))
        if not cluster:
            return None
        where[name] = cluster
    return where


def test_the_controllers_cycles_list_nothing_of_capacity_from_the_members(
    hubfleet: Any,
) -> None:
    controller = hubfleet.controller(capacity="watch").controller
    hubfleet.hub.store.create(hubfleet.job("first", gpus=2))
    hubfleet.wait_for(lambda: placed(hubfleet, ["first"]), what="placed")
    # resync gathers while nothing is pending (every 0.5 s here): no LIST at all
    for server in hubfleet.members.values():
        server.clear_requests()
    gathered = controller.cycle._last_gather
    hubfleet.wait_for(lambda: controller.cycle._last_gather > gathered + 1.0, what="2 gathers")
    assert member_lists(hubfleet) == {name: [] for name in hubfleet.members}
    # a placement cycle: the capacity step lists nothing; the dispatch lists, on each member,
    # the copies of the kind placed by others (two copies of one workload are never made)
    # and, on the member placed on, the ledger read back after reserving (the concurrent-
    # decision check must read the member itself)
    for server in hubfleet.members.values():
        server.clear_requests()
    hubfleet.hub.store.create(hubfleet.job("second", gpus=2))
    where = hubfleet.wait_for(lambda: placed(hubfleet, ["second"]), what="placed")
    lists = member_lists(hubfleet)
    for name, seen in lists.items():
        expected = {f"jobs {hubfleet.NAMESPACE}?placer.dev/hub!=hub"}
        if name == where["second"]:
            expected.add("configmaps placer-system?placer.dev/in-flight=true")
        assert set(seen) <= expected, (name, seen)


def fleet_free_gpus(fleet: Any) -> int:
    return sum(c.free().get("nvidia.com/gpu", 0) for c in fleet.clusters) if fleet else -1


def placed_with_entry(hubfleet: Any, controller: Any, name: str) -> tuple[str, InFlight]:
    """Job ``name`` (2 GPUs) created on the hub: where it was placed, and its in-flight entry."""
    hubfleet.hub.store.create(hubfleet.job(name, gpus=2))
    where: str = hubfleet.wait_for(lambda: placed(hubfleet, [name]), what="placed")[name]
    entry: InFlight = hubfleet.wait_for(
        lambda: next((e for e in controller.ledger.entries() if e.cluster == where), None),
        what="the in-flight entry",
    )
    return where, entry


def test_pods_seen_bound_retire_the_in_flight_entry_and_count_once(hubfleet: Any) -> None:
    controller = hubfleet.controller(capacity="watch").controller
    total = len(hubfleet.MEMBERS) * hubfleet.NODES * hubfleet.GPUS

    def free_gpus() -> int:
        return fleet_free_gpus(controller.cycle.fleet)

    where, entry = placed_with_entry(hubfleet, controller, "watched")
    assert entry.placement.pods
    hubfleet.wait_for(lambda: free_gpus() == total - 2, what="the entry charged")
    # the member's scheduler binds the copy's pod where the entry planned it
    member = hubfleet.members[where].store
    copy = member.get("jobs", "watched", hubfleet.NAMESPACE)
    member.put(
        bound_pod(hubfleet, "watched", entry.placement.pods[0].node, copy["metadata"]["uid"], 2)
    )
    hubfleet.wait_for(
        lambda: all(
            not e.placement.pods for e in controller.ledger.entries() if e.cluster == where
        ),
        what="the entry observed",
    )
    # counted once: by the pod now, no longer by the entry
    hubfleet.wait_for(lambda: free_gpus() == total - 2, what="counted once")
    time.sleep(1.2)  # a few more gathers
    assert free_gpus() == total - 2


def bound_pod(hubfleet: Any, name: str, node: str, owner_uid: str, gpus: int) -> dict[str, Any]:
    """A running pod of the Job copy ``name`` on ``node`` (as the member's scheduler binds it)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-0",
            "namespace": hubfleet.NAMESPACE,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name,
                    "uid": owner_uid,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi"},
                        "limits": {"nvidia.com/gpu": str(gpus)},
                    },
                }
            ],
        },
        "status": {"phase": "Running"},
    }


def test_a_pod_gone_between_the_ledger_sync_and_the_capacity_read_stays_counted(
    hubfleet: Any,
) -> None:
    """The race of a re-applied edit (its framework replaces the pods): the sync sees the pod
    bound and retires the entry; the pod goes before the capacity is read. Counted by neither,
    the node would look free while the new pod waits for it; the member's changes wait until
    the cycle has read both (the bench_churn census found nodes overcommitted that way)."""
    controller = hubfleet.controller(capacity="watch").controller
    cycle = controller.cycle
    total = len(hubfleet.MEMBERS) * hubfleet.NODES * hubfleet.GPUS
    free_gpus = fleet_free_gpus
    where, entry = placed_with_entry(hubfleet, controller, "rolled")
    member = hubfleet.members[where].store
    copy = member.get("jobs", "rolled", hubfleet.NAMESPACE)
    node = entry.placement.pods[0].node
    member.put(bound_pod(hubfleet, "rolled", node, copy["metadata"]["uid"], 2))
    hubfleet.wait_for(
        lambda: all(
            not e.placement.pods for e in controller.ledger.entries() if e.cluster == where
        ),
        what="the entry observed",
    )
    hubfleet.wait_for(lambda: free_gpus(cycle.fleet) == total - 2, what="the pod counted")

    # the next sync reads the pods; right after, the pod is deleted (the edit's roll) and its
    # deletion reaches the watch cache (at most 2 s) before the capacity is read
    assert cycle.capacity is not None
    live = cycle.capacity._member(where).live
    read_pods = live.pods_in
    fired = threading.Event()

    def pods_in(namespace: str) -> list[dict[str, Any]]:
        pods = read_pods(namespace)
        if namespace == hubfleet.NAMESPACE and not fired.is_set():
            fired.set()
            member.delete("pods", "rolled-0", hubfleet.NAMESPACE)
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and read_pods(namespace):
                time.sleep(0.02)
        return pods

    charged: list[Any] = []
    charge = cycle.ledger.charge

    def charge_and_keep(fleet: Any, **kwargs: Any) -> Any:
        result = charge(fleet, **kwargs)
        if fired.is_set() and not charged:
            charged.append(result)
        return result

    live.pods_in = pods_in
    cycle.ledger.charge = charge_and_keep
    try:
        cycle.gather_soon()
        hubfleet.wait_for(lambda: charged, what="a gather with the pod deleted meanwhile")
    finally:
        live.pods_in = read_pods
        cycle.ledger.charge = charge
    # that gather counted the pod (it read the pods before the deletion) ...
    assert free_gpus(charged[0]) == total - 2
    # ... and the next ones the entry again (its pod gone, the workload's new one not bound)
    cycle.gather_soon()
    time.sleep(1.2)
    assert free_gpus(cycle.fleet) == total - 2


def test_an_entry_just_written_counts_until_its_watch_shows_it_and_not_after_its_removal(
    members: Members, capacity: MemberCapacity
) -> None:
    client = members.clients["m1"]
    ref = WorkloadRef("batch/v1", "Job", "team-0", "fresh")
    node = members.churns["m1"].node_names()[0]
    placement = Placement(
        ref, "m1", (PodAssignment("main", "0", 0, node, {"cpu": 1000}),), {"cpu": 1000}
    )
    entry = InFlight.new(placement, "d-1")
    ledger = Ledger([entry])  # this process's book: dispatched, its write not seen yet

    def entries() -> list[InFlight]:
        reads = capacity.ledger_reads(
            "m1", client, ledger=ledger, workloads=lambda *_: None, now=time.time()
        )
        return [e for e in reads.entries() if e.workload == ref]

    assert [e.decision for e in entries()] == ["d-1"]  # kept as written
    stored = write_entry(client, entry)
    wait_for(lambda: any(e.store for e in entries()), what="the watch shows the entry")
    assert len(entries()) == 1
    remove_entries(client, stored.store, [ref])
    # the watch showed it and shows it no more: removed, not kept from the book
    wait_for(lambda: entries() == [], what="the removal seen")
    time.sleep(0.3)
    assert entries() == []


def test_the_stuck_check_reads_pending_pods_from_the_pod_watch(hubfleet: Any) -> None:
    """A placed workload's pod waits on its member (under its pendingTimeout): the stuck check
    looks at it every cycle from the member's pod watch, with no LIST."""
    from tests.controller.test_pending_timeout import MESSAGE, pending_pod

    controller = hubfleet.controller(capacity="watch").controller
    hubfleet.hub.store.create(hubfleet.job("waits", gpus=2, pods=2))
    where = hubfleet.wait_for(lambda: placed(hubfleet, ["waits"]), what="placed")["waits"]
    copy = hubfleet.copies("waits")[where]
    hubfleet.members[where].store.seed([pending_pod("waits-0", copy, 5)])
    seeded = controller.cycle._last_gather
    hubfleet.wait_for(lambda: controller.cycle._last_gather > seeded + 1.0, what="2 gathers")
    for server in hubfleet.members.values():
        server.clear_requests()
    gathered = controller.cycle._last_gather
    hubfleet.wait_for(lambda: controller.cycle._last_gather > gathered + 1.0, what="2 gathers")
    assert member_lists(hubfleet) == {name: [] for name in hubfleet.members}
    [cached] = controller.capacity.pending_pods(where)
    [condition] = cached["status"]["conditions"]
    assert (condition["reason"], condition["message"]) == ("Unschedulable", MESSAGE)
    assert hubfleet.placed_cluster(hubfleet.hub.store.get("jobs", "waits", "team-a")) == where


def ledger_cycle(capacity: MemberCapacity, client: KubeClient, ledger: Ledger) -> list[str]:
    """One cycle's ledger step on m1 as the controller's gather does it (``_from_caches``:
    sync from the caches under ``holding``, the book replaced by what the sync keeps); the
    decisions still charged."""
    now = time.time()
    with capacity.holding("m1"):
        reads = capacity.ledger_reads(
            "m1", client, ledger=ledger, workloads=lambda *_: None, now=now
        )
        ledger.replace_cluster("m1", sync_cluster(client, now=now, reads=reads))
    return [p.decision for p in ledger.entries(now=now) if p.placement.pods]


def ledger_watch(capacity: MemberCapacity) -> Any:
    """m1's ConfigMap watch (the ledger's), listed."""
    informer = next(i for i in capacity.informers() if i.cluster == "m1" and i.kind == "ConfigMap")
    assert informer.wait_synced(10.0)
    return informer


def frozen_ledger_watch(capacity: MemberCapacity, monkeypatch: pytest.MonkeyPatch) -> None:
    """m1's ConfigMap watch shows, from now on, what it shows now (a watch lagging behind)."""
    informer = ledger_watch(capacity)
    seen = informer.objects()
    monkeypatch.setattr(informer, "objects", lambda: list(seen))


def planned(name: str, decision: str, node: str, *, pods: int = 1) -> InFlight:
    ref = WorkloadRef("batch/v1", "Job", "team-0", name)
    assignments = tuple(PodAssignment("main", "0", i, node, {"cpu": 1000}) for i in range(pods))
    return InFlight.new(Placement(ref, "m1", assignments, {"cpu": 1000 * pods}), decision)


def test_an_entry_dispatched_counts_in_the_next_two_cycles_while_its_watch_lags(
    members: Members, capacity: MemberCapacity, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = members.clients["m1"]
    node = members.churns["m1"].node_names()[0]
    ledger = Ledger()
    frozen_ledger_watch(capacity, monkeypatch)
    entry = write_entry(client, planned("lagged", "d-1", node))  # cycle N dispatches
    ledger.add(entry)
    assert ledger_cycle(capacity, client, ledger) == ["d-1"]  # cycle N+1
    assert ledger_cycle(capacity, client, ledger) == ["d-1"]  # cycle N+2
    monkeypatch.undo()  # the watch catches up: still counted, once
    wait_for(lambda: ledger_cycle(capacity, client, ledger) == ["d-1"], what="shown")
    assert [e.decision for e in ledger.entries()] == ["d-1"]


def test_a_new_decision_counts_while_the_watch_still_shows_the_workloads_older_entry(
    members: Members, capacity: MemberCapacity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workload's entry of an earlier decision (fully observed: kept a while, charging
    nothing) is what the lagging watch shows; the new decision's entry, written over it, is in
    this process's book only — and must stay there, charged, until the watch shows it."""
    client = members.clients["m1"]
    node = members.churns["m1"].node_names()[0]
    ledger = Ledger()
    old = planned("moved", "d-1", node)
    observed = write_entry(client, replace(old, placement=replace(old.placement, pods=())))
    ledger.add(observed)
    watch = ledger_watch(capacity)
    wait_for(
        lambda: any("d-1" in str(c.get("data")) for c in watch.objects()),
        what="the old entry shown",
    )
    frozen_ledger_watch(capacity, monkeypatch)
    new = write_entry(client, planned("moved", "d-2", node, pods=2))  # cycle N dispatches
    ledger.add(new)
    assert ledger_cycle(capacity, client, ledger) == ["d-2"]  # cycle N+1
    assert ledger_cycle(capacity, client, ledger) == ["d-2"]  # cycle N+2
    monkeypatch.undo()
    wait_for(lambda: ledger_cycle(capacity, client, ledger) == ["d-2"], what="shown")
    assert [e.decision for e in ledger.entries()] == ["d-2"]


def test_an_entry_this_process_removed_stays_removed_while_its_watch_lags(
    members: Members, capacity: MemberCapacity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An eviction (or a deletion) takes a workload's entry out of the book and off the member;
    the ledger's watch, lagging, still shows it: the next cycles must not charge it again from
    the watch (the preemptor would find its victim's room taken, and the victim take it back),
    and once the watch shows its removal, nothing changes. An entry of a later decision for the
    same workload counts again."""
    client = members.clients["m1"]
    node = members.churns["m1"].node_names()[0]
    ledger = Ledger()
    stored = write_entry(client, planned("victim", "d-1", node))
    ledger.add(stored)
    watch = ledger_watch(capacity)
    wait_for(
        lambda: any("d-1" in str(c.get("data")) for c in watch.objects()),
        what="the entry shown",
    )
    assert ledger_cycle(capacity, client, ledger) == ["d-1"]
    frozen_ledger_watch(capacity, monkeypatch)
    ledger.discard("m1", stored.workload)  # evicted: out of the book, then off the member
    assert stored.store is not None
    remove_entries(client, stored.store, [stored.workload])
    assert ledger_cycle(capacity, client, ledger) == []  # cycle N+1, the watch still lags
    assert ledger_cycle(capacity, client, ledger) == []  # cycle N+2
    monkeypatch.undo()  # the watch catches up
    wait_for(
        lambda: not any("d-1" in str(c.get("data")) for c in watch.objects()),
        what="the removal shown",
    )
    assert ledger_cycle(capacity, client, ledger) == []
    time.sleep(0.01)  # (a later decision is created after the removal)
    again = write_entry(client, planned("victim", "d-2", node))  # placed there again
    ledger.add(again)
    assert ledger_cycle(capacity, client, ledger) == ["d-2"]
    wait_for(lambda: ledger_cycle(capacity, client, ledger) == ["d-2"], what="d-2 shown")
