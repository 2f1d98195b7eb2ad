"""The solver's speed-ups change how fast it decides, never what: capacity versions, the
fits-anywhere memo (with its smaller-pod-fits-nowhere shortcut), the pack-failure memo, the
Karmada set memo, the explanations' shortcuts, the bounds' aggregation of identical units,
the copies tables and their fleet matrix, the run tables, the LP written in one step and the
master's pairs counted only as far as its size limit, each compared with the plain
computation on random small overloaded fleets."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from placer.model import Fleet, Workload
from placer.solver import bounds
from placer.solver.bounds import gpu_class_lp, lp_bounds
from placer.solver.capacity import _infeasible_alone, infeasible_alone
from placer.solver.explain import why_not
from placer.solver.fleetcopies import FleetCopies
from placer.solver.heuristics import RULES, run_rule
from placer.solver.lp import LinearProgram
from placer.solver.master import SMALL_MODEL, model_pairs
from placer.solver.packer import Packed, pack
from placer.solver.portfolio import roomiest
from placer.solver.problem import build_problem
from placer.solver.runs import RunTable
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


def _untracked(monkeypatch: pytest.MonkeyPatch) -> None:
    """States built from here on keep no copies tables: every count from the nodes."""
    monkeypatch.setattr(ClusterState, "track", lambda self, shapes: None)


@pytest.mark.parametrize("rule", [*RULES, "roomiest"])
def test_rules_decide_the_same_with_and_without_copies_tables(
    kit: Any, rule: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run(problem: Any) -> Any:
        if rule == "roomiest":
            return roomiest(problem.units, problem.states, mix=None)
        return run_rule(rule, problem.units, problem.states, mix=None)

    rng = random.Random(12)
    for _ in range(12):
        workloads, fleet = _instance(kit, rng)
        tracked = build_problem(workloads, fleet, ())
        assert all(s.table is not None for s in tracked.states.values())
        fast = _outcome(run(tracked))
        with monkeypatch.context() as patch:
            _untracked(patch)
            plain = build_problem(workloads, fleet, ())
            slow = _outcome(run(plain))
        assert fast == slow
        assert fast


def test_copies_tables_follow_every_change(kit: Any) -> None:
    # packings, replays taken off and put back, undos: after each, every tracked shape's
    # count equals the count over the nodes
    rng = random.Random(6)
    checked = 0
    for _ in range(10):
        workloads, fleet = _instance(kit, rng)
        problem = build_problem(workloads, fleet, ())
        shapes = list({id(r.shape): r.shape for u in problem.units for r in u.runs}.values())
        for state in problem.states.values():
            start = state.mark()
            done = []
            for unit in problem.units:
                mark = state.mark()
                result = pack(state, unit.runs)
                if isinstance(result, Packed):
                    done.append(result)
                    if rng.random() < 0.3:
                        state.undo(mark)
                        done.pop()
                if done and rng.random() < 0.2:
                    state.apply([done.pop().replay], sign=-1)
                table = state.tracked()
                assert table is not None
                for shape in shapes:
                    expected = int(state.copies_all(shape)[state.usable].sum())
                    assert int(table.total[table.index[id(shape)]]) == expected
                    checked += 1
            state.undo(start)
    assert checked


def test_run_tables_tell_which_units_fit_alone_as_infeasible_alone_does(kit: Any) -> None:
    rng = random.Random(9)
    compared = refused = 0
    for _ in range(12):
        workloads, fleet = _instance(kit, rng)
        problem = build_problem(workloads, fleet, ())
        run_rule("greedy", problem.units[::2], problem.states, mix=None)  # some changed
        table = RunTable(problem.units)
        positions = np.arange(len(table), dtype=np.int64)
        for state in problem.states.values():
            fits = table.fit_alone(state, positions).tolist()
            for unit, ok in zip(problem.units, fits, strict=True):
                assert ok == (not _infeasible_alone(state, unit))
                compared += 1
                refused += not ok
    assert compared and refused


def test_fleet_copies_count_complete_copies_of_a_unit_in_every_cluster(kit: Any) -> None:
    rng = random.Random(10)
    for _ in range(6):
        workloads, fleet = _instance(kit, rng)
        problem = build_problem(workloads, fleet, ())
        copies = FleetCopies(problem.states)
        assert copies.usable
        run_rule("greedy", problem.units[:5], problem.states, mix=None)  # the matrix follows
        for unit in problem.units:
            expected = [
                min(state.copies_total(r.shape) // r.count for r in unit.runs)
                for state in problem.states.values()
            ]
            assert copies.sets(unit).tolist() == expected


def test_lp_variables_in_one_step_make_the_same_model() -> None:
    upper = [1.0, 2.5, 7.0]
    objective = [3.0, 0.0, -1.5]
    one_by_one = LinearProgram()
    for u, c in zip(upper, objective, strict=True):
        one_by_one.var(u, c)
    at_once = LinearProgram()
    assert at_once.vars(np.array(upper), np.array(objective)) == 0
    assert at_once.vars(np.array([4.0]), np.array([1.0])) == 3
    one_by_one.var(4.0, 1.0)
    serialized = [lp._model.SerializeToString(deterministic=True) for lp in (one_by_one, at_once)]
    assert serialized[0] == serialized[1]


def test_master_pairs_stop_past_the_small_model_limit(kit: Any) -> None:
    """The master runs on at most ``SMALL_MODEL`` pairs: its pairs are every pair when there
    are no more, and otherwise the first of them up to one past the limit (enough to say the
    model is not small) — the same pairs in the same order as checking them all."""
    rng = random.Random(13)
    small = big = 0
    for _ in range(12):
        workloads, fleet = _instance(kit, rng)
        problem = build_problem(workloads, fleet, ())
        every = [
            (u.index, c)
            for u in problem.units
            for c in u.allowed()
            if c in problem.states and not infeasible_alone(problem.states[c], u)
        ]
        for limit in (3, len(every), SMALL_MODEL):
            pairs = model_pairs(problem.units, problem.states, limit=limit)
            assert [(u.index, c) for u, c in pairs] == every[: limit + 1]
            small += len(every) <= limit
            big += len(every) > limit
    assert small and big
