"""Workload claims on three loopback members: the protocol of :mod:`placer.dispatch.claims`."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from placer.dispatch.claims import (
    Claim,
    Claims,
    Succession,
    claim_key,
    identity,
    read_claims,
    shard_name,
    shard_of,
)
from placer.dispatch.storage import NAMESPACE
from placer.kube import KubeClient, load_kubeconfigs, open_client
from placer.model import WorkloadRef
from placer.testing import ApiServer

MEMBERS = ("m1", "m2", "m3")


def ref(name: str, version: str = "v1alpha2") -> WorkloadRef:
    return WorkloadRef(f"jobset.x-k8s.io/{version}", "JobSet", "team-a", name)


class Fleet:
    def __init__(self, servers: dict[str, ApiServer], clients: dict[str, KubeClient]) -> None:
        self.servers = servers
        self.clients = clients

    def claims(self, **options: object) -> Claims:
        return Claims(self.clients, **options)  # type: ignore[arg-type]

    def holders(self, workload: WorkloadRef) -> dict[str, str]:
        """Member -> decision holding ``workload`` there."""
        found = {}
        for name, client in self.clients.items():
            claim = read_claims(client).get(claim_key(workload))
            if claim is not None:
                found[name] = claim.decision
        return found


@pytest.fixture
def fleet(
    start_apiserver: Callable[..., ApiServer], kubeconfig_for: Callable[..., Path]
) -> Iterator[Fleet]:
    servers = {name: start_apiserver(name) for name in MEMBERS}
    kubeconfigs = load_kubeconfigs([kubeconfig_for(servers)])
    clients = {name: open_client(kubeconfigs, name) for name in MEMBERS}
    yield Fleet(servers, clients)
    for client in clients.values():
        client.close()


def test_a_claim_is_on_the_identity_whatever_the_version() -> None:
    assert identity(ref("a")) == "jobset.x-k8s.io/JobSet/team-a/a"
    assert claim_key(ref("a")) == claim_key(ref("a", "v1"))
    assert claim_key(ref("a")) != claim_key(ref("b"))
    assert identity(WorkloadRef("v1", "Pod", "ns", "p")) == "/Pod/ns/p"
    claim = Claim("x", "d", "h", "t", 1.0, 2.0, 30.0, "lease")
    assert Claim.decode(claim.encode()) == claim
    assert Claim.decode("not json") is None and Claim.decode('{"workload": 1}') is None


def test_concurrent_deciders_each_workload_won_by_exactly_one_never_split(fleet: Fleet) -> None:
    """Eight deciders race for overlapping sets of 30 workloads (the same members, the same
    order): each workload is won by exactly one, and held on every member by it alone."""
    workloads = [ref(f"w{i}") for i in range(30)]
    rng = random.Random(7)
    sets = [rng.sample(workloads, 20) for _ in range(8)]
    deciders = [fleet.claims(decision=f"d{i}") for i in range(8)]
    won: list[tuple[WorkloadRef, ...]] = [()] * 8
    start = threading.Barrier(8)

    def run(i: int) -> None:
        start.wait()
        won[i] = deciders[i].acquire(sets[i]).won

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for workload in set().union(*map(set, sets)):
        winners = [i for i in range(8) if workload in won[i]]
        wanted = [i for i in range(8) if workload in sets[i]]
        assert len(winners) == 1, (workload, winners)  # one, never none of those who wanted it
        assert winners[0] in wanted
        assert fleet.holders(workload) == {m: f"d{winners[0]}" for m in MEMBERS}
    for decider in deciders:
        decider.release()
    assert all(not fleet.holders(w) for w in workloads)


def test_a_lost_workload_is_released_where_it_was_claimed(fleet: Fleet) -> None:
    """B cannot reach m1, so it claims on m2 and m3 first; A then takes m1 (its first member)
    and loses on m2: A's claim on m1 goes, B's stay."""
    w = ref("contested")
    b = Claims({n: fleet.clients[n] for n in ("m2", "m3")}, decision="dB")
    assert b.acquire([w]).won == (w,)
    a = fleet.claims(decision="dA")
    got = a.acquire([w])
    assert got.won == () and got.lost[w].decision == "dB"
    assert "dB" in got.lost[w].describe()
    assert fleet.holders(w) == {"m2": "dB", "m3": "dB"}
    assert a.held() == []


def test_a_member_that_does_not_answer_is_skipped(fleet: Fleet) -> None:
    fleet.servers["m2"].stop()
    claims = fleet.claims(decision="d")
    got = claims.acquire([ref("x")])
    assert got.won == (ref("x"),)
    assert list(got.skipped) == ["m2"] and "unreachable" in got.skipped["m2"]
    assert claims.members_of(ref("x")) == {"m1", "m3"}
    claims.release()


def test_an_expired_claim_is_taken_over_and_its_holder_steps_back(fleet: Fleet) -> None:
    w = ref("slow")
    now = [1000.0]
    stalled = fleet.claims(decision="d-old", ttl=30.0, clock=lambda: now[0])
    assert stalled.acquire([w]).won == (w,)
    assert stalled.holds(w)
    other = fleet.claims(decision="d-new", clock=lambda: now[0] + 10)
    assert other.acquire([w]).lost[w].decision == "d-old"  # live: not taken
    taker = fleet.claims(decision="d-new", clock=lambda: now[0] + 31)
    assert taker.acquire([w]).won == (w,)  # expired: taken over
    now[0] += 20  # the stalled holder wakes up with less than half its claim left
    assert not stalled.holds(w)  # the fence renews, finds it taken over, and steps back
    taken = stalled.taken(w)
    assert taken is not None and taken.decision == "d-new"
    stalled.release()  # never removes the taker's claim
    assert fleet.holders(w) == {m: "d-new" for m in MEMBERS}


def test_renewing_keeps_a_claim_alive_and_release_frees_it(fleet: Fleet) -> None:
    w = ref("long")
    claims = fleet.claims(decision="d", ttl=0.6)
    with claims.renewing(interval=0.1):
        assert claims.acquire([w]).won == (w,)
        threading.Event().wait(1.0)  # longer than the claim lives without renewal
        assert fleet.claims(decision="other").acquire([w]).won == ()
        assert claims.holds(w)
    assert fleet.holders(w) == {}


def test_a_successor_takes_its_predecessors_claims_over_at_once(fleet: Fleet) -> None:
    w = ref("ctl")
    lease = "hub/placer-system/placer-controller"
    old = fleet.claims(decision="d1", succession=Succession(lease, "controller (a)"))
    assert old.acquire([w]).won == (w,)
    # a submit (no lease) and a controller of another hub wait for it
    assert fleet.claims(decision="s").acquire([w]).won == ()
    elsewhere = Succession("other-hub/placer-system/placer-controller", "controller (c)")
    assert fleet.claims(decision="x", succession=elsewhere).acquire([w]).won == ()
    new = fleet.claims(decision="d2", succession=Succession(lease, "controller (b)"))
    assert new.acquire([w]).won == (w,)
    assert fleet.holders(w) == {m: "d2" for m in MEMBERS}


def test_claims_are_spread_over_a_few_shards(fleet: Fleet) -> None:
    workloads = [ref(f"s{i}") for i in range(40)]
    claims = fleet.claims(decision="d")
    assert len(claims.acquire(workloads).won) == 40
    store = fleet.servers["m1"].store
    shards = store.list("configmaps", NAMESPACE, label_selector="placer.dev/claims=true")
    assert sorted(s["metadata"]["name"] for s in shards) == [shard_name(i) for i in range(4)]
    for shard in shards:
        index = int(shard["metadata"]["name"].rsplit("-", 1)[1])
        assert all(shard_of(key) == index for key in shard["data"])
    claims.release()
    assert all(not s.get("data") for s in store.list("configmaps", NAMESPACE))
