"""The batch search: never worse than a baseline, and the repair move that brings big gangs in.

Every decision made through ``decide`` is checked by the independent verifier.
"""

from __future__ import annotations

import random
from typing import Any

from placer.model import Decision, Workload
from placer.solver import SOLVERS
from placer.solver.clock import Clock
from placer.solver.packer import Packed, pack
from placer.solver.problem import build_problem
from placer.solver.repair import swap_in


def _value(decision: Decision, workloads: list[Workload], the_fleet: Any) -> int:
    """The placed value as the solver counts it (GPU-weighted, per unit)."""
    units = build_problem(workloads, the_fleet, ()).units
    placed = {p.workload for p in decision.placements}
    return sum(u.value for u in units if workloads[u.members[0]].ref in placed)


def test_cpsat_places_at_least_as_much_as_every_baseline(kit: Any, decide: Any) -> None:
    # overloaded fleets of mixed node types; one priority level: the CP-SAT solver's hint
    # portfolio runs every baseline on the same capacity, so it cannot end below any of them
    rng = random.Random(3)
    for trial in range(3):
        nodes = [
            kit.node(
                f"n{i}",
                gpus=rng.choice([2, 4, 8]),
                used=rng.choice([0, 0, 1, 2]),
                cpu=rng.choice([16, 48, 96]),
                memory=rng.choice([128, 384]),
            )
            for i in range(12)
        ]
        the_fleet = kit.fleet(*(kit.cluster(f"c{c}", *nodes[4 * c : 4 * c + 4]) for c in range(3)))
        jobs = [
            kit.workload(
                f"j{i}",
                (
                    "w",
                    rng.choice([1, 1, 1, 2, 3, 6]),
                    kit.pod(gpus=rng.choice([1, 1, 2, 4]), cpu=rng.randint(2, 24)),
                ),
            )
            for i in range(30)
        ]
        values = {
            solver: _value(
                decide(jobs, the_fleet, solver=solver, seed=trial, time_limit=1), jobs, the_fleet
            )
            for solver in SOLVERS
        }
        assert values["cpsat"] >= max(values.values()), values


def test_swap_in_moves_small_units_out_of_the_way_of_a_big_gang(kit: Any) -> None:
    # "big" has one free 8-GPU node; a 2-GPU job sits on it, so the 8-GPU gang does not fit.
    # "small" has room for the 2-GPU job: swap-in evicts it, packs the gang, re-places it.
    the_fleet = kit.fleet(
        kit.cluster("big", kit.node("b0", gpus=8)),
        kit.cluster("small", kit.node("s0", gpus=4)),
    )
    jobs = [
        kit.workload("little", ("w", 1, kit.pod(gpus=2))),
        kit.workload("gang", ("w", 2, kit.pod(gpus=4))),
    ]
    problem = build_problem(jobs, the_fleet, ())
    little, _ = problem.units
    mark = problem.states["big"].mark()
    packed = pack(problem.states["big"], little.runs)
    assert isinstance(packed, Packed)
    problem.states["big"].undo(mark)
    placed, moves = swap_in(
        [(little, "big", packed)],
        problem.units,
        problem.states,
        mix=None,
        clock=Clock(),
        deadline=10.0,
    )
    assert moves == 1
    assert {(u.label.split("/")[-1], c) for u, c, _ in placed} == {
        ("gang", "big"),
        ("little", "small"),
    }
    # the states are left as they were
    assert [int(problem.states[c].full.sum()) for c in ("big", "small")] == [8, 4]
