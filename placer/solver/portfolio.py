"""The hint portfolio: complete, node-realised answers for one priority level, cheap first.

CP-SAT's batch solver starts from the best of several greedy passes, each a full placement
realised by the packer (:mod:`placer.solver.packer`). In the order they run (``PASSES``;
when the level's demand exceeds the free totals, :func:`hint_order` puts the LP-guided and
roomiest passes and ``karmada`` first, since nothing can then place every unit; when it may
fit but the level has more than ``GREEDY_FIRST_PAIRS`` (unit, cluster) pairs, the roomiest
pass goes first, since greedy's tries through the fullest clusters cost most there):

* **Every baseline** (``greedy`` first: when it places every unit in its first-choice
  cluster nothing can be better and the rest is skipped; then ``karmada``, ``worst-fit``,
  ``first-fit``, ``best-fit`` after the LP pass), exactly as its own batch decision runs it
  (:func:`placer.solver.heuristics.run_rule`): so, time permitting, CP-SAT's answer is never
  worse than any baseline's on the same capacity.
* **LP-guided** (``lp``, second): the node-class LP (:mod:`placer.solver.classlp`)
  maximising placed GPUs; units in decreasing order of their largest LP share
  ``max_c x[u, c]`` (then most value per scarcest resource), each tried in its clusters by
  decreasing ``x[u, c]``, then by preference. Units the LP places whole go first, into the
  cluster the LP chose, and the rest fill what is left. The LP's pure GPU objective matters:
  with its ties broken by a small random perturbation, or by a preference for small units,
  the pass placed less, because the perturbed optimum splits more big gangs between clusters
  (what the pass places, either way, next to the baselines: simulations/README.md, "Behind
  the code's constants"). Skipped when the decision cannot afford the LP.
* **Roomiest cluster** (``roomiest``): units largest first (:func:`~placer.solver.
  heuristics.ffd_key`), each tried in its clusters by decreasing complete copies of it the
  nodes hold, node by node (Karmada's estimate, read for every cluster at once from
  :class:`~placer.solver.fleetcopies.FleetCopies`), then by preference; clusters with no
  copy are not tried. Largest first with Karmada's spreading, for fleet scale (thousands of
  units, dozens of clusters), where greedy's tries cost most (how it compares there:
  simulations/README.md, "Behind the code's constants").

A pass runs when the time it is expected to take (``PASS_COST`` relative to the passes that
ran) fits before the deadline, and stops at the deadline (its partial answer still counts);
the first runs until the level's own deadline. When a pass does not fit the portfolio
ends, and the batch solver gives the time left to ruin and recreate
(:mod:`placer.solver.recreate`, which uses :func:`density_key` as one of its orders). The
best answer (placed value, then preference) wins; ties go to the earlier pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from placer.solver.bounds import gpu_class_lp
from placer.solver.classlp import ClassLP
from placer.solver.clock import Clock
from placer.solver.fleetcopies import FleetCopies
from placer.solver.fragmentation import Mix
from placer.solver.heuristics import Placed, choose_and_pack, ffd_key, run_rule
from placer.solver.problem import Unit
from placer.solver.state import ClusterState

__all__ = [
    "PASSES",
    "Hints",
    "cluster_density_keys",
    "density_key",
    "hint_order",
    "roomiest",
    "run_portfolio",
    "value_of",
]

#: the passes in the order they run (when the demand may fit: see :func:`hint_order`).
PASSES = ("greedy", "lp", "roomiest", "karmada", "worst-fit", "first-fit", "best-fit")
#: above this many (unit, cluster) pairs the roomiest pass goes before greedy when the demand
#: may fit: greedy tries a unit's clusters in preference order until one packs, which at
#: fleet scale (the fullest clusters first) costs as much as the rest of a decision, while the
#: roomiest pass places as much or more.
GREEDY_FIRST_PAIRS = 20_000
#: each pass's cost relative to the others (CPU time, measured on the benchmark's openb
#: fleets at 4-16 clusters): a pass is expected to take its cost times the most seconds per
#: unit of cost any pass so far took, and is skipped when that does not fit before the
#: deadline (a cheaper one after it may still run).
PASS_COST = {
    "greedy": 1.0,
    "lp": 1.0,
    "roomiest": 1.0,
    "karmada": 2.0,
    "worst-fit": 1.0,
    "first-fit": 0.3,
    "best-fit": 0.3,
}


@dataclass
class Hints:
    """The portfolio's best answer, and what ran."""

    best: Placed
    #: the pass that found ``best``.
    winner: str
    #: seconds (decision clock) of the longest pass.
    pass_seconds: float
    #: placed value and seconds (decision clock) per pass that ran, in order.
    values: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: the guiding LP (when it was solved here or given).
    guide: ClassLP | None = None


def value_of(placed: Placed) -> tuple[int, int]:
    """Placed value, then minus the preference ranks (higher is better)."""
    return (sum(u.value for u, _, _ in placed), -sum(u.rank[c] for u, c, _ in placed))


def density_key(
    units: Sequence[Unit], states: dict[str, ClusterState]
) -> Callable[[Unit], tuple[float, int]]:
    """Most value per share of the scarcest resource first (GPU thousandths, cpu, memory,
    each as a share of the level's free total): when cpu or memory binds, units that bring
    many GPUs per core go first."""
    free_cpu = sum(int(s.free[s.usable, 0].sum()) for s in states.values()) or 1
    free_mem = sum(int(s.free[s.usable, 1].sum()) for s in states.values()) or 1
    free_gpu = sum(int(s.devfree[s.usable].sum()) for s in states.values()) or 1
    return _density(free_gpu, free_cpu, free_mem)


def cluster_density_keys(
    states: dict[str, ClusterState],
) -> dict[str, Callable[[Unit], tuple[float, int]]]:
    """Per cluster, :func:`density_key` with the shares taken of that cluster's free totals:
    a unit needing more cores per GPU than the cluster has ranks low there, however many
    cores the fleet as a whole has to spare (a fleet of clusters of 12 and of 36 cores per
    GPU: units of 18 cores per GPU strand the first kind's GPUs)."""
    keys = {}
    for name, state in states.items():
        free, gpu, _ = state.totals()
        keys[name] = _density(gpu or 1, int(free[0]) or 1, int(free[1]) or 1)
    return keys


def _density(free_gpu: int, free_cpu: int, free_mem: int) -> Callable[[Unit], tuple[float, int]]:
    def key(unit: Unit) -> tuple[float, int]:
        cpu, mem = int(unit.demand[0]), int(unit.demand[1])
        share = max(unit.milli / free_gpu, cpu / free_cpu, mem / free_mem, 1e-12)
        return (-unit.value / share, unit.index)

    return key


def guided(
    units: Sequence[Unit],
    states: dict[str, ClusterState],
    x: dict[tuple[int, str], float],
    *,
    mix: Mix | None,
    stop: Callable[[], bool] | None = None,
) -> Placed:
    """The LP-guided pass (see module docstring); leaves the placements applied; ``stop``
    as for :func:`~placer.solver.heuristics.run_rule`."""
    dense = density_key(units, states)
    share = {u.index: max((x.get((u.index, c), 0.0) for c in u.rank), default=0.0) for u in units}
    placed: Placed = []
    for unit in sorted(units, key=lambda u: (-round(share[u.index], 3), dense(u))):
        if stop is not None and stop():
            break
        order = sorted(
            (c for c in unit.rank if c in states),
            key=lambda c: (-round(x.get((unit.index, c), 0.0), 3), unit.rank[c], c),
        )
        choice = choose_and_pack("greedy", unit, states, order, mix=mix, explain=False)
        if choice.packed is not None and choice.cluster is not None:
            placed.append((unit, choice.cluster, choice.packed))
    return placed


def roomiest(
    units: Sequence[Unit],
    states: dict[str, ClusterState],
    *,
    mix: Mix | None,
    stop: Callable[[], bool] | None = None,
) -> Placed:
    """The roomiest-cluster pass (see module docstring); leaves the placements applied;
    ``stop`` as for :func:`~placer.solver.heuristics.run_rule`."""
    fleet = FleetCopies(states)
    placed: Placed = []
    for unit in sorted(units, key=ffd_key):
        if stop is not None and stop():
            break
        clusters = [c for c in unit.rank if c in states]
        if fleet.usable:
            sets = fleet.sets(unit).tolist()
            room = {c: sets[fleet.position[c]] for c in clusters}
        else:
            room = {
                c: min(states[c].copies_total(r.shape) // max(r.count, 1) for r in unit.runs)
                for c in clusters
            }
        order = sorted(
            (c for c in clusters if room[c] != 0), key=lambda c: (-room[c], unit.rank[c], c)
        )
        choice = choose_and_pack("greedy", unit, states, order, mix=mix, explain=False)
        if choice.packed is not None and choice.cluster is not None:
            placed.append((unit, choice.cluster, choice.packed))
    return placed


def hint_order(units: Sequence[Unit], states: dict[str, ClusterState]) -> tuple[str, ...]:
    """The hint passes in the order to run them: ``greedy`` first when every unit might fit
    (then a greedy answer placing every unit in its first choice ends the portfolio at the
    least cost); when the level's demand exceeds the free totals (GPU thousandths or a
    scalar resource) nothing can place every unit, so the passes go by expected value per
    cost: the LP-guided pass (its LP is the decision's bound anyway), ``karmada``, then
    ``greedy`` and the cluster-total rules."""
    demand_milli = sum(u.milli for u in units)
    free_milli = sum(s.totals()[1] for s in states.values())
    over = demand_milli > free_milli
    if not over and units:
        demand = sum((u.demand for u in units[1:]), units[0].demand.copy())
        free = sum(s.totals()[0] for s in states.values())
        over = bool((demand > free).any())
    if over:
        return ("lp", "roomiest", "karmada", "greedy", "worst-fit", "first-fit", "best-fit")
    if len(units) * len(states) > GREEDY_FIRST_PAIRS:
        return ("roomiest", "greedy", "lp", "karmada", "worst-fit", "first-fit", "best-fit")
    return PASSES


def run_portfolio(
    units: Sequence[Unit],
    states: dict[str, ClusterState],
    *,
    mix: Mix | None,
    clock: Clock,
    deadline: float,
    guide: Callable[[], ClassLP | None] | None = None,
    passes: Sequence[str] = PASSES,
    hard_deadline: float | None = None,
) -> Hints:
    """Run the passes (see module docstring); the states are left as they were. ``guide``
    gives the node-class LP (default: solved here), ``None`` when it is not to be used (the
    LP-guided pass is then skipped). ``hard_deadline``: where even the first pass stops
    (default: it runs whole)."""
    marks = {name: state.mark() for name, state in states.items()}
    hints = Hints(best=[], winner="", pass_seconds=0.0)
    best_value: tuple[int, int] | None = None

    def late() -> bool:
        return clock() > deadline

    def too_late() -> bool:
        return hard_deadline is not None and clock() > hard_deadline

    per_cost = 0.0  # seconds per unit of relative cost, the most any pass took so far
    for name in passes:
        started = clock()
        # the first pass runs until the level's own deadline (a complete answer, unless the
        # limit cannot afford one); the others stop at the portfolio's
        stop = late if best_value is not None else too_late
        if best_value is not None and started + per_cost * PASS_COST[name] > deadline:
            # the passes come by expected value per cost: the time left goes to the search
            hints.notes.append(f"portfolio stopped before {name} (time limit)")
            break
        if name == "lp":
            hints.guide = guide() if guide is not None else gpu_class_lp(states, units)
            # the LP is the decision's bound as well (and the search's stop): solved once
            # either way, so it does not count as the pass's own cost
            started = clock()
            if hints.guide is None:
                continue
            placed = guided(units, states, hints.guide.x, mix=mix, stop=stop)
        elif name == "roomiest":
            placed = roomiest(units, states, mix=mix, stop=stop)
        else:
            placed = run_rule(name, units, states, mix=mix, stop=stop)
        if stop is not None and stop():
            hints.notes.append(f"{name} stopped at the time limit")
        for state_name, state in states.items():
            state.undo(marks[state_name])
        took = clock() - started
        hints.pass_seconds = max(hints.pass_seconds, took)
        per_cost = max(per_cost, took / PASS_COST[name])
        value = value_of(placed)
        hints.values[name] = value[0]
        hints.seconds[name] = round(took, 4)
        if best_value is None or value > best_value:
            best_value, hints.best, hints.winner = value, placed, name
        if len(placed) == len(units) and value[1] == 0:
            break  # everything placed, each in its first choice: nothing can be better
        if name == "greedy" and len(units) == 1:
            break  # one unit: greedy's best-ranked cluster where it packs is the answer
    hints.notes.append(f"hint from {hints.winner}")
    return hints
