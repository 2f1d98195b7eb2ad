"""Hand-made fleets and workloads for solver tests (the builders of
:mod:`tests.builders.fleets`), and a checked ``decide`` helper.

Every decision made through ``decide`` is checked by the independent verifier, so each test
also asserts a zero realisation gap.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from placer.model import Decision, Fleet, Node, Workload
from placer.policy import PlacementPolicy
from placer.solver import solve, verify
from tests.builders.fleets import cluster, fleet, node, pod, workload


def random_jobs(
    rng: random.Random,
    count: int,
    *,
    replicas: Sequence[int],
    gpus: Sequence[int],
    cpu: tuple[int, int],
) -> list[Workload]:
    """``count`` one-component jobs ``j0``, ``j1``, …: replicas and GPUs per pod drawn from
    the choices given, cores uniformly from the ``cpu`` range."""
    return [
        workload(
            f"j{i}",
            ("w", rng.choice(replicas), pod(gpus=rng.choice(gpus), cpu=rng.randint(*cpu))),
        )
        for i in range(count)
    ]


def split_fleet(nodes: Sequence[Node], clusters: int) -> Fleet:
    """``nodes`` in ``clusters`` clusters ``c0``, ``c1``, … of equal size, in order."""
    size = len(nodes) // clusters
    return fleet(*(cluster(f"c{c}", *nodes[size * c : size * (c + 1)]) for c in range(clusters)))


def where(decision: Decision) -> dict[str, str]:
    """workload name -> cluster of the placed ones."""
    return {p.workload.name: p.cluster for p in decision.placements}


def reasons(decision: Decision, name: str) -> Mapping[str, str]:
    return next(u.reasons for u in decision.unplaced if u.workload.name == name)


Decide = Callable[..., Decision]


@pytest.fixture
def decide() -> Decide:
    """``solve`` + the verifier: fails the test on any verifier finding."""

    def run(
        workloads: Sequence[Workload],
        the_fleet: Fleet,
        *,
        policies: Sequence[PlacementPolicy] = (),
        **kwargs: Any,
    ) -> Decision:
        decision = solve(workloads, the_fleet, policies=policies, **kwargs)
        assert verify(decision, workloads, the_fleet, policies=policies) == []
        return decision

    return run


@pytest.fixture
def kit() -> Any:
    """The builders of this module, for tests (``kit.node(...)``, ``kit.workload(...)``)."""
    import types

    return types.SimpleNamespace(
        node=node,
        cluster=cluster,
        fleet=fleet,
        pod=pod,
        workload=workload,
        random_jobs=random_jobs,
        split_fleet=split_fleet,
        where=where,
        reasons=reasons,
    )
