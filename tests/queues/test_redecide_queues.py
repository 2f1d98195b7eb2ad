"""Re-decisions after a refusal respect the queues (placer.dispatch.redecide.queue_guard).

A unit whose cluster refuses it at apply time is decided again elsewhere; under queues, never
on a cluster where that would take its queue past its ``clusterLimits``. On the virtual demo
fleet (loopback API servers, real kubeconfig), west's admission refuses the JobSet.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from placer.definitions import Catalog, decompose
from placer.dispatch import Dispatcher, DispatchOptions, Manifest
from placer.dispatch.outcomes import DISPATCHED
from placer.dispatch.redecide import queue_guard
from placer.fleet import fleet_from_kubeconfigs, gather_fleet, open_clients
from placer.snapshot import load_snapshot
from placer.solver.fairshare import solve_fair
from placer.testing import AdmissionRequest, StatusError
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup
from tests.queues.conftest import queue_doc, queues

ROOT = Path(__file__).resolve().parents[2]
SEED = yaml.safe_load((ROOT / "examples" / "jobset-demo.yaml").read_text())
CATALOG = Catalog.builtin()


@pytest.fixture
def virtual(tmp_path: Path) -> Iterator[tuple[VirtualFleet, Path]]:
    snapshot = load_snapshot(ROOT / "clusters" / "demo.yaml")
    with VirtualFleet(snapshot, setup=realism_setup(CATALOG, pods=False)) as fleet:
        yield fleet, fleet.write_kubeconfig(tmp_path / "kc")


def jobset(name: str, queue: str) -> Manifest:
    body = copy.deepcopy(SEED)
    body["metadata"] = {"name": name, "namespace": "default", "labels": {"placer.dev/queue": queue}}
    for job in body["spec"]["replicatedJobs"]:
        containers = job["template"]["spec"]["template"]["spec"]["containers"]
        containers[0]["resources"]["limits"] = {"nvidia.com/gpu": 1}
    return Manifest(body, decompose(body, CATALOG), source="test")


def refuse_on_west(virtual: VirtualFleet) -> None:
    def deny(request: AdmissionRequest) -> None:
        if request.resource.kind == "JobSet":
            raise StatusError(403, 'admission webhook "quota.example.com" denied the request')

    virtual.server("west").store.add_admission(deny)


@pytest.mark.parametrize("guarded", [True, False])
def test_a_refused_unit_is_not_redecided_past_its_queues_cluster_limits(
    virtual: tuple[VirtualFleet, Path], guarded: bool
) -> None:
    fleet_servers, kubeconfig = virtual
    config = fleet_from_kubeconfigs([kubeconfig])
    clients = open_clients(config)
    try:
        team = queues(
            queue_doc(
                "team", nvidia_com__gpu={"quota": 64, "clusterLimits": {"east": 0, "central": 0}}
            )
        )
        manifests = [jobset("capped", "team")]
        fleet = gather_fleet(config)
        decision = solve_fair([m.workload for m in manifests], fleet, team).decision
        assert [p.cluster for p in decision.placements] == ["west"]
        refuse_on_west(fleet_servers)
        guard = queue_guard(team, [], decision, [m.workload for m in manifests])
        options = DispatchOptions(guard=guard if guarded else None)
        result = Dispatcher(clients, options).dispatch(manifests, decision, fleet)
        outcome = result.outcome(manifests[0].ref)
        if not guarded:  # what the re-decision did before it knew the queues
            assert outcome.state == DISPATCHED and outcome.cluster in ("east", "central")
            return
        assert not outcome.placed
        [attempt] = outcome.attempts
        assert attempt.cluster == "west"
        [unplaced] = result.decision.unplaced
        for cluster in ("east", "central"):
            assert "clusterLimits" in unplaced.reasons[cluster], unplaced.reasons
        for name in ("east", "central", "west"):
            assert fleet_servers.server(name).store.list("jobsets.jobset.x-k8s.io") == []
    finally:
        for client in clients.values():
            client.close()
