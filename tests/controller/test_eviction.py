"""Issue 14 in the controller: how an eviction is carried out, and what follows it.

* The victim's copy is suspended on its member (parked, ``placer.dev/preempted-by``), its pods
  go, and its hub object goes back to pending; placed again elsewhere, the parked copy is
  deleted first; placed again there, it is resumed in place (``test_queues.py``).
* The preemptor is placed as soon as its victims' pods are gone (the member's pod watch), not
  at the next resync or backoff; never onto room still held by a terminating pod.
* A gang is evicted whole; work of a higher priority preempts within its queue, never the
  other way; invalid Queues on the hub are reported naming the queue and the field.

Every test runs the controller against loopback API servers over HTTPS (real kubeconfigs).
Members with pods run :class:`placer.virtual.realism.Realism` (it plays the Job controller,
kube-scheduler and kubelet: a suspended Job's pods are deleted), and a write hook on every
member (:class:`Invariants`) checks after every write that no member holds more GPUs than its
nodes (running Jobs' pods plus pods still terminating) and that no workload has a copy on two
members at once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from placer.definitions import Catalog
from placer.fleet import fleet_from_kubeconfigs
from placer.testing import ApiServer
from placer.testing._store import WriteEvent
from placer.virtual.realism import Realism
from tests.controller.conftest import HubFleet, Running
from tests.controller.test_queues import GPU, hub_job, queue, serve_queues, team_job

#: a finalizer a test puts on a member's pods: deleted, a pod stays terminating (holding its
#: node's room, as kubelet's graceful termination does) until the test lets it go.
HOLD = "test.placer.dev/hold"


class Invariants:
    """A write hook on every member: after each write of a Job or Pod, no member holds more
    GPUs than its nodes have — GPUs of every Job not suspended plus those of pods still
    terminating — no node has more GPUs bound than it has, and no Job has copies on two
    members."""

    def __init__(self, hubfleet: HubFleet, members: tuple[str, ...]) -> None:
        self.hubfleet = hubfleet
        self.members = {name: hubfleet.members[name] for name in members}
        self.violations: list[str] = []
        self.checks = 0
        self._lock = threading.Lock()
        for server in self.members.values():
            server.store.add_reactor(self)

    def __call__(self, event: WriteEvent) -> None:
        if event.resource.kind not in ("Job", "Pod"):
            return
        with self._lock:
            self.checks += 1
            self._check()

    def _check(self) -> None:
        namespace = self.hubfleet.NAMESPACE
        seen: dict[str, str] = {}
        for name, server in self.members.items():
            jobs = server.store.list("jobs", namespace)
            pods = server.store.list("pods", namespace)
            capacity = self.hubfleet.NODES * self.hubfleet.GPUS
            running = sum(_job_gpus(j) for j in jobs if not j["spec"].get("suspend"))
            terminating = sum(_pod_gpus(p) for p in pods if p["metadata"].get("deletionTimestamp"))
            if running + terminating > capacity:
                self.violations.append(
                    f"{name}: {running} GPUs of running Jobs + {terminating} of terminating "
                    f"pods > {capacity}"
                )
            bound: dict[str, int] = {}
            for pod in pods:
                node = pod["spec"].get("nodeName")
                if node and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                    bound[node] = bound.get(node, 0) + _pod_gpus(pod)
            for node, gpus in bound.items():
                if gpus > self.hubfleet.GPUS:
                    self.violations.append(f"{name}: node {node} has {gpus} GPUs bound")
            for job in jobs:
                job_name = job["metadata"]["name"]
                if job_name in seen:
                    self.violations.append(f"Job {job_name} on {seen[job_name]} and {name}")
                seen[job_name] = name


def _job_gpus(job: dict[str, Any]) -> int:
    container = job["spec"]["template"]["spec"]["containers"][0]
    return int(container["resources"]["limits"][GPU]) * int(job["spec"].get("parallelism", 1))


def _pod_gpus(pod: dict[str, Any]) -> int:
    return sum(
        int((c.get("resources", {}).get("limits") or {}).get(GPU, 0))
        for c in pod["spec"].get("containers", ())
    )


def with_pods(server: ApiServer) -> None:
    """The member plays the Job controller, scheduler and kubelet."""
    server.store.add_reactor(Realism(Catalog.builtin(), name=server.name))


def hold(server: ApiServer, namespace: str) -> None:
    """Every pod of ``namespace`` gets :data:`HOLD`: deleted, it stays terminating until
    :func:`let_go`."""
    for pod in server.store.list("pods", namespace):
        server.store.patch(
            "pods",
            pod["metadata"]["name"],
            {"metadata": {"finalizers": [HOLD]}},
            namespace=namespace,
        )


def pods_of(server: ApiServer, job: dict[str, Any]) -> list[dict[str, Any]]:
    uid = job["metadata"]["uid"]
    return [
        p
        for p in server.store.list("pods", job["metadata"]["namespace"])
        if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences", ()))
    ]


def let_go(server: ApiServer, pods: list[dict[str, Any]]) -> None:
    """The terminating ``pods`` finish terminating (their finalizer removed: they are gone)."""
    for pod in pods:
        server.store.patch(
            "pods",
            pod["metadata"]["name"],
            {"metadata": {"finalizers": None}},
            namespace=pod["metadata"]["namespace"],
        )


def controller(hubfleet: HubFleet, members: tuple[str, ...], **overrides: Any) -> Running:
    fleet = fleet_from_kubeconfigs([hubfleet.members_kubeconfig], list(members), timeout=5.0)
    return hubfleet.controller(fleet, **overrides)


def wait_bound(hubfleet: HubFleet, member: ApiServer, count: int, what: str) -> None:
    """Wait until ``count`` pods of the test namespace are bound on ``member``."""
    hubfleet.wait_for(
        lambda: (
            sum(
                1
                for p in member.store.list("pods", hubfleet.NAMESPACE)
                if p["spec"].get("nodeName")
            )
            == count
        ),
        what=what,
    )


def flood(hubfleet: HubFleet, team: str, count: int, **job: Any) -> list[str]:
    names = [f"{team}-{i}" for i in range(count)]
    for name in names:
        hubfleet.hub.store.create(
            hubfleet.job(name, labels={"placer.dev/queue": team}, **{"gpus": 8, **job})
        )
    hubfleet.wait_for(
        lambda: all(hubfleet.placed_cluster(hub_job(hubfleet, n)) == "m1" for n in names),
        timeout=60,
        what=f"{team}'s Jobs placed",
    )
    return names


def placed_on(hubfleet: HubFleet, name: str, cluster: str, what: str) -> None:
    hubfleet.wait_for(
        lambda: hubfleet.placed_cluster(hub_job(hubfleet, name)) == cluster, timeout=30, what=what
    )


def preempted(hubfleet: HubFleet, names: list[str]) -> list[str]:
    return [
        n
        for n in names
        if (hubfleet.condition(hub_job(hubfleet, n), "Preempted") or {}).get("status") == "True"
    ]


@pytest.mark.parametrize("capacity", ["watch", "list"])
def test_the_preemptor_is_placed_as_soon_as_its_victims_pods_are_gone(
    hubfleet: HubFleet, capacity: str
) -> None:
    """team-b fills m1 (12 pods of 8 GPUs, running); team-a's in-quota Job evicts one of them:
    its copy is suspended, its pod terminates slowly. While the pod terminates, team-a's Job is
    not placed (its room is not free: ``Preempting``); once the pod is gone it is placed by
    the pod watch's event — the resync (60 s) and the backoff (30 s) are far off — and its pod
    runs. No member ever holds more GPUs than its nodes, no Job is on two members. With
    ``--capacity list`` (no pod watch) the pods are looked at every second while awaited."""
    m1 = hubfleet.members["m1"]
    with_pods(m1)
    invariants = Invariants(hubfleet, ("m1",))
    serve_queues(hubfleet, queue("team-a", 32), queue("team-b", 32))
    controller(hubfleet, ("m1",), resync_interval=60.0, backoff=_slow_backoff(), capacity=capacity)
    names = flood(hubfleet, "team-b", 12)
    wait_bound(hubfleet, m1, 12, "team-b's 12 pods bound")
    hold(m1, hubfleet.NAMESPACE)
    hubfleet.hub.store.create(team_job(hubfleet, "a-0", "team-a"))
    [victim] = hubfleet.wait_for(lambda: preempted(hubfleet, names), timeout=30, what="a victim")
    [parked] = hubfleet.copies(victim).values()
    assert parked["spec"]["suspend"] is True
    terminating = hubfleet.wait_for(
        lambda: [p for p in pods_of(m1, parked) if p["metadata"].get("deletionTimestamp")],
        what="the victim's pod terminating",
    )
    assert len(terminating) == 1
    time.sleep(1.5)  # several batch windows: the room is still held, nothing is placed on it
    assert hubfleet.copies("a-0") == {}
    condition = hubfleet.condition(hub_job(hubfleet, "a-0")) or {}
    assert (condition.get("status"), condition.get("reason")) == ("False", "Preempting")
    let_go(m1, terminating)
    gone = time.monotonic()
    hubfleet.wait_for(lambda: hubfleet.copies("a-0"), timeout=20, what="team-a's Job on m1")
    waited = time.monotonic() - gone
    print(f"team-a's Job on m1 {waited:.2f} s after its victim's pod was gone")
    assert waited < 20  # (the resync is 60 s, the backoff 30 s: the pod's event placed it)
    hubfleet.wait_for(
        lambda: hubfleet.placed_cluster(hub_job(hubfleet, "a-0")) == "m1",
        what="team-a's Job recorded",
    )
    [copy] = hubfleet.copies("a-0").values()
    [pod] = hubfleet.wait_for(lambda: pods_of(m1, copy), what="team-a's pod")
    assert pod["spec"].get("nodeName") and pod["status"]["phase"] == "Running"
    # the victim waits (m1 is full), parked; it never got its room back before team-a's Job
    assert hubfleet.placed_cluster(hub_job(hubfleet, victim)) is None
    assert invariants.checks > 0 and invariants.violations == []


def test_the_preemptor_takes_its_victims_room_while_the_ledger_watch_lags(
    hubfleet: HubFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The member's in-flight ledger watch lags (it shows, from before team-a's Job, every one
    of team-b's entries): the victim's entry the eviction removed must not be charged again
    from it — the preemptor would find no room, and the victim take its room back, while the
    preemptor got no new victims for two minutes (seen under load as a 60 s timeout of
    ``test_queues.py``'s reclaim test)."""
    serve_queues(hubfleet, queue("team-a", 32), queue("team-b", 32))
    running = controller(hubfleet, ("m1",))
    names = flood(hubfleet, "team-b", 12)
    capacity = running.controller.capacity
    assert capacity is not None
    [watch] = [i for i in capacity.informers() if i.cluster == "m1" and i.kind == "ConfigMap"]
    hubfleet.wait_for(
        lambda: sum(str(c.get("data")).count("team-b-") for c in watch.objects()) >= 12,
        what="team-b's entries shown",
    )
    seen = watch.objects()
    monkeypatch.setattr(watch, "objects", lambda: list(seen))  # from now on it lags
    hubfleet.hub.store.create(team_job(hubfleet, "a-0", "team-a"))
    placed_on(hubfleet, "a-0", "m1", "team-a's Job placed by reclaim")
    [victim] = preempted(hubfleet, names)
    time.sleep(1.0)  # several cycles: the victim does not take its room back
    assert hubfleet.placed_cluster(hub_job(hubfleet, victim)) is None
    running_copies = [
        c
        for c in hubfleet.members["m1"].store.list("jobs", hubfleet.NAMESPACE)
        if not c["spec"].get("suspend")
    ]
    assert len(running_copies) == 12


def test_a_gang_is_evicted_whole(hubfleet: HubFleet) -> None:
    """team-b's Jobs are gangs of 2 pods of 8 GPUs (6 fill m1): team-a's Job of 8 GPUs evicts
    one whole gang — both its pods go, every other gang keeps both of its own."""
    m1 = hubfleet.members["m1"]
    with_pods(m1)
    invariants = Invariants(hubfleet, ("m1",))
    serve_queues(hubfleet, queue("team-a", 32), queue("team-b", 32))
    controller(hubfleet, ("m1",))
    names = flood(hubfleet, "team-b", 6, pods=2)
    hubfleet.hub.store.create(team_job(hubfleet, "a-0", "team-a"))
    placed_on(hubfleet, "a-0", "m1", "team-a's Job placed")
    [victim] = preempted(hubfleet, names)
    for name in names:
        [copy] = hubfleet.copies(name).values()
        pods = pods_of(m1, copy)
        if name == victim:
            assert copy["spec"]["suspend"] is True and pods == []
        else:
            assert len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods)
    assert invariants.violations == []


def cordon(server: ApiServer, unschedulable: bool) -> None:
    for node in server.store.list("nodes"):
        server.store.patch(
            "nodes", node["metadata"]["name"], {"spec": {"unschedulable": unschedulable}}
        )


def parked_on_m1(hubfleet: HubFleet) -> str:
    """m2 cordoned, team-b fills m1 and team-a's Job evicts one of team-b's there (reclaim):
    the victim, its copy parked on m1."""
    cordon(hubfleet.members["m2"], True)
    serve_queues(hubfleet, queue("team-a", 32), queue("team-b", 32))
    controller(hubfleet, ("m1", "m2"))
    names = flood(hubfleet, "team-b", 12)
    hubfleet.hub.store.create(team_job(hubfleet, "a-0", "team-a"))
    placed_on(hubfleet, "a-0", "m1", "team-a's Job placed by reclaim")
    [victim] = preempted(hubfleet, names)
    return victim


def test_a_victim_placed_on_another_member_has_its_parked_copy_deleted_first(
    hubfleet: HubFleet,
) -> None:
    """m2 is cordoned while team-b fills m1 and team-a's Job evicts one of team-b's; when m2
    is uncordoned the victim is placed there, its parked copy on m1 deleted before (a write
    hook on both members checks that no Job is ever on both)."""
    invariants = Invariants(hubfleet, ("m1", "m2"))
    victim = parked_on_m1(hubfleet)
    assert list(hubfleet.copies(victim)) == ["m1"]  # parked there
    cordon(hubfleet.members["m2"], False)
    placed_on(hubfleet, victim, "m2", "the victim placed on m2")
    [(member, copy)] = hubfleet.copies(victim).items()
    assert member == "m2" and copy["spec"]["suspend"] is False
    assert "placer.dev/preempted-by" not in hubfleet.annotations(copy)
    # the record (metadata) is written before the status (its own subresource, the next
    # write): wait for the conditions rather than read them at the record's first sight
    again = hubfleet.wait_for(
        lambda: _preempted_cleared(hubfleet, victim), what="the victim's Preempted condition"
    )
    assert (again.get("status"), again.get("reason")) == ("False", "Placed")
    assert "m2" in again.get("message", "")
    assert invariants.violations == []


def _preempted_cleared(hubfleet: HubFleet, name: str) -> dict[str, Any] | None:
    condition = hubfleet.condition(hub_job(hubfleet, name), "Preempted") or {}
    return condition if condition.get("status") == "False" else None


def test_higher_priority_preempts_in_its_queue_and_never_the_reverse(hubfleet: HubFleet) -> None:
    """One queue within its quota fills m1 with priority-0 Jobs: a Job of priority 0 more waits
    (no eviction among equals), one of priority 100 evicts exactly one of them (rule
    ``preempt``) and is placed; the victim does not take its room back."""
    serve_queues(hubfleet, queue("team-a", 200))
    running = controller(hubfleet, ("m1",))
    names = flood(hubfleet, "team-a", 12)
    hubfleet.hub.store.create(team_job(hubfleet, "equal", "team-a"))
    hubfleet.wait_for(
        lambda: (
            (hubfleet.condition(hub_job(hubfleet, "equal")) or {}).get("reason") == "Unschedulable"
        ),
        timeout=30,
        what="the equal-priority Job waiting",
    )
    assert preempted(hubfleet, names) == []
    urgent = team_job(hubfleet, "urgent", "team-a", **{"placer.dev/priority": "100"})
    hubfleet.hub.store.create(urgent)
    placed_on(hubfleet, "urgent", "m1", "the urgent Job placed")
    [victim] = preempted(hubfleet, names)
    condition = hubfleet.condition(hub_job(hubfleet, victim), "Preempted") or {}
    assert condition["reason"] == "Preempt" and "urgent" in condition["message"]
    time.sleep(1.0)
    assert hubfleet.placed_cluster(hub_job(hubfleet, victim)) is None
    assert hubfleet.placed_cluster(hub_job(hubfleet, "equal")) is None
    assert preempted(hubfleet, [*names, "equal"]) == [victim]
    metrics = running.controller.metrics.exposition().decode()
    assert 'placer_preemptions_total{reason="preempt"} 1.0' in metrics


def test_invalid_queues_on_the_hub_name_the_queue_and_field(hubfleet: HubFleet) -> None:
    """A cycle, an unknown parent, children's quotas above the parent's and a negative number,
    each on the hub: ``Valid=False`` reason ``InvalidQueue`` naming the field; the valid queue
    applies (its Job is placed)."""
    loop_a = {**queue("loop-a", 1), "spec": {"parent": "loop-b", "resources": {}}}
    loop_b = {**queue("loop-b", 1), "spec": {"parent": "loop-a", "resources": {}}}
    orphan = {**queue("orphan", 1), "spec": {"parent": "missing", "resources": {}}}
    dept = queue("dept", 4)
    team = {**queue("team", 8), "spec": {"parent": "dept", "resources": {GPU: {"quota": 8}}}}
    serve_queues(
        hubfleet, queue("good", 8), queue("negative", -1), loop_a, loop_b, orphan, dept, team
    )
    controller(hubfleet, ("m1",))
    expected = {
        "negative": "spec.resources.nvidia.com/gpu.quota",
        "loop-a": "spec.parent",
        "loop-b": "spec.parent",
        "orphan": "spec.parent",
        "dept": "quota",
        "team": "team",
    }

    def valid(name: str) -> dict[str, Any]:
        obj = hubfleet.hub.store.get("queues.placer.dev", name)
        return hubfleet.condition(obj, "Valid") or {}

    hubfleet.wait_for(
        lambda: all(valid(n).get("reason") == "InvalidQueue" for n in expected),
        timeout=30,
        what="every invalid Queue reported",
    )
    for name, field in expected.items():
        message = valid(name)["message"]
        assert valid(name)["status"] == "False" and field in message, (name, message)
    hubfleet.hub.store.create(team_job(hubfleet, "ok", "good"))
    placed_on(hubfleet, "ok", "m1", "the valid queue's Job placed")


def _slow_backoff() -> Any:
    from placer.controller.settings import BackoffSettings

    return BackoffSettings(initial=30.0, maximum=60.0)


def test_the_preemptor_is_placed_when_its_victims_pods_went_during_the_eviction(
    hubfleet: HubFleet,
) -> None:
    """As above, but the victim's pod goes at once (the member deletes it while the copy is
    being suspended, before the controller has recorded whose room it awaits: its watch event
    comes too early to release anyone). team-a's Job is still placed within seconds, not at
    the resync (60 s) or after its backoff (30 s)."""
    m1 = hubfleet.members["m1"]
    with_pods(m1)
    invariants = Invariants(hubfleet, ("m1",))
    serve_queues(hubfleet, queue("team-a", 32), queue("team-b", 32))
    controller(hubfleet, ("m1",), resync_interval=60.0, backoff=_slow_backoff())
    names = flood(hubfleet, "team-b", 12)
    wait_bound(hubfleet, m1, 12, "team-b's 12 pods bound")
    hubfleet.hub.store.create(team_job(hubfleet, "a-0", "team-a"))
    [victim] = hubfleet.wait_for(lambda: preempted(hubfleet, names), timeout=30, what="a victim")
    evicted = time.monotonic()
    hubfleet.wait_for(lambda: hubfleet.copies("a-0"), timeout=20, what="team-a's Job on m1")
    print(f"team-a's Job on m1 {time.monotonic() - evicted:.2f} s after its victim's eviction")
    assert hubfleet.placed_cluster(hub_job(hubfleet, victim)) is None
    assert invariants.violations == []


def test_a_victim_parked_on_an_unreachable_member_is_placed_elsewhere_at_once(
    hubfleet: HubFleet,
) -> None:
    """The victim's copy is parked (suspended: no pods) on m1, and m1 stops answering: the
    victim is placed on m2 without waiting for m1 (its parked copy cannot run), and once m1
    answers again the parked copy there is deleted as stale — never two copies running."""
    m1, m2 = hubfleet.members["m1"], hubfleet.members["m2"]
    victim = parked_on_m1(hubfleet)
    [parked] = hubfleet.copies(victim).values()
    assert parked["spec"]["suspend"] is True
    m1.stop()
    cordon(m2, False)
    placed_on(hubfleet, victim, "m2", "the victim placed on m2 while m1 is away")
    [copy] = m2.store.list("jobs", hubfleet.NAMESPACE)
    assert copy["metadata"]["name"] == victim and not copy["spec"].get("suspend")
    stale = m1.store.get("jobs", victim, hubfleet.NAMESPACE)
    assert stale["spec"]["suspend"] is True  # still parked there, holding nothing
    m1.start()
    hubfleet.wait_for(
        lambda: (
            victim not in {j["metadata"]["name"] for j in m1.store.list("jobs", hubfleet.NAMESPACE)}
        ),
        timeout=30,
        what="the parked copy on m1 deleted once m1 is back",
    )
    assert hubfleet.placed_cluster(hub_job(hubfleet, victim)) == "m2"
