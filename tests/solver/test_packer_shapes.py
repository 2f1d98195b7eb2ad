"""Gangs of several pod shapes: best fit one shape after the other strands the second
shape's room behind the first; the packer then places all runs at once
(:mod:`placer.solver.jointpack`)."""

from __future__ import annotations

import pytest

from placer.model import Fleet, Workload
from placer.quantity import CPU, MEMORY
from placer.solver import SOLVERS
from placer.solver import packer as packer_module
from placer.solver.packer import Packed, PackFailure, PodRun, pack
from placer.solver.state import ClusterState, PodShape, resource_names
from tests.builders.fleets import GIB, cluster, fleet, node, pod, workload
from tests.solver.conftest import Decide


def seed_two_fleet() -> Fleet:
    """Two empty 8-GPU nodes: n1 96 cores and 384 GiB, n2 128 cores and 256 GiB."""
    return fleet(
        cluster("c0", node("n1", 8, cpu=96, memory=384), node("n2", 8, cpu=128, memory=256))
    )


def seed_two_gang(a: int = 8, b: int = 8) -> Workload:
    """bench_fairshare seed 2's two pod shapes, one GPU each: ``a`` of 11.3 cores and 48 GiB,
    ``b`` of 16 cores and 32 GiB."""
    return workload(
        "gang",
        ("a", a, pod(gpus=1, extra={CPU: 11300, MEMORY: 48 * GIB})),
        ("b", b, pod(gpus=1, extra={CPU: 16000, MEMORY: 32 * GIB})),
    )


def runs_of(gang: Workload, state_fleet: Fleet) -> tuple[ClusterState, list[PodRun]]:
    names = resource_names([c.pod for c in gang.components])
    state = ClusterState(state_fleet.clusters[0], names)
    runs = [PodRun(0, c, PodShape.of(c.pod, names)) for c in gang.components]
    return state, runs


def test_best_fit_alone_misses_the_gang_on_an_empty_fleet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The case: the only packing is a on n1 (90.4 cores, 384 GiB) and b on n2 (128 cores,
    256 GiB); best fit takes b first (more cores) and puts six of them on n1 (least left),
    after which eight a find no room."""
    monkeypatch.setattr(packer_module, "joint_counts", lambda *args: None)
    state, runs = runs_of(seed_two_gang(), seed_two_fleet())
    result = pack(state, runs)
    assert isinstance(result, PackFailure)
    assert state.version == 0  # rolled back


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_gang_of_two_shapes_packs_where_only_a_joint_assignment_fits(
    decide: Decide, solver: str
) -> None:
    decision = decide([seed_two_gang()], seed_two_fleet(), solver=solver)
    (placement,) = decision.placements
    where = {(p.component, p.node) for p in placement.pods}
    assert where == {("a", "n1"), ("b", "n2")}
    assert len(placement.pods) == 16
    devices = {(p.node, d) for p in placement.pods for d in p.devices}
    assert len(devices) == 16  # every pod its own device


def test_the_joint_packing_is_deterministic_and_keeps_pod_order() -> None:
    state, runs = runs_of(seed_two_gang(), seed_two_fleet())
    first = pack(state, runs)
    assert isinstance(first, Packed)
    again_state, again_runs = runs_of(seed_two_gang(), seed_two_fleet())
    again = pack(again_state, again_runs)
    assert isinstance(again, Packed)
    assert [(r.component.name, i, n, d) for r, i, n, d in first.pods] == [
        (r.component.name, i, n, d) for r, i, n, d in again.pods
    ]
    for name in ("a", "b"):
        indices = [i for r, i, _, _ in first.pods if r.component.name == name]
        assert sorted(indices) == list(range(8))


def test_a_gang_that_fits_no_way_still_fails_and_leaves_the_state_as_it_was() -> None:
    """Nine a and seven b: n2 holds at most 256 GiB of them, so n1 must take 400 GiB of its
    384 — no packing exists; the joint model finds none either."""
    state, runs = runs_of(seed_two_gang(a=9, b=7), seed_two_fleet())
    fresh, _ = runs_of(seed_two_gang(a=9, b=7), seed_two_fleet())
    result = pack(state, runs)
    assert isinstance(result, PackFailure)
    assert state.version == 0
    assert (state.free == fresh.free).all()
    assert (state.dev == fresh.dev).all()
