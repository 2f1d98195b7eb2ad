"""The Dispatcher on three loopback member clusters (the demo fleet, served virtually).

What the submit acceptance tests do not cover: co-grouped workloads rolled back together,
dry runs that change nothing, namespaces placer may not create, resuming suspended objects,
answers lost mid-apply (never run twice), a member refusing the ledger entry, two deciders
dispatching the same workloads at once, and in-flight entries of deleted workloads and of
processes killed before their apply.
"""

from __future__ import annotations

import copy
import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.definitions import Catalog, decompose
from placer.dispatch import Dispatcher, DispatchOptions, Ledger, Manifest
from placer.dispatch.claims import CLAIM_TTL
from placer.dispatch.ledger import LABEL_IN_FLIGHT, LEDGER_NAMESPACE, read_entries, sync_cluster
from placer.dispatch.outcomes import DISPATCHED, DRY_RUN, FAILED
from placer.fleet import fleet_from_kubeconfigs, gather_fleet, open_clients
from placer.kube import KubeClient
from placer.model import Fleet
from placer.snapshot import load_snapshot
from placer.solver import solve
from placer.testing import AdmissionRequest, Gate, StatusError
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup

ROOT = Path(__file__).resolve().parents[2]
SEED_FILE = ROOT / "examples" / "jobset-demo.yaml"
SEED = yaml.safe_load(SEED_FILE.read_text())
CATALOG = Catalog.builtin()
JOBSETS = "jobsets.jobset.x-k8s.io"
IN_FLIGHT = f"{LABEL_IN_FLIGHT}=true"
CLAIMS = "placer.dev/claims=true"


class Members:
    def __init__(
        self,
        virtual: VirtualFleet,
        clients: dict[str, KubeClient],
        config: Any,
        kubeconfig: Path,
    ):
        self.virtual = virtual
        self.clients = clients
        self.config = config
        self.kubeconfig = kubeconfig

    def fleet(self) -> Fleet:
        return gather_fleet(self.config)

    def jobsets(self, cluster: str) -> list[str]:
        store = self.virtual.server(cluster).store
        return [o["metadata"]["name"] for o in store.list(JOBSETS)]

    def versions(self) -> dict[str, str]:
        return {n: s.store.resource_version for n, s in self.virtual.servers.items()}


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Members]:
    snapshot = load_snapshot(ROOT / "clusters" / "demo.yaml")
    with VirtualFleet(snapshot, setup=realism_setup(CATALOG, pods=False)) as virtual:
        kubeconfig = virtual.write_kubeconfig(tmp_path / "kc")
        config = fleet_from_kubeconfigs([kubeconfig])
        clients = open_clients(config)
        yield Members(virtual, clients, config, kubeconfig)
        for client in clients.values():
            client.close()


def jobset(name: str, *, gpus: int = 1, namespace: str = "default", **labels: str) -> Manifest:
    body = copy.deepcopy(SEED)
    body["metadata"] = {"name": name, "namespace": namespace, "labels": dict(labels)}
    for job in body["spec"]["replicatedJobs"]:
        job["template"]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {
            "nvidia.com/gpu": gpus
        }
    return Manifest(body, decompose(body, CATALOG), source="test")


def decide(members: Members, manifests: list[Manifest]) -> tuple[Any, Fleet]:
    fleet = members.fleet()
    return solve([m.workload for m in manifests], fleet), fleet


def test_a_group_is_rolled_back_together_and_placed_together_elsewhere(
    members: Members,
) -> None:
    group = [jobset("g-a", **{"placer.dev/group": "g"}), jobset("g-b", **{"placer.dev/group": "g"})]
    decision, fleet = decide(members, group)
    first = {p.cluster for p in decision.placements}
    assert len(first) == 1
    [chosen] = first

    def deny_second(request: AdmissionRequest) -> None:
        if request.resource.kind == "JobSet" and request.name == "g-b":
            raise StatusError(
                403, 'admission webhook "quota.example.com" denied the request: over quota'
            )

    members.virtual.server(chosen).store.add_admission(deny_second)
    result = Dispatcher(members.clients).dispatch(group, decision, fleet)
    outcomes = [result.outcome(m.ref) for m in group]
    assert [o.state for o in outcomes] == [DISPATCHED, DISPATCHED]
    [again] = {o.cluster for o in outcomes}
    assert again != chosen
    for outcome in outcomes:
        [attempt] = outcome.attempts
        assert (attempt.cluster, attempt.code, attempt.reason) == (chosen, 403, "Forbidden")
        assert "quota.example.com" in attempt.error and "over quota" in attempt.error
    # g-a had been applied on the refusing cluster: it was removed with its ledger entry
    assert members.jobsets(chosen) == []
    assert (
        members.virtual.server(chosen).store.list(
            "configmaps", LEDGER_NAMESPACE, label_selector=IN_FLIGHT
        )
        == []
    )
    assert sorted(members.jobsets(again)) == ["g-a", "g-b"]


def test_dry_run_changes_nothing_and_says_what_would_be_created(members: Members) -> None:
    manifests = [jobset("dry", namespace="team-b"), jobset("dry2")]
    decision, fleet = decide(members, manifests)
    before = members.versions()
    dispatcher = Dispatcher(members.clients, DispatchOptions(dry_run=True))
    result = dispatcher.dispatch(manifests, decision, fleet)
    assert members.versions() == before
    first, second = (result.outcome(m.ref) for m in manifests)
    assert first.state == DRY_RUN and first.namespace_created
    assert any("namespace team-b would be created" in n for n in first.notes)
    assert second.state == DRY_RUN and not second.dispatched and second.uid == ""


def test_a_missing_namespace_fails_everywhere_when_creation_is_off(members: Members) -> None:
    manifests = [jobset("nons", namespace="team-c")]
    decision, fleet = decide(members, manifests)
    result = Dispatcher(members.clients, DispatchOptions(create_namespaces=False)).dispatch(
        manifests, decision, fleet
    )
    outcome = result.outcome(manifests[0].ref)
    assert outcome.state == FAILED and not result.ok
    assert {a.cluster for a in outcome.attempts} == {"east", "west", "central"}
    assert all("namespace team-c does not exist" in a.error for a in outcome.attempts)
    assert all(
        "team-c" not in {n["metadata"]["name"] for n in s.store.list("namespaces")}
        for s in members.virtual.servers.values()
    )


def test_resume_on_dispatch_and_the_in_process_ledger(members: Members) -> None:
    manifest = jobset("held")
    manifest.body["spec"]["suspend"] = True
    manifest = Manifest(manifest.body, decompose(manifest.body, CATALOG))
    decision, fleet = decide(members, [manifest])
    ledger = Ledger()
    result = Dispatcher(members.clients, DispatchOptions(resume=True), ledger=ledger).dispatch(
        [manifest], decision, fleet, decision_id="d-held"
    )
    outcome = result.outcome(manifest.ref)
    assert outcome.dispatched and result.decision_id == "d-held"
    store = members.virtual.server(str(outcome.cluster)).store
    applied = store.get(JOBSETS, "held", "default")
    assert applied["spec"]["suspend"] is False
    assert applied["metadata"]["uid"] == outcome.uid
    [entry] = ledger.entries()
    assert entry.cluster == outcome.cluster and entry.decision == "d-held"
    assert manifest.body["spec"]["suspend"] is True  # the hub's object is not changed


def test_a_lost_answer_is_cleaned_up_before_moving_on(members: Members) -> None:
    manifests = [jobset("lost")]
    decision, fleet = decide(members, manifests)
    [chosen] = {p.cluster for p in decision.placements}
    server = members.virtual.server(chosen)
    server.faults.drop(verb="patch", resource=JOBSETS, times=None)
    result = Dispatcher(members.clients).dispatch(manifests, decision, fleet)
    outcome = result.outcome(manifests[0].ref)
    assert outcome.dispatched and outcome.cluster != chosen
    assert outcome.attempts[0].cluster == chosen
    assert members.jobsets(chosen) == []


def test_never_twice_when_the_clean_up_cannot_finish(members: Members) -> None:
    manifests = [jobset("stuck")]
    decision, fleet = decide(members, manifests)
    [chosen] = {p.cluster for p in decision.placements}
    server = members.virtual.server(chosen)
    server.faults.drop(verb="patch", resource=JOBSETS, times=None)
    server.faults.drop(verb="delete", resource=JOBSETS, times=None)
    result = Dispatcher(members.clients).dispatch(manifests, decision, fleet)
    outcome = result.outcome(manifests[0].ref)
    assert outcome.state == FAILED and outcome.cluster == chosen
    assert "not placed elsewhere, so that it cannot run twice" in outcome.error
    assert "JobSet/default/stuck may be left on cluster" in outcome.error
    others = [c for c in ("east", "west", "central") if c != chosen]
    assert all(members.jobsets(c) == [] for c in others)


def test_a_member_refusing_the_ledger_entry_still_gets_the_workload(members: Members) -> None:
    manifests = [jobset("noledger")]
    decision, fleet = decide(members, manifests)
    [chosen] = {p.cluster for p in decision.placements}

    def deny(request: AdmissionRequest) -> None:
        if request.resource.kind == "ConfigMap" and request.namespace == LEDGER_NAMESPACE:
            raise StatusError(403, "configmaps is forbidden: User cannot create configmaps")

    members.virtual.server(chosen).store.add_admission(deny)
    result = Dispatcher(members.clients).dispatch(manifests, decision, fleet)
    outcome = result.outcome(manifests[0].ref)
    assert outcome.dispatched and outcome.cluster == chosen
    assert "in-flight ledger not written on this cluster" in outcome.notes
    # the same denial refuses the workload claims there (they live beside the ledger)
    ledger, claims = sorted(result.warnings)
    assert ledger.startswith(f"cluster {chosen}: in-flight ledger not written")
    assert claims.startswith(f"cluster {chosen}: workload claims not taken")


def test_check_existing_keeps_placed_workloads_and_refuses_foreign_copies(
    members: Members,
) -> None:
    placed, foreign = jobset("placed"), jobset("foreign")
    decision, fleet = decide(members, [placed])
    assert Dispatcher(members.clients).dispatch([placed], decision, fleet).ok
    [home] = [c for c in ("east", "west", "central") if members.jobsets(c) == ["placed"]]
    elsewhere = next(c for c in ("east", "west", "central") if c != home)
    members.virtual.server(elsewhere).store.create(dict(foreign.body))  # a user's own copy
    # a decision that would put both somewhere else entirely
    decision, fleet = decide(members, [placed, foreign])
    result = Dispatcher(members.clients, DispatchOptions(check_existing=True)).dispatch(
        [placed, foreign], decision, fleet
    )
    kept, refused = result.outcome(placed.ref), result.outcome(foreign.ref)
    assert kept.state == "unchanged" and kept.cluster == home and not kept.dispatched
    assert refused.state == FAILED and "without placer's placement record" in refused.error
    assert sorted(n for c in ("east", "west", "central") for n in members.jobsets(c)) == [
        "foreign",
        "placed",
    ]


def test_two_processes_deciding_at_once_do_not_both_take_the_same_room(
    members: Members,
) -> None:
    """Two submitters gather in the same instant: neither sees the other's ledger entry when
    deciding, both choose the only cluster with three 4-GPU blocks. The one that dispatches
    second reads the ledger back, finds the room taken, and does not overcommit."""
    first, second = [jobset("race-a", gpus=4)], [jobset("race-b", gpus=4)]
    fleet = members.fleet()  # one gather, seen by both
    decision_a = solve([m.workload for m in first], fleet)
    decision_b = solve([m.workload for m in second], fleet)
    assert {p.cluster for p in (*decision_a.placements, *decision_b.placements)} == {"central"}
    # each process knew the ledger as it was when it gathered: empty
    won = Dispatcher(members.clients, ledger=Ledger()).dispatch(second, decision_b, fleet)
    assert won.outcome(second[0].ref).state == DISPATCHED
    lost = Dispatcher(members.clients, ledger=Ledger()).dispatch(first, decision_a, fleet)
    outcome = lost.outcome(first[0].ref)
    assert outcome.state == FAILED and not outcome.placed
    [attempt] = outcome.attempts
    assert (attempt.cluster, attempt.code, attempt.reason) == ("central", 409, "Conflict")
    assert "taken by a concurrent placement" in attempt.error
    assert members.jobsets("central") == ["race-b"]
    # its entry was released: only the winner's placement is in flight on central
    entries = read_entries(members.clients["central"])
    assert [e.workload.name for e in entries] == ["race-b"]


def test_a_concurrent_placement_on_the_planned_nodes_means_other_nodes_of_the_cluster(
    members: Members,
) -> None:
    """Both decisions plan the same west nodes (1 GPU per pod, west has 2 free GPUs on each
    of 8 nodes): the second re-plans on nodes the first left, and stays on west."""
    small_a, small_b = [jobset("small-a")], [jobset("small-b")]
    fleet = members.fleet()
    decision_a = solve([m.workload for m in small_a], fleet)
    decision_b = solve([m.workload for m in small_b], fleet)
    nodes_b = {pod.node for pod in decision_b.placements[0].pods}
    assert {pod.node for pod in decision_a.placements[0].pods} == nodes_b
    Dispatcher(members.clients, ledger=Ledger()).dispatch(small_b, decision_b, fleet)
    result = Dispatcher(members.clients, ledger=Ledger()).dispatch(small_a, decision_a, fleet)
    outcome = result.outcome(small_a[0].ref)
    assert outcome.state == DISPATCHED and outcome.attempts == ()
    assert outcome.cluster == "west" and outcome.placement is not None
    per_node = Counter(pod.node for pod in decision_b.placements[0].pods)
    per_node.update(pod.node for pod in outcome.placement.pods)
    assert max(per_node.values()) <= 2  # never more than the 2 free GPUs of a node
    # the ledger holds both, the second with its new plan
    entries = {e.workload.name: e for e in read_entries(members.clients["west"])}
    assert set(entries) == {"small-a", "small-b"}
    assert entries["small-a"].placement.pods == outcome.placement.pods


# --------------------------------------------------------------------------------------------
# two deciders dispatching the same workloads at once (issue 12, item 1)


def race(
    members: Members,
    first: tuple[Dispatcher, Any, Fleet],
    second: tuple[Dispatcher, Any, Fleet],
    manifests: list[Manifest],
    stagger: float,
) -> list[Any]:
    """Dispatch two decisions of the same workloads from two threads, the second ``stagger``
    seconds after the first; the results in that order."""
    results: list[Any] = [None, None]

    def run(index: int, job: tuple[Dispatcher, Any, Fleet]) -> None:
        if index:
            time.sleep(stagger)
        dispatcher, decision, fleet = job
        results[index] = dispatcher.dispatch(manifests, decision, fleet)

    threads = [threading.Thread(target=run, args=(i, job)) for i, job in enumerate((first, second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def copies(members: Members) -> dict[str, list[str]]:
    where: dict[str, list[str]] = {}
    for cluster in ("east", "west", "central"):
        for name in members.jobsets(cluster):
            where.setdefault(name, []).append(cluster)
    return where


@pytest.mark.parametrize("stagger", [0.0, 0.05, 0.15])
def test_two_deciders_choosing_different_clusters_dispatch_each_workload_once(
    members: Members, stagger: float
) -> None:
    """The second decision was made without the first's placements (it gathered before them)
    and sends every workload elsewhere; applies take 100 ms. Each workload ends on exactly
    one cluster, and the decider that did not dispatch it says unchanged or in-flight."""
    manifests = [jobset(f"dup-{i}") for i in range(4)]
    fleet = members.fleet()
    decision_a = solve([m.workload for m in manifests], fleet)
    used = {p.cluster for p in decision_a.placements}
    elsewhere = replace(
        fleet,
        clusters=tuple(replace(c, reachable=c.name not in used) for c in fleet.clusters),
    )
    decision_b = solve([m.workload for m in manifests], elsewhere)
    assert len(decision_b.placements) == 4
    assert not used & {p.cluster for p in decision_b.placements}
    for server in members.virtual.servers.values():
        server.faults.delay(0.1, verb="patch", resource=JOBSETS)
    results = race(
        members,
        (Dispatcher(members.clients, ledger=Ledger()), decision_a, fleet),
        (Dispatcher(members.clients, ledger=Ledger()), decision_b, elsewhere),
        manifests,
        stagger,
    )
    assert {name: len(where) for name, where in copies(members).items()} == {
        m.ref.name: 1 for m in manifests
    }
    for manifest in manifests:
        states = sorted(r.outcome(manifest.ref).state for r in results)
        assert states in (["dispatched", "unchanged"], ["dispatched", "in-flight"]), states
        [winner] = [r.outcome(manifest.ref) for r in results if r.outcome(manifest.ref).dispatched]
        assert copies(members)[manifest.ref.name] == [winner.cluster]
    for result in results:
        assert all(o.state != FAILED for o in result.outcomes)
    # every claim was released: nothing holds these workloads any more
    for server in members.virtual.servers.values():
        shards = server.store.list("configmaps", LEDGER_NAMESPACE, label_selector=CLAIMS)
        assert shards and all(not shard.get("data") for shard in shards)


def test_a_decider_that_finds_the_workload_claimed_waits_and_reports_where_it_went(
    members: Members,
) -> None:
    """With ``claim_wait`` (what ``placer submit`` uses) the later decider waits for the
    earlier one to finish and reports the workload unchanged on its cluster."""
    manifests = [jobset("waited")]
    fleet = members.fleet()
    decision_a = solve([m.workload for m in manifests], fleet)
    [used] = {p.cluster for p in decision_a.placements}
    elsewhere = replace(
        fleet, clusters=tuple(replace(c, reachable=c.name != used) for c in fleet.clusters)
    )
    decision_b = solve([m.workload for m in manifests], elsewhere)
    for server in members.virtual.servers.values():
        server.faults.delay(0.3, verb="patch", resource=JOBSETS)
    first, second = race(
        members,
        (Dispatcher(members.clients), decision_a, fleet),
        (Dispatcher(members.clients, DispatchOptions(claim_wait=10.0)), decision_b, elsewhere),
        manifests,
        0.1,
    )
    assert first.outcome(manifests[0].ref).state == DISPATCHED
    late = second.outcome(manifests[0].ref)
    assert late.state == "unchanged" and late.cluster == used
    assert copies(members) == {"waited": [used]}


# --------------------------------------------------------------------------------------------
# in-flight entries that no longer stand for a placement (issue 12, item 6)


def test_an_entry_whose_workload_was_deleted_is_retired_at_the_next_look(
    members: Members,
) -> None:
    manifests = [jobset("gone", gpus=4)]  # 12 GPUs: only central has them
    decision, fleet = decide(members, manifests)
    result = Dispatcher(members.clients).dispatch(manifests, decision, fleet)
    assert result.outcome(manifests[0].ref).cluster == "central"
    central = members.clients["central"]
    [entry] = sync_cluster(central)  # applied, pods not visible yet: it counts
    assert entry.placement.pods
    members.virtual.server("central").store.delete(JOBSETS, "gone", "default")
    assert sync_cluster(central) == []  # deleted: free again now, not in two minutes
    assert read_entries(central) == []


def submit_seed(members: Members) -> tuple[subprocess.Popen[str], Gate, Any]:
    """A ``placer submit`` process of the seed JobSet whose apply is held on ``central`` (the
    gate), and the in-flight entry it wrote before."""
    gate = members.virtual.server("central").faults.hold(verb="patch", resource=JOBSETS)
    command = ["submit", "-f", str(SEED_FILE), "--kubeconfig", str(members.kubeconfig)]
    process = subprocess.Popen(
        [sys.executable, "-m", "placer", *command, "-o", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert gate.arrived.wait(timeout=60), "the apply never arrived"
    [entry] = read_entries(members.clients["central"])
    assert entry.workload.name == "demo"
    return process, gate, entry


@pytest.mark.slow
def test_an_entry_of_a_process_still_applying_is_kept_by_every_reader(members: Members) -> None:
    process, gate, entry = submit_seed(members)
    try:
        assert entry.claimed  # written while its process held the workload's claim
        # another submit reading the ledger meanwhile: the room stays charged, the entry stays
        [kept] = sync_cluster(members.clients["central"])
        assert kept.decision == entry.decision and kept.placement.pods
        assert len(read_entries(members.clients["central"])) == 1
        gate.release()
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    [placement] = json.loads(out)["placements"]
    assert placement["state"] == "dispatched" and placement["cluster"] == "central"
    assert members.jobsets("central") == ["demo"]


@pytest.mark.slow
def test_an_entry_of_a_process_killed_before_its_apply_is_retired_once_its_claim_is_gone(
    members: Members,
) -> None:
    process, gate, entry = submit_seed(members)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=10)
    gate.release(deny=403, message="the client is gone")  # its apply never lands
    central = members.clients["central"]
    # nobody can tell yet that it died rather than being slow: its claim still lives
    assert [e.decision for e in sync_cluster(central)] == [entry.decision]
    # once its claim expires (a dead process no longer renews it), the entry goes: about half
    # a minute, not the two minutes an entry written without a claim is given
    later = time.time() + CLAIM_TTL + 1
    assert later - entry.created < 60
    assert sync_cluster(central, now=later) == []
    assert read_entries(central) == []
    assert members.jobsets("central") == []
