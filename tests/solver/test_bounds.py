"""Bounds: every bound is at least what any placement achieves, and the node-class LP sees
node types that the pooled LPs do not.

The exact optimum of tiny instances is found here by brute force, independently of the
solver: every assignment of workloads to clusters (or nowhere), each checked by an exhaustive
search of pods over nodes and GPU devices.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from placer.model import GPU_SHARE, Fleet, Node, Workload
from placer.quantity import CPU, GPU, PODS
from placer.solver import SOLVERS
from placer.solver import decide as decide_module
from placer.solver.bounds import gpu_class_lp
from placer.solver.problem import build_problem, identical_units
from placer.solver.state import node_devices


def _placed_gpus(decision: Any) -> float:
    requests = decision.summary.placed_requests
    return requests.get(GPU, 0) + requests.get(GPU_SHARE, 0) / 1000


def test_the_class_lp_sees_that_spare_cpu_on_one_node_type_cannot_feed_another(
    kit: Any, decide: Any
) -> None:
    # an 8-GPU node with 96 cores and a 2-GPU node with 104 cores; 1-GPU pods of 18 cores
    # (twelve) and of 12 cores (two). The 8-GPU node holds at most two small and four big
    # pods (96 cores): 6 GPUs; the 2-GPU node two more. Pooled, the cores look plentiful.
    the_fleet = kit.fleet(
        kit.cluster("c", kit.node("g0", gpus=8, cpu=96), kit.node("t0", gpus=2, cpu=104))
    )
    jobs = [kit.workload(f"big{i}", ("w", 1, kit.pod(gpus=1, cpu=18))) for i in range(12)]
    jobs += [kit.workload(f"small{i}", ("w", 1, kit.pod(gpus=1, cpu=12))) for i in range(2)]
    decision = decide(jobs, the_fleet)
    bound = decision.summary.bound
    assert bound["node_lp_gpu"] == 9.0
    assert bound["class_lp_gpu"] == 8.0
    assert bound["tightest_gpu"] == 8.0
    # the batch solver reaches it (the class LP guides which pods go to which node type)
    assert _placed_gpus(decision) == 8.0


# --------------------------------------------------------------------------------------------
# brute force


def _fits_all(pods: list[dict[str, int]], nodes: list[Node]) -> bool:
    """Whether ``pods`` fit on ``nodes`` together: exhaustive search over nodes and devices."""
    free = [dict(n.free) for n in nodes]
    devices = [list(node_devices(n)) for n in nodes]
    pods = sorted(pods, key=lambda p: (-p.get(GPU, 0), -p.get(GPU_SHARE, 0), -p.get(CPU, 0)))

    def place(i: int) -> bool:
        if i == len(pods):
            return True
        pod = pods[i]
        for n, node_free in enumerate(free):
            if any(node_free.get(k, 0) < v for k, v in pod.items() if k not in (GPU, GPU_SHARE)):
                continue
            if node_free.get(PODS, 0) < 1:
                continue
            row = devices[n]
            whole = pod.get(GPU, 0)
            share = pod.get(GPU_SHARE, 0)
            idle = [d for d, milli in enumerate(row) if milli == 1000]
            if len(idle) < whole:
                continue
            choices: list[int | None] = [None]
            if share:
                choices = [d for d in range(len(row)) if row[d] >= share and d not in idle[:whole]]
            for device in choices:
                for k, v in pod.items():
                    if k not in (GPU, GPU_SHARE):
                        node_free[k] -= v
                node_free[PODS] -= 1
                for d in idle[:whole]:
                    row[d] = 0
                if device is not None:
                    row[device] -= share
                ok = place(i + 1)
                for k, v in pod.items():
                    if k not in (GPU, GPU_SHARE):
                        node_free[k] += v
                node_free[PODS] += 1
                for d in idle[:whole]:
                    row[d] = 1000
                if device is not None:
                    row[device] += share
                if ok:
                    return True
        return False

    return place(0)


def _exact_gpus(workloads: list[Workload], fleet: Fleet) -> float:
    """The most GPUs any node-feasible placement places (brute force)."""
    best = 0
    clusters = list(fleet.clusters)
    for choice in itertools.product(range(len(clusters) + 1), repeat=len(workloads)):
        total = 0
        feasible = True
        for c, cluster in enumerate(clusters):
            chosen = [w for w, k in zip(workloads, choice, strict=True) if k == c]
            pods = [
                dict(comp.pod.requests)
                for w in chosen
                for comp in w.components
                for _ in range(comp.replicas)
            ]
            if pods and not _fits_all(pods, list(cluster.nodes)):
                feasible = False
                break
            total += sum(1000 * p.get(GPU, 0) + p.get(GPU_SHARE, 0) for p in pods)
        if feasible:
            best = max(best, total)
    return best / 1000


def _tiny(kit: Any, rng: random.Random) -> tuple[list[Workload], Fleet]:
    """Two clusters of one or two nodes, four workloads of one or two components."""
    clusters = []
    for c in range(2):
        nodes = []
        for n in range(rng.randint(1, 2)):
            gpus = rng.choice([1, 2, 4])
            devices = [rng.choice([1000, 1000, 600, 300, 0]) for _ in range(gpus)]
            nodes.append(
                kit.node(f"n{c}{n}", gpus=gpus, cpu=rng.choice([8, 16, 24]), devices=devices)
            )
        clusters.append(kit.cluster(f"c{c}", *nodes))
    jobs = []
    for i in range(4):
        components = []
        for j in range(rng.choice([1, 1, 2])):
            if rng.random() < 0.3:
                pod = kit.pod(share=rng.choice([250, 500, 700]), cpu=rng.randint(1, 8))
            else:
                pod = kit.pod(gpus=rng.choice([1, 1, 2]), cpu=rng.randint(1, 12))
            components.append((f"w{j}", rng.randint(1, 2), pod))
        jobs.append(kit.workload(f"j{i}", *components))
    return jobs, kit.fleet(*clusters)


def test_every_bound_is_at_least_the_exact_optimum_on_tiny_instances(kit: Any, decide: Any) -> None:
    rng = random.Random(4)
    tight = 0
    for _ in range(25):
        jobs, the_fleet = _tiny(kit, rng)
        exact = _exact_gpus(jobs, the_fleet)
        decision = decide(jobs, the_fleet)
        bound = decision.summary.bound
        for key in ("capacity_gpu", "cluster_lp_gpu", "node_lp_gpu", "class_lp_gpu"):
            assert bound[key] >= exact - 1e-9, (key, bound, exact)
        assert bound["class_lp_gpu"] <= bound["cluster_lp_gpu"] + 1e-9
        assert _placed_gpus(decision) <= exact + 1e-9
        tight += bound["tightest_gpu"] == pytest.approx(exact)
    # the relaxation is often exact on instances this small (a check that it is not loose)
    assert tight >= 15


def test_no_solver_places_more_than_the_bounds(kit: Any, decide: Any) -> None:
    rng = random.Random(11)
    for trial in range(6):
        nodes = [
            kit.node(
                f"n{i}",
                gpus=rng.choice([2, 4, 8]),
                cpu=rng.choice([16, 32, 96]),
                memory=rng.choice([64, 256]),
                devices=None if i % 3 else [rng.choice([1000, 500, 0]) for _ in range(4)],
            )
            for i in range(9)
        ]
        the_fleet = kit.split_fleet(nodes, 3)
        jobs = kit.random_jobs(rng, 14, replicas=[1, 1, 2, 4], gpus=[1, 2], cpu=(2, 30))
        jobs += [
            kit.workload(f"s{i}", ("w", 1, kit.pod(share=rng.choice([300, 700])))) for i in range(4)
        ]
        for solver in SOLVERS:
            decision = decide(jobs, the_fleet, solver=solver, seed=trial, time_limit=0.2)
            assert _placed_gpus(decision) <= decision.summary.bound["tightest_gpu"] + 1e-9, solver


def test_node_classes_group_identical_nodes_and_coarse_classes_only_loosen(
    kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from placer.model import Taint
    from placer.solver import classes
    from placer.solver.bounds import gpu_class_lp
    from placer.solver.problem import build_problem

    taint = Taint(key="dedicated", value="x", effect="NoSchedule")
    nodes = [kit.node(f"a{i}") for i in range(4)]
    nodes += [kit.node("tainted", taints=[taint]), kit.node("busy", used=5)]
    nodes += [kit.node("b0", cpu=60), kit.node("b1", cpu=50)]
    the_fleet = kit.fleet(kit.cluster("c", *nodes))
    jobs = [kit.workload(f"j{i}", ("w", 2, kit.pod(gpus=3, cpu=20))) for i in range(6)]
    problem = build_problem(jobs, the_fleet, ())
    state = problem.states["c"]
    shapes = [problem.units[0].runs[0].shape]
    found = classes.node_classes(state, shapes)
    assert sorted(found.size.tolist()) == [1, 1, 1, 1, 4]
    tainted = int(found.label[found.nodes.tolist().index(4)])
    assert not found.eligible[0, tainted]
    units = problem.units
    exact = gpu_class_lp(problem.states, units).objective
    monkeypatch.setattr(classes, "MAX_CLASSES", 1)
    coarse = classes.node_classes(state, shapes)
    # the eight-GPU nodes that differ only in cpu share a coarse class; taint and idle
    # devices still split
    assert sorted(coarse.size.tolist()) == [1, 1, 6]
    # a coarse class keeps its members' sums: the LP only gets looser, never wrong
    assert coarse.total(coarse.free).sum(axis=0).tolist() == state.free.sum(axis=0).tolist()
    assert gpu_class_lp(problem.states, units).objective >= exact
    assert exact >= 1000 * _exact_gpus(jobs, the_fleet)


def test_identical_units_share_the_class_lp_and_get_whole_shares_back(kit: Any) -> None:
    # four identical 8-GPU jobs; "a" holds two of them, "b" one: the LP has one variable per
    # cluster for the group, and hands the shares back one unit's worth at a time
    the_fleet = kit.fleet(
        kit.cluster("a", kit.node("a0", gpus=8), kit.node("a1", gpus=8)),
        kit.cluster("b", kit.node("b0", gpus=8), kit.node("b1", gpus=8, used=4)),
    )
    jobs = [kit.workload(f"j{i}", ("w", 1, kit.pod(gpus=8))) for i in range(4)]
    problem = build_problem(jobs, the_fleet, ())
    lp = gpu_class_lp(problem.states, problem.units)
    assert lp.objective == pytest.approx(24_000)
    per_unit = [
        {c: round(lp.x.get((u.index, c), 0.0), 9) for c in ("a", "b")} for u in problem.units
    ]
    assert all(sum(x.values()) <= 1 + 1e-9 for x in per_unit)
    assert sum(x["a"] for x in per_unit) == pytest.approx(2)
    assert sum(x["b"] for x in per_unit) == pytest.approx(1)
    # whole shares stay whole: three units get one cluster each, the fourth nothing
    assert sorted(tuple(x.values()) for x in per_unit) == [(0, 0), (0, 1), (1, 0), (1, 0)]
    # the group is one LP column per cluster, not one per unit
    single = gpu_class_lp(problem.states, problem.units[:1])
    assert lp.variables == single.variables


def test_the_lp_bounds_are_left_out_when_the_time_limit_cannot_afford_them(
    kit: Any, decide: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the same decision with the LPs' estimated cost just under and just over their share
    # of the limit: with them, every bound; without, the capacity bound alone (and the
    # tightest is that one), and still a complete, verified decision
    rng = random.Random(2)
    nodes = [kit.node(f"n{i}", gpus=rng.choice([2, 4, 8]), cpu=32) for i in range(6)]
    the_fleet = kit.split_fleet(nodes, 2)
    jobs = kit.random_jobs(rng, 20, replicas=[1, 2], gpus=[1, 2, 4], cpu=(2, 12))
    groups = len(identical_units(build_problem(jobs, the_fleet, ()).units)[0])
    per_second = decide_module.LP_SHARE * 1.0 / (groups * 2)  # seconds per pair at the edge
    for factor, solved in ((0.9, True), (1.1, False)):
        monkeypatch.setattr(decide_module, "LP_SECONDS_PER_PAIR", per_second * factor)
        bound = decide(jobs, the_fleet, time_limit=1.0).summary.bound
        keys = {"cluster_lp_gpu", "node_lp_gpu", "class_lp_gpu"}
        assert (keys <= set(bound)) is solved
        if not solved:
            assert not keys & set(bound)
            assert bound["tightest_gpu"] == bound["capacity_gpu"]
