"""The solver's speed-ups change how fast it decides, never what: capacity versions, the
fits-anywhere memo (with its smaller-pod-fits-nowhere shortcut), the pack-failure memo, the
Karmada set memo, the explanations' shortcuts and the bounds' aggregation of identical units,
each compared with the plain computation on random small overloaded fleets."""

from __future__ import annotations

import random
from typing import Any

import pytest

from placer.model import Fleet, Workload
from placer.solver import bounds
from placer.solver.bounds import gpu_class_lp, lp_bounds
from placer.solver.explain import why_not
from placer.solver.heuristics import RULES, run_rule
from placer.solver.packer import Packed, pack
from placer.solver.problem import build_problem
from placer.solver.state import ClusterState


def _instance(kit: Any, rng: random.Random) -> tuple[list[Workload], Fleet]:
    clusters = []
    for c in range(3):
        nodes = [
            kit.node(
                f"c{c}n{i}",
                gpus=rng.choice([0, 2, 4, 8]),
                used=rng.choice([0, 0, 1]),
                cpu=rng.choice([8, 16, 48]),
                memory=rng.choice([64, 256]),
                devices=rng.choice([None, None, [1000, 500, 250, 0]]),
            )
            for i in range(rng.randint(2, 6))
        ]
        clusters.append(kit.cluster(f"c{c}", *nodes))
    workloads = []
    for w in range(rng.randint(10, 22)):
        components = []
        for k in range(rng.randint(1, 3)):
            shared = rng.random() < 0.2
            pod = kit.pod(
                gpus=0 if shared else rng.choice([0, 1, 2, 4, 8]),
                cpu=rng.choice([1, 2, 4, 8]),
                share=rng.choice([250, 500]) if shared else 0,
            )
            components.append((f"p{k}", rng.randint(1, 5), pod))
        workloads.append(kit.workload(f"w{w}", *components))
    return workloads, kit.fleet(*clusters)


def _outcome(placed: Any) -> list[tuple[int, str, tuple[Any, ...]]]:
    return sorted(
        (u.index, c, tuple((r.workload, i, n, d) for r, i, n, d in p.pods)) for u, c, p in placed
    )


@pytest.mark.parametrize("rule", RULES)
def test_rules_decide_the_same_with_and_without_memos(
    kit: Any, rule: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(11)
    for _ in range(12):
        workloads, fleet = _instance(kit, rng)
        with_memo = build_problem(workloads, fleet, ())
        fast = _outcome(run_rule(rule, with_memo.units, with_memo.states, mix=None))
        with monkeypatch.context() as patch:
            # nothing is ever remembered: every question is answered from the nodes
            patch.setattr(ClusterState, "remember", lambda self, key, value: None)
            plain = build_problem(workloads, fleet, ())
            slow = _outcome(run_rule(rule, plain.units, plain.states, mix=None))
        assert fast == slow
        assert fast  # the instances are not degenerate


def test_fits_anywhere_agrees_with_the_nodes(kit: Any) -> None:
    rng = random.Random(5)
    checked = nowhere = 0
    for _ in range(20):
        workloads, fleet = _instance(kit, rng)
        problem = build_problem(workloads, fleet, ())
        shapes = [r.shape for u in problem.units for r in u.runs]
        # fill the clusters part way, then ask about every shape twice (memo hit and miss),
        # smallest first so the dominance shortcut is exercised
        run_rule("greedy", problem.units[: len(problem.units) // 2], problem.states, mix=None)
        for state in problem.states.values():
            for shape in sorted(shapes, key=lambda s: (s.milli, int(s.req.sum()))) * 2:
                expected = bool(state.fits(shape).any())
                assert state.fits_anywhere(shape) is expected
                checked += 1
                nowhere += not expected
    assert checked and nowhere


def test_versions_name_the_capacity(kit: Any) -> None:
    workloads, fleet = _instance(kit, random.Random(2))
    problem = build_problem(workloads, fleet, ())
    state = next(iter(problem.states.values()))
    start = state.version
    mark = state.mark()
    seen = {start}
    for unit in problem.units:
        before = state.version
        result = pack(state, unit.runs)
        if isinstance(result, Packed):
            assert state.version not in seen  # a new capacity gets a new number
            seen.add(state.version)
        else:
            assert state.version == before  # a failed packing left the capacity alone
    state.undo(mark)
    assert state.version == start


def test_explanations_shortcuts_match_a_trial_packing(kit: Any) -> None:
    rng = random.Random(8)
    compared = 0
    for _ in range(15):
        workloads, fleet = _instance(kit, rng)
        problem = build_problem(workloads, fleet, ())
        run_rule("karmada", problem.units, problem.states, mix=None)
        cache: dict[tuple[object, ...], str | None] = {}
        for state in problem.states.values():
            for unit in problem.units:
                reason = why_not(state, unit, cache=cache)
                mark = state.mark()
                packs = isinstance(pack(state, unit.runs), Packed)
                state.undo(mark)
                assert (reason is None) == packs, (unit.label, reason)
                compared += 1
    assert compared


def _with_copies(
    kit: Any, rng: random.Random, *, copies: int, originals: int
) -> tuple[list[Workload], Fleet]:
    """An instance plus copies of its first workloads: identical units the aggregated LPs
    count once."""
    workloads, fleet = _instance(kit, rng)
    workloads += [
        kit.workload(f"{w.ref.name}-copy{k}", *[(c.name, c.replicas, c.pod) for c in w.components])
        for k in range(copies)
        for w in workloads[:originals]
    ]
    return workloads, fleet


def _singletons(units: Any) -> tuple[list[Any], dict[int, int]]:
    """``identical_units`` with every unit on its own (the plain LP)."""
    return list(units), {u.index: 1 for u in units}


def test_bounds_aggregate_identical_units_exactly(
    kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(4)
    binding = 0
    for _ in range(12):
        workloads, fleet = _with_copies(kit, rng, copies=2, originals=6)
        problem = build_problem(workloads, fleet, ())
        guide = gpu_class_lp(problem.states, problem.units)
        grouped, _ = lp_bounds(problem.states, problem.units, classes=guide)
        with monkeypatch.context() as patch:
            patch.setattr(bounds, "identical_units", _singletons)
            single, _ = lp_bounds(problem.states, problem.units, classes=guide)
        assert grouped == single
        demand = sum(u.milli for u in problem.units) / 1000
        binding += grouped["node_lp_gpu"] < demand
    assert binding  # some instances where the LP, not the demand, decides the bound
