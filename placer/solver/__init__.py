"""The placement solver: which cluster each workload goes to, proven down to the node.

Problem
=======
Given decomposed workloads and the node-level free capacity of a fleet, choose at most one
cluster per *unit* — a workload, or all workloads sharing a ``placer.dev/group`` value — such
that every pod of the unit has a node there with room for it, maximising placed value.

Symbols
-------
* ``U`` units; unit ``u`` has pod runs ``r`` (a component instance: ``n_r`` identical pods of
  scalar demand ``a_r ∈ ℕ^K`` — cpu, memory, pods, extended resources — whole GPUs ``g_r`` and
  a GPU share ``m_r`` in thousandths of one device), a priority ``p_u`` and a value
  ``v_u = 64·⌈G_u/10⌉ + ⌈cpu_u⌉ + pods_u`` with ``G_u`` its GPU thousandths (GPU-weighted:
  one GPU outweighs a hundred cores, so an 8-GPU gang is never traded for eight CPU pods).
* ``C`` clusters; ``A(u) ⊆ C`` the clusters statically allowed for ``u`` (reachable, policy
  cluster selector, pin, cluster taints), with a preference rank ``ρ_{u,c} ∈ ℕ`` (policy's
  preferred-cluster order, then cost weight, then pack — fullest cluster first — or spread).
* Nodes ``n ∈ N_c`` with free vector ``f_n ∈ ℕ^K`` and GPU devices ``d`` with free thousandths
  ``φ_{n,d} ∈ [0, 1000]``; ``E_r ⊆ N_c`` the nodes run ``r`` may use (selector, affinity,
  taints, cordon, readiness).
* Decision variables: ``x_{u,c} ∈ {0, 1}`` (the master), and the packer's pod-to-node map.

Objective
---------
Lexicographic: (1) priorities, strictly — level by level from the highest, each level solved
on what the levels above left, so a higher priority is never displaced by a lower one;
(2) placed value ``Σ v_u x_{u,c}``; (3) preference ``-Σ ρ_{u,c} x_{u,c}``. (2) and (3) are one
CP-SAT objective ``max Σ (v_u·S − ρ_{u,c}) x_{u,c}`` with ``S = 1 + Σ_u max_c ρ_{u,c}``, which
makes any value gain outweigh every preference term.

Why a decomposition
-------------------
A pod-to-node CP-SAT model is exact but does not scale: an exploratory run found no first
solution in 5 s at 122 nodes × 200 gangs (benchmark-design B.3). Cluster-total models scale
but lie: aggregate "8 GPUs free" may be 4 + 4 on two nodes, and realising cluster-level
answers on nodes lost 9–11 % of GPUs in the same experiments. placer splits the problem:

1. **Master** (CP-SAT, per priority level) on node-aware aggregated capacity
   (:mod:`placer.solver.capacity`): ``Σ_c x_{u,c} ≤ 1``; ``x_{u,c} = 0`` when some run of
   ``u`` fits no node of ``c`` or more of its replicas than the nodes' free blocks hold; for
   each distinct eligible node set ``S`` and resource ``k``: ``Σ_u D^S_{u,k} x_{u,c} ≤ Σ_{n∈S}
   f_{n,k}`` and the same for GPU thousandths; and **slot cuts** that see node and device
   boundaries: for a threshold ``q``, ``Σ_u Σ_r n_r ⌊a_r/q⌋ x_{u,c} ≤ Σ_n ⌊f_n/q⌋`` for
   whole GPUs (every pod size), cpu and memory (the largest pod sizes), for shared devices
   ``Σ (g_r + [m_r > t]) n_r x ≤ #{devices with φ > t}`` for ``t ≥ 500``, and **shape cuts**:
   pods that need at least shape ``s`` in every resource each take one of the
   ``Σ_n copies_n(s)`` copies of ``s`` the nodes hold. All rows are valid for any
   node-feasible placement, so the master's LP relaxation is the bound B3.
2. **Realiser** (:mod:`placer.solver.packer`): per cluster, units largest first, each packed
   all-or-nothing on nodes; node choice by least GPU fragmentation added for the decision's
   pod mix (FGD, :mod:`placer.solver.fragmentation`), per-device GPU accounting.
3. **Cuts back to the master**: a unit ``u`` that does not pack after the units ``P`` packed
   before it in ``c`` adds the no-good ``Σ_{w∈P∪{u}} x_{w,c} ≤ |P|`` (or ``x_{u,c} = 0`` when
   ``u`` does not pack alone); unplaced units are then offered to the other clusters (repair)
   and everything left tries to fit anywhere (fill).

How the parts run, per priority level:

* **Hint and fallback**: node-aware greedy passes — largest first in preference order (the
  ``greedy`` baseline), most value per scarce resource first (with cheap best-fit node scoring,
  then with fragmentation scoring), arrival order with Karmada's cluster choice, arrival order
  into the cluster with most room — as many as the time limit allows; the best realised answer
  is the master's hint and the fallback, so CP-SAT's answer is never worse than the first.
* **Small masters** (at most ``SMALL_MODEL`` variables): the global master with CP-SAT's full
  search (which proves optimality), realisation and cuts, up to ``MAX_ROUNDS`` rounds.
* **Large masters** are not solved globally — at 400 units × 8 clusters CP-SAT neither proves
  nor improves within a second, and the aggregate answer often does not pack. Instead two
  node-realised neighbourhood searches improve the hint: **ejection** (an unplaced unit takes
  the nodes of a lower-value placed unit, which then tries every cluster again) and
  **per-cluster masters** (for one cluster, the units on it plus the unplaced ones it may take
  form a single-cluster CP-SAT master with the rows above, asked for more value; its answer is
  realised incrementally — dropped units leave, added units are packed — or by repacking the
  whole cluster hardest pods first, and a failure adds a no-good). ``MAX_SWEEPS`` sweeps over
  the clusters, most free GPU first.

Status: ``optimal`` when the master was proven optimal and realised completely (or greedy
placed every unit in its first-choice cluster), ``feasible`` when a CP-SAT answer was kept
without proof (and for baselines and online mode), ``fallback`` when the greedy answer was
better, ``trivial`` when there was nothing to decide.

Online mode places units one at a time in input order; with ``cpsat`` each step solves the
single-unit master exactly (the best-ranked cluster where the unit packs, ties broken by the
least GPU fragmentation added, FGD-style, :mod:`placer.solver.fragmentation`).

Bounds (benchmark-design B.5), in every decision's ``summary.bound``: ``capacity_gpu`` (B0),
``cluster_lp_gpu`` (B2, GLOP) and ``node_lp_gpu`` (B3, GLOP), all in GPUs; in batch CP-SAT
with one priority level and a small master also ``cpsat_value``, the master's proven bound on
placed value (before any no-good cut).

Determinism: the global master runs CP-SAT with ``CPSAT_WORKERS = 2`` threads and
``interleave_search`` (its parallel search is reproducible for a fixed worker count), the
per-cluster masters with one worker; every CP-SAT call uses the caller's ``random_seed`` and
stops on **deterministic** time (``DETERMINISTIC_PER_SECOND`` units per second of the limit,
at most ``MASTER_DETERMINISTIC_CAP`` / ``SUB_DETERMINISTIC_TIME``), every search loop is
bounded by counts, and all heuristics break ties by input and snapshot order. The time limit
is measured on the process's CPU clock (:mod:`placer.solver.clock`), so other processes on a
busy machine do not change how far the search goes; wall time is a safety net at
``WALL_SAFETY`` times the limit. Identical input and seed give identical decisions whenever the
searches end by their work bounds; when the time limit (or the safety net) cuts a search short,
the answer depends on how far it got — on an idle machine, on how fast it is.

Baselines (``SOLVERS``): ``greedy``, ``first-fit``, ``best-fit``, ``worst-fit``, ``karmada``
(:mod:`placer.solver.heuristics`), all realised by the same packer.

Public API: :func:`solve`, ``SOLVERS``, ``MODES``, :func:`verify`, :func:`charge`,
:func:`release`.
"""

from placer.solver.decide import MODES, SOLVERS, solve
from placer.solver.ledger import charge, release
from placer.solver.verify import verify

__all__ = ["MODES", "SOLVERS", "charge", "release", "solve", "verify"]
