"""Baselines, behind the same interface as CP-SAT: they choose a cluster per unit, one unit at
a time, and the shared packer realises the choice on nodes (so "placed" is node-realised).

* ``first-fit`` — Nova's fill-and-spill: clusters in policy order (preferred clusters, then
  fleet order); the first whose **cluster totals** cover the unit's total demand.
* ``best-fit`` / ``worst-fit`` — among clusters whose totals cover the demand, the one with the
  least / most free GPU thousandths left after it (then cpu).
* ``karmada`` — Karmada's accurate estimator: per cluster, the replicas of each component that
  fit node by node (``Σ_n min_k ⌊free/request⌋``), complete sets = min over components; the
  cluster with the most sets (at least one) wins, ties by policy order.
* ``greedy`` — node-aware: clusters in preference order, try the packer, keep the first that
  really fits; in batch mode units go largest value first (first-fit-decreasing).

The four cluster-total rules commit to a cluster before looking at nodes, as their originals
do: if the packer cannot realise the choice the unit stays unplaced ("realisation gap").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from placer.solver import SOLVERS
from placer.solver.capacity import infeasible_alone
from placer.solver.fleetcopies import FleetCopies
from placer.solver.fragmentation import Mix
from placer.solver.packer import Packed, PackFailure, pack
from placer.solver.problem import Unit
from placer.solver.state import ClusterState, Replay

__all__ = [
    "RULES",
    "Choice",
    "Placed",
    "apply_placed",
    "choose_and_pack",
    "failure_basis",
    "ffd_key",
    "rule_order",
    "run_rule",
    "totals_fit",
]

#: the baselines: every solver but CP-SAT.
RULES = SOLVERS[1:]

#: realised placements: (unit, cluster, where its pods went).
Placed = list[tuple[Unit, str, Packed]]


def apply_placed(states: dict[str, ClusterState], placed: Placed) -> None:
    """Put ``placed`` (realised earlier) on the states again, exactly."""
    by_cluster: dict[str, list[Replay]] = {}
    for _, cluster, packed in placed:
        by_cluster.setdefault(cluster, []).append(packed.replay)
    for cluster, replays in by_cluster.items():
        states[cluster].apply(replays)


@dataclass(frozen=True)
class Choice:
    """A unit packed in ``cluster`` (``packed``), or refused there (``failure`` text)."""

    cluster: str | None
    packed: Packed | None = None
    #: why the rule's chosen cluster could not realise the unit (None when placed / no choice).
    failure: str | None = None


def _totals(state: ClusterState) -> tuple[np.ndarray, int]:
    free, gpu, _ = state.totals()
    return free, gpu


def _demand(state: ClusterState, unit: Unit) -> tuple[np.ndarray, int]:
    return unit.demand, unit.milli


def totals_fit(state: ClusterState, unit: Unit) -> bool:
    """Whether the cluster totals cover the unit's total demand (Nova's capacity check)."""
    free, gpu = _totals(state)
    need, milli = _demand(state, unit)
    return gpu >= milli and bool((free >= need).all())  # GPUs first: the cheap test


def _left(state: ClusterState, unit: Unit) -> tuple[int, int]:
    free, gpu = _totals(state)
    need, milli = _demand(state, unit)
    return gpu - milli, int(free[0] - need[0])


#: Karmada counts complete component sets by simulation; placer stops counting at this many.
MAX_SETS = 4


def _sets(state: ClusterState, unit: Unit) -> int:
    """Complete sets of the unit that fit, as Karmada's accurate estimator counts them.

    One component: ``Σ_n ⌊free_n / request⌋`` over eligible nodes (NodeResourceEstimator).
    Several components (MaxAvailableComponentSets): sets simulated one after another until
    one does not fit, at most ``MAX_SETS``; each component's replicas go first-fit over the
    nodes in order, as many per node as its free capacity holds (counting only: whole GPUs
    on idle devices, a share on ``Σ_d ⌊free_d / share⌋`` slots of the node).
    """
    if len(unit.runs) == 1:
        return _most_sets(state, unit)
    # a function of the capacity and the runs: memoised by version and the runs' shapes
    key = (
        state.version,
        "sets",
        tuple((r.shape.ident, r.count) for r in unit.runs),
    )
    known = cast("int | None", state.memo.get(key))
    if known is None:
        known = _simulate_sets(state, unit)
        state.remember(key, known)
    return known


def _simulate_sets(state: ClusterState, unit: Unit) -> int:
    usable = state.usable
    free = state.free[usable].copy()
    idle = state.full[usable].copy()
    runs = []
    for run in unit.runs:
        shape = run.shape
        slots = (
            (np.maximum(state.dev[usable], 0) // shape.share).sum(axis=1) if shape.share else None
        )
        runs.append((run, state.eligible(shape)[usable], slots))
    for sets in range(MAX_SETS):
        for run, eligible, slots in runs:
            shape = run.shape
            positive = shape.req > 0
            most = (free[:, positive] // shape.req[positive]).min(axis=1)
            if shape.gpus:
                most = np.minimum(most, idle // shape.gpus)
            if slots is not None:
                most = np.minimum(most, slots)
            most = np.where(eligible, np.maximum(most, 0), 0)
            reach = np.cumsum(most)
            if not reach.size or int(reach[-1]) < run.count:
                return sets
            last = int(np.searchsorted(reach, run.count))
            take = most.copy()
            take[last + 1 :] = 0
            take[last] -= int(reach[last]) - run.count
            free -= take[:, None] * shape.req[None, :]
            idle -= take * shape.gpus
            if slots is not None:
                slots -= take
    return MAX_SETS


def _most_sets(state: ClusterState, unit: Unit) -> int:
    """Per run, the replicas that fit node by node over its count; the least of them: exact
    for one component, an upper bound on :func:`_sets` for several."""
    return min(state.copies_total(run.shape) // max(run.count, 1) for run in unit.runs)


def ffd_key(unit: Unit) -> tuple[int, int, int]:
    """Largest first: value (GPU-weighted), then pods, then input order."""
    return (-unit.value, -unit.pods, unit.index)


def rule_order(rule: str, unit: Unit) -> list[str]:
    """Cluster order a rule walks: fill-and-spill order for first-fit (policy's preferred
    clusters, then fleet order), the unit's preference order otherwise."""
    if rule == "first-fit":
        policy = unit.policy
        allowed = list(unit.rank)  # fleet order
        return sorted(allowed, key=lambda c: policy.rank(c) if policy else 0)
    return unit.allowed()


def run_rule(
    rule: str,
    units: Sequence[Unit],
    states: dict[str, ClusterState],
    *,
    mix: Mix | None,
    failures: dict[int, dict[str, str]] | None = None,
    ordered: bool = False,
    stop: Callable[[], bool] | None = None,
) -> Placed:
    """A baseline over ``units`` (batch order: largest first for ``greedy``, input order for
    the others, unless ``ordered``), one unit at a time; leaves the placements applied.

    The batch decisions of the baselines and the CP-SAT solver's hint portfolio both run
    this, so the portfolio considers exactly each baseline's answer. ``failures`` collects
    the rules' refusal texts (only then are failed packings simulated in full for the text).
    ``stop``: asked before each unit; when it says so the pass ends there (the units placed
    so far are a valid, partial answer).
    """
    if not ordered:
        key = ffd_key if rule == "greedy" else (lambda u: (u.index,))
        units = sorted(units, key=key)
    # greedy tries clusters until one packs: those whose nodes cannot hold the unit's pods
    # (fewer copies than replicas, node by node) would refuse it, and are skipped at once
    fleet = FleetCopies(states) if rule == "greedy" and len(states) > 1 else None
    placed: Placed = []
    for unit in units:
        if stop is not None and stop():
            break
        order = rule_order(rule, unit)
        if fleet is not None and fleet.usable:
            sets = fleet.sets(unit).tolist()
            position = fleet.position
            order = [c for c in order if c not in position or sets[position[c]] != 0]
        choice = choose_and_pack(rule, unit, states, order, mix=mix, explain=failures is not None)
        if choice.packed is not None and choice.cluster is not None:
            placed.append((unit, choice.cluster, choice.packed))
        elif failures is not None and choice.cluster is not None and choice.failure:
            failures[unit.index] = {choice.cluster: choice.failure}
    return placed


def choose_and_pack(
    rule: str,
    unit: Unit,
    states: dict[str, ClusterState],
    order: Sequence[str],
    *,
    mix: Mix | None,
    scoring: str | None = None,
    explain: bool = True,
) -> Choice:
    """Apply ``rule`` to ``unit`` over the clusters ``order`` (allowed, preference order);
    ``scoring`` overrides the unit's node scoring. Without ``explain`` a choice that cannot
    be realised (some pod has fewer node-by-node copies than replicas) is refused without
    simulating the packing, and without a failure text."""
    candidates = [c for c in order if c in states]
    scoring = scoring or unit.scoring
    if rule == "greedy":
        for name in candidates:
            state = states[name]
            if not totals_fit(state, unit) or (unit.pods > 1 and infeasible_alone(state, unit)):
                continue
            result = pack(states[name], unit.runs, scoring=scoring, mix=mix)
            if isinstance(result, Packed):
                return Choice(cluster=name, packed=result)
        return Choice(cluster=None)
    chosen: str | None = None
    if rule == "karmada":
        best = 0
        for name in candidates:
            # a cluster whose upper bound cannot beat the best so far is not simulated
            if len(unit.runs) > 1 and min(MAX_SETS, _most_sets(states[name], unit)) <= best:
                continue
            sets = _sets(states[name], unit)
            if sets > best:
                best, chosen = sets, name
    else:
        fitting = [c for c in candidates if totals_fit(states[c], unit)]
        if fitting:
            if rule == "first-fit":
                chosen = fitting[0]
            elif rule == "best-fit":
                chosen = min(fitting, key=lambda c: _left(states[c], unit))
            else:
                chosen = max(fitting, key=lambda c: _left(states[c], unit))
    if chosen is None:
        return Choice(cluster=None)
    if not explain and infeasible_alone(states[chosen], unit):
        return Choice(cluster=chosen)
    result = pack(states[chosen], unit.runs, scoring=scoring, mix=mix)
    if isinstance(result, Packed):
        return Choice(cluster=chosen, packed=result)
    return Choice(cluster=chosen, failure=_failure_text(rule, result))


def _failure_text(rule: str, failure: PackFailure) -> str:
    """What went wrong; the decision adds the node-level reason after ``but``."""
    basis = "its node-by-node estimate" if rule == "karmada" else "cluster totals"
    run = failure.run
    return (
        f"{rule} chose this cluster on {basis}, but only {failure.placed} of the "
        f'{run.count} pods of component "{run.component.label}" found a node'
    )


def failure_basis(text: str) -> str:
    """The ``<rule> chose this cluster on <basis>`` part of a failure text."""
    return text.split(", but ", 1)[0]
