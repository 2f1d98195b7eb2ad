"""The batch search: never worse than a baseline; ruin and recreate brings big gangs in and
fills GPUs that cpu-heavy pods strand.

Every decision made through ``decide`` is checked by the independent verifier.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from placer.model import Decision, Workload
from placer.simulate import Settings, simulate, summarize
from placer.solver import SOLVERS, portfolio, recreate
from placer.solver.clock import Clock
from placer.solver.heuristics import Placed, run_rule
from placer.solver.packer import Packed, pack
from placer.solver.portfolio import (
    cluster_density_keys,
    density_key,
    hint_order,
    roomiest,
    value_of,
)
from placer.solver.problem import build_problem
from placer.solver.recreate import ruin_and_recreate
from placer.traces.openb import read_openb_nodes
from placer.traces.specs import resolve_workloads
from simulations.fleets import make_fleet, split_nodes


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
        the_fleet = kit.split_fleet(nodes, 3)
        jobs = kit.random_jobs(rng, 30, replicas=[1, 1, 1, 2, 3, 6], gpus=[1, 1, 2, 4], cpu=(2, 24))
        values = {
            solver: _value(
                decide(jobs, the_fleet, solver=solver, seed=trial, time_limit=1), jobs, the_fleet
            )
            for solver in SOLVERS
        }
        assert values["cpsat"] >= max(values.values()), values


def _search(problem: Any, start: Placed, *, seed: int, **options: Any) -> tuple[Placed, int]:
    """Ruin and recreate from ``start`` on the problem's units and states, no pod mix, a
    deadline far enough that the search ends by its own counts (or the GPU bound)."""
    return ruin_and_recreate(
        start,
        problem.units,
        problem.states,
        mix=None,
        clock=Clock(),
        deadline=60.0,
        seed=seed,
        **options,
    )


def test_ruin_and_recreate_moves_small_units_out_of_the_way_of_a_big_gang(kit: Any) -> None:
    # "big" has one free 8-GPU node; a 2-GPU job sits on it, so the 8-GPU gang does not fit.
    # "small" has room for the 2-GPU job: a ruin takes it off, the gang packs, it moves over
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
    placed, gains = _search(problem, [(little, "big", packed)], seed=0)
    assert gains == 1
    assert {(u.label.split("/")[-1], c) for u, c, _ in placed} == {
        ("gang", "big"),
        ("little", "small"),
    }
    # the states are left as they were
    assert [int(problem.states[c].full.sum()) for c in ("big", "small")] == [8, 4]


def _stranded(kit: Any) -> tuple[Any, list[Any]]:
    """One 4-GPU node with 8 cores; ``heavy`` (1 GPU, 7 cores) is placed and strands the other
    three GPUs; three ``light`` jobs (1 GPU, 2 cores each) are worth a little less each than
    ``heavy``, so no one-for-one exchange gains: only re-choosing the node's pods does."""
    the_fleet = kit.fleet(kit.cluster("c", kit.node("n0", gpus=4, cpu=8)))
    jobs = [kit.workload("heavy", ("w", 1, kit.pod(gpus=1, cpu=7)))] + [
        kit.workload(f"light{i}", ("w", 1, kit.pod(gpus=1, cpu=2))) for i in range(3)
    ]
    problem = build_problem(jobs, the_fleet, ())
    heavy = problem.units[0]
    mark = problem.states["c"].mark()
    packed = pack(problem.states["c"], heavy.runs)
    assert isinstance(packed, Packed)
    problem.states["c"].undo(mark)
    return problem, [(heavy, "c", packed)]


def test_ruin_and_recreate_frees_gpus_that_a_cpu_heavy_pod_strands(kit: Any) -> None:
    problem, start = _stranded(kit)
    heavy, lights = problem.units[0], problem.units[1:]
    assert all(u.value < heavy.value for u in lights)

    placed, gains = _search(problem, start, seed=1)
    assert gains >= 1
    assert sorted(u.label.split("/")[-1] for u, _, _ in placed) == ["light0", "light1", "light2"]
    # the states are left as they were
    assert int(problem.states["c"].free[0, 0]) == 8000
    assert int(problem.states["c"].full.sum()) == 4


def test_ruin_and_recreate_stops_at_the_gpu_bound(kit: Any) -> None:
    # a placement that already places the bound's GPU thousandths is not searched further;
    # with the true bound (three light jobs, 3,000) it searches until it gets there
    for bound, most_gains, placed_milli in ((1000.0, 0, 1000), (3000.0, None, 3000)):
        problem, start = _stranded(kit)
        placed, gains = _search(problem, start, seed=1, gpu_bound=bound)
        assert sum(u.milli for u, _, _ in placed) == placed_milli
        assert gains == most_gains if most_gains is not None else gains >= 1


def test_ruin_and_recreate_is_reproducible_for_a_seed(kit: Any) -> None:
    # a bigger overloaded fleet; the search ends by its stall count long before the deadline
    rng = random.Random(5)
    nodes = [
        kit.node(f"n{i}", gpus=8, cpu=rng.choice([24, 48, 96]), used=rng.choice([0, 2]))
        for i in range(9)
    ]
    the_fleet = kit.split_fleet(nodes, 3)
    jobs = kit.random_jobs(rng, 40, replicas=[1, 1, 2, 3], gpus=[1, 2, 4], cpu=(2, 30))
    answers = []
    for _ in range(2):
        problem = build_problem(jobs, the_fleet, ())
        start = run_rule("greedy", problem.units, problem.states, mix=None)
        for state in problem.states.values():
            state.undo(0)
        placed, _ = _search(problem, start, seed=7)
        answers.append(sorted((u.index, c, p.replay.nodes.tolist()) for u, c, p in placed))
        assert value_of(placed) >= value_of(start)
    assert answers[0] == answers[1]


def test_cpsat_fills_what_the_descent_leaves_stranded_on_an_openb_split() -> None:
    # 143 synthetic gangs at 120 % of a 4-cluster split of every 6th openb GPU node: the
    # swap-in/ejection descent that came before ruin and recreate ended at 96.3 % of the
    # bound in 2 s here; ruin and recreate reaches 99.8 % (99.1 % in 0.5 s: the CPU clock
    # keeps a busy machine from changing how far it gets, and a slower one has room)
    fleet = make_fleet(split_nodes(read_openb_nodes("gpu")[::6], 4))
    items = resolve_workloads("synthetic:gangs?seed=2&load=1.2", fleet=fleet)
    run = simulate(items, fleet, Settings(solver="cpsat", mode="batch", time_limit=2.0, seed=2))
    summary = summarize(run, items)
    assert not summary.problems
    assert summary.placed_of_bound_pct is not None and summary.placed_of_bound_pct >= 98.5


def _lean_and_rich(kit: Any, *, lean_cores: int, rich_cores: int) -> Any:
    """Two clusters of one 8-GPU node each, "lean" and "rich" in cores."""
    return kit.fleet(
        kit.cluster("lean", kit.node("l0", gpus=8, cpu=lean_cores)),
        kit.cluster("rich", kit.node("r0", gpus=8, cpu=rich_cores)),
    )


def test_the_swap_ruin_moves_a_cpu_heavy_unit_to_the_cluster_with_cores_to_spare(
    kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "lean" has 6 cores per GPU, "rich" 12. The heavy unit (4 GPUs, 44 cores) sits in lean
    # and leaves it 4 GPUs with 4 cores; rich is full of light units (4 GPUs, 2 cores each).
    # The waiting unit (4 GPUs, 40 cores) fits nowhere. Only moving heavy to rich and a
    # light unit to lean makes room for it: every unit placed.
    the_fleet = _lean_and_rich(kit, lean_cores=48, rich_cores=96)
    jobs = [
        kit.workload("heavy", ("w", 1, kit.pod(gpus=4, cpu=44))),
        kit.workload("light0", ("w", 1, kit.pod(gpus=4, cpu=2))),
        kit.workload("light1", ("w", 1, kit.pod(gpus=4, cpu=2))),
        kit.workload("waiting", ("w", 1, kit.pod(gpus=4, cpu=40))),
    ]
    problem = build_problem(jobs, the_fleet, ())
    heavy, light0, light1, _ = problem.units
    start: Placed = []
    for unit, cluster in ((heavy, "lean"), (light0, "rich"), (light1, "rich")):
        packed = pack(problem.states[cluster], unit.runs)
        assert isinstance(packed, Packed)
        start.append((unit, cluster, packed))
    for state in problem.states.values():
        state.undo(0)
    monkeypatch.setattr(recreate, "SWAP_SHARE", 1.0)  # nothing but swaps
    placed, gains = _search(problem, start, seed=3)
    assert gains == 1
    where = {u.label.split("/")[-1]: c for u, c, _ in placed}
    assert len(where) == 4  # every unit placed
    assert where["heavy"] == "rich"  # the heavy unit moved to the cores
    assert "lean" in {where["light0"], where["light1"]}  # a light one took its place


def test_roomiest_places_big_units_first_where_most_copies_fit(kit: Any) -> None:
    # node by node, "a" holds four 4-GPU pods and "b" three: the big gang (two of them)
    # goes to "a" (two complete copies against one); then "b" holds more 4-GPU pods (three
    # against the two left in "a"), so the small unit goes there; a unit that packs in no
    # cluster stays out
    the_fleet = kit.fleet(
        kit.cluster("a", kit.node("a0", gpus=8), kit.node("a1", gpus=8)),
        kit.cluster("b", kit.node("b0", gpus=8), kit.node("b1", gpus=4)),
    )
    jobs = [
        kit.workload("small", ("w", 1, kit.pod(gpus=4))),
        kit.workload("big", ("w", 2, kit.pod(gpus=4))),
        kit.workload("huge", ("w", 1, kit.pod(gpus=16))),
    ]
    problem = build_problem(jobs, the_fleet, ())
    placed = roomiest(problem.units, problem.states, mix=None)
    assert {u.label.split("/")[-1]: c for u, c, _ in placed} == {"big": "a", "small": "b"}


def test_large_levels_start_with_the_roomiest_pass(
    kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # demand that may fit: greedy first (a first-choice answer ends the portfolio), unless
    # the level has more (unit, cluster) pairs than greedy's tries are worth
    nodes = [kit.node(f"n{i}", gpus=8) for i in range(4)]
    the_fleet = kit.split_fleet(nodes, 2)
    jobs = kit.random_jobs(random.Random(1), 6, replicas=[1], gpus=[1], cpu=(1, 2))
    problem = build_problem(jobs, the_fleet, ())
    assert hint_order(problem.units, problem.states)[0] == "greedy"
    monkeypatch.setattr(portfolio, "GREEDY_FIRST_PAIRS", 11)  # 6 units x 2 clusters = 12
    assert hint_order(problem.units, problem.states)[0] == "roomiest"


def test_the_exchange_ruin_trades_pods_so_that_idle_gpus_get_cores(
    kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # n0's idle GPU has 2 cores left (the heavy pod took 18); n1 has cores but no GPU left
    # (the light pod took it). The waiting pod (1 GPU, 10 cores) fits nowhere until the heavy
    # and the light pod trade places: the units stay in the cluster, on other nodes
    the_fleet = kit.fleet(
        kit.cluster("c", kit.node("n0", gpus=2, cpu=20), kit.node("n1", gpus=1, cpu=20))
    )
    jobs = [
        kit.workload("heavy", ("w", 1, kit.pod(gpus=1, cpu=18))),
        kit.workload("light", ("w", 1, kit.pod(gpus=1, cpu=2))),
        kit.workload("waiting", ("w", 1, kit.pod(gpus=1, cpu=10))),
    ]
    problem = build_problem(jobs, the_fleet, ())
    heavy, light, _ = problem.units
    state = problem.states["c"]
    start: Placed = []
    for unit, node in ((heavy, 0), (light, 1)):
        (devices,) = state.place_many(unit.runs[0].shape, node, 1)
        start.append((unit, "c", Packed(pods=((unit.runs[0], 0, node, devices),), score=0.0)))
    state.undo(0)
    monkeypatch.setattr(recreate, "SWAP_SHARE", 0.0)
    monkeypatch.setattr(recreate, "EXCHANGE_SHARE", 1.0)  # nothing but exchanges
    placed, gains = _search(problem, start, seed=0)
    assert gains == 1
    nodes = {u.label.split("/")[-1]: p.pods[0][2] for u, _, p in placed}
    assert nodes == {"heavy": 1, "light": 0, "waiting": 0}
    # the states are left as they were
    assert state.free[:, 0].tolist() == [20000, 20000]


def test_the_search_ranks_units_by_density_in_the_ruined_clusters_own_resources(kit: Any) -> None:
    # "lean" has 12 cores per GPU, "rich" 100; the fleet 56. "heavy" (1 GPU, 20 cores) is
    # worth a little more than "light" (1 GPU, 2 cores): by the fleet's totals both take
    # 1/16 of its GPUs and cores are plenty, so heavy goes first everywhere; in lean heavy
    # takes 21 % of the cores against light's 12.5 % of the GPUs, so light goes first there
    the_fleet = _lean_and_rich(kit, lean_cores=96, rich_cores=800)
    jobs = [
        kit.workload("heavy", ("w", 1, kit.pod(gpus=1, cpu=20))),
        kit.workload("light", ("w", 1, kit.pod(gpus=1, cpu=2))),
    ]
    problem = build_problem(jobs, the_fleet, ())
    heavy, light = problem.units
    assert heavy.value > light.value

    def first(key: Any) -> str:
        return str(min((heavy, light), key=key).label.split("/")[-1])

    assert first(density_key(problem.units, problem.states)) == "heavy"
    keys = cluster_density_keys(problem.states)
    assert (first(keys["lean"]), first(keys["rich"])) == ("light", "heavy")


class _Steps:
    """A clock that allows ``count`` search iterations before the deadline (1.0): the
    search reads it once per iteration."""

    def __init__(self, count: int) -> None:
        self.reads = 0
        self.count = count

    def __call__(self) -> float:
        self.reads += 1
        return 0.0 if self.reads <= self.count else 2.0


def _one_exchange(
    kit: Any,
    monkeypatch: pytest.MonkeyPatch,
    gpus: list[int],
    pods: list[tuple[str, int, int]],
) -> tuple[Any, dict[str, list[int]]]:
    """One iteration of nothing but exchange ruins on cluster "c" of 20-core nodes with
    ``gpus`` each: ``pods`` are ``(name, gpus, cores)`` one-pod units, the first ones on the
    nodes in order, the last (a two-pod gang) waiting. Returns the problem and each unit's
    nodes after that iteration (which must have gained)."""
    nodes = [kit.node(f"n{i}", gpus=g, cpu=20) for i, g in enumerate(gpus)]
    the_fleet = kit.fleet(kit.cluster("c", *nodes))
    jobs = [kit.workload(n, ("w", 1, kit.pod(gpus=g, cpu=c))) for n, g, c in pods[:-1]]
    name, each, cores = pods[-1]
    jobs.append(kit.workload(name, ("w", 2, kit.pod(gpus=each, cpu=cores))))
    problem = build_problem(jobs, the_fleet, ())
    state = problem.states["c"]
    start: Placed = []
    for node, unit in enumerate(problem.units[:-1]):
        (devices,) = state.place_many(unit.runs[0].shape, node, 1)
        start.append((unit, "c", Packed(pods=((unit.runs[0], 0, node, devices),), score=0)))
    state.undo(0)
    monkeypatch.setattr(recreate, "SWAP_SHARE", 0.0)
    monkeypatch.setattr(recreate, "EXCHANGE_SHARE", 1.0)  # nothing but exchanges
    placed, gains = ruin_and_recreate(
        start, problem.units, problem.states, mix=None, clock=_Steps(1), deadline=1.0, seed=0
    )
    assert gains == 1
    return problem, {u.label.split("/")[-1]: sorted(p[2] for p in pk.pods) for u, _, pk in placed}


def test_one_exchange_ruin_trades_on_every_node_whose_idle_gpus_lack_cores(
    kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # n0 and n1: 2 GPUs and 20 cores each, a heavy pod (1 GPU, 18 cores) on each strands the
    # other GPU; n2 and n3: 1 GPU and 20 cores, a light pod (1 GPU, 2 cores) on each. The
    # waiting gang (2 pods of 1 GPU, 10 cores) needs both idle GPUs with their cores: one
    # exchange ruin trades on n0 and n1 (until each has 10 cores per idle GPU), so a single
    # iteration places it
    problem, nodes = _one_exchange(
        kit,
        monkeypatch,
        [2, 2, 1, 1],
        [("heavy0", 1, 18), ("heavy1", 1, 18), ("light0", 1, 2), ("light1", 1, 2), ("gang", 1, 10)],
    )
    assert nodes["gang"] == [0, 1]
    assert sorted(nodes["heavy0"] + nodes["heavy1"]) == [2, 3]  # traded with the light pods
    assert sorted(nodes["light0"] + nodes["light1"]) == [0, 1]
    assert problem.states["c"].free[:, 0].tolist() == [20000] * 4  # left as they were


def test_the_exchange_takes_cores_from_a_node_without_idle_gpus_first(
    kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # n0: a heavy pod (1 GPU, 18 of 20 cores) strands its second GPU. Two light pods could
    # trade with it: on n1 (2 cores, but n1 keeps an idle GPU that the 18 cores would then
    # strand) and on n2 (4 cores, n2 has no other GPU). Trading with n2's pod gives n0 only
    # 16 cores, yet leaves n1's idle GPU its cores: the waiting gang (2 pods of 1 GPU and 10
    # cores) then fits on n0 and n1. With n1's pod it would not
    _, nodes = _one_exchange(
        kit,
        monkeypatch,
        [2, 2, 1],
        [("heavy", 1, 18), ("light1", 1, 2), ("light2", 1, 4), ("gang", 1, 10)],
    )
    assert nodes == {"heavy": [2], "light1": [1], "light2": [0], "gang": [0, 1]}
