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
* Elastic runs (:mod:`placer.solver.elastic`): a run ``r`` of an elastic component takes any
  count ``n_r ∈ [lo_r, hi_r]`` (its ``replicas`` and ``max_replicas``); ``lo_r`` is what the
  gang needs (its ``minMember`` share) and is the count in ``v_u`` and every constraint below;
  ``e_r = n_r − lo_r`` are its extra pods, each worth ``v_r`` (one pod's value).
* Decision variables: ``x_{u,c} ∈ {0, 1}`` (the master), the packer's pod-to-node map, and
  ``e_r``.

Objective
---------
Lexicographic: (1) priorities, strictly — level by level from the highest, each level solved
on what the levels above left, so a higher priority is never displaced by a lower one (a
decision taken in steps is closed by :mod:`placer.solver.priority_repair`: nothing it started
keeps out a waiting higher priority that fits in its place); (2) placed value
``Σ v_u x_{u,c}``; (3) preference ``-Σ ρ_{u,c} x_{u,c}``. (2) and (3) are one CP-SAT objective
``max Σ (v_u·S − ρ_{u,c}) x_{u,c}`` with ``S = 1 + Σ_u max_c ρ_{u,c}``, which
makes any value gain outweigh every preference term. Under queues
(:mod:`placer.solver.fairshare`) fair share's terms come between (1) and (2) — limits, in quota
before over quota, over-quota capacity by weight — and after them, still above (2), (1'')
**the queue's order**: with the key ``k_u = (−p_u, t_u, i_u, name_u)`` (creation or arrival
time ``t_u``, input position ``i_u``; :mod:`placer.queues.order`), no started unit ``s``
holds room where a waiting unit ``u`` of its queue with ``p_u = p_s`` and ``k_u < k_s`` packs
once ``s`` leaves (first in, first out among equals; BestEffortFIFO: a ``u`` that fits nowhere
holds nothing back). (1'') is not a CP-SAT term — ranking it above placed value by weights
would take coefficients growing as ``2^|U|`` — but each queue's units are offered in ``k``
order and :func:`placer.solver.order_repair.repair_order` closes the decision on it by swaps,
within a share of the time limit. Between (2) and (3) comes (3') **more
replicas of elastic runs**, ``max Σ_r v_r e_r``: on the capacity the decision left, each unit
with elastic runs (highest priority first) takes the largest counts that pack, in its cluster
or in another allowed cluster its policy ranks the same (preferred-cluster rank and cost: only
the pack/spread load order of (3) gives way) where it gets more; after priorities, fair share
(:mod:`placer.solver.fairshare` grows after its last tier, within the queues' limits, without
moving) and placed value, so an elastic job never keeps another workload out by growing.
Every solver, baselines and online mode included, decides at ``lo_r`` and then grows
(:func:`placer.solver.elastic.grow`: bisection per run, realised by the packer).

Why a decomposition
-------------------
A pod-to-node CP-SAT model is exact but does not scale: past a hundred nodes and a few
hundred gangs it struggles to find a first solution in seconds, and on one of the
benchmark's 1,213-node instances (:mod:`simulations.exact`) a minute of it placed fewer GPUs
than this solver's 1-s decision. (On 80-node instances it proves the optimum in seconds;
the benchmark uses that to check the bounds.) Cluster-total models scale but lie: aggregate
"8 GPUs free" may be 4 + 4 on two nodes, and realising cluster-level answers on nodes loses
GPUs. placer splits the problem and keeps every intermediate answer *realised* (each pod
on a node; the measurements behind these choices: ``simulations/README.md``, "Behind the
code's constants"):

1. **Node-class LP** (:mod:`placer.solver.classlp`): identical free nodes of a cluster form a
   class ``k``; ``x_{u,c} ∈ [0, 1]``, ``y_{s,c,k} ≥ 0`` pods of shape ``s`` on class ``k``;
   ``Σ_k y_{s,c,k} = Σ_{r: s(r)=s} n_r x_{u(r),c}``; per class and resource
   ``Σ_s a_s y ≤ f(k)``, GPU thousandths, idle devices, device and cpu/memory slot cuts
   (``Σ_s ⌊a_s/q⌋ y ≤ Σ_{n∈k} ⌊f_n/q⌋``) and shape cuts (pods that need at least an anchor
   shape ``s`` are at most the copies of ``s`` the nodes hold). Every row is a sum of
   per-node rows, so it is a relaxation (proof in the module): its optimum with the GPU
   objective is the bound ``class_lp_gpu``, and its solution guides the search. It is solved
   once, when the search first needs it, together with the other LP bounds — and only when
   their estimated cost (``LP_SECONDS_PER_PAIR`` per pair of a group of identical units and
   an allowed cluster) fits in ``LP_SHARE`` of the time limit; otherwise the decision goes
   without it (:mod:`placer.solver.decide`).
2. **Hint portfolio** (:mod:`placer.solver.portfolio`), complete node-realised answers:
   ``greedy`` first, then the **LP-guided** pass (units by decreasing LP share
   ``max_c x_{u,c}``, then most value per scarcest resource; clusters by decreasing
   ``x_{u,c}``), then the **roomiest-cluster** pass (units largest first, each into the
   cluster whose nodes hold the most complete copies of it — Karmada's node-by-node
   estimate — falling back to the next), then every other baseline exactly as its own
   decision runs it (:func:`placer.solver.heuristics.run_rule`), so with one priority level
   CP-SAT's answer is never below any baseline's when the passes fit in the portfolio's
   share. When the demand exceeds the free totals the LP-guided and roomiest passes and
   ``karmada`` go first; when it may fit but the level has more than
   ``GREEDY_FIRST_PAIRS`` (unit, cluster) pairs the roomiest pass goes before greedy
   (greedy's tries cost most at fleet scale). The portfolio ends at the first pass that
   does not fit in the first 30 % of the level's time (``PORTFOLIO_SHARE``; the rest is
   the search's); even the first pass stops at the level's deadline. The best answer is the
   hint.
3. **Master** (CP-SAT, small models only: at most ``SMALL_MODEL`` unit-cluster pairs) on
   node-aware aggregated capacity (:mod:`placer.solver.capacity`): ``Σ_c x_{u,c} ≤ 1``;
   ``x_{u,c} = 0`` when some run of ``u`` fits no node of ``c`` or more of its replicas than
   the nodes' free blocks hold; per eligible node set ``S`` and resource ``k``
   ``Σ_u D^S_{u,k} x_{u,c} ≤ Σ_{n∈S} f_{n,k}``, GPU thousandths, and slot and shape cuts.
   Full search from the hint, for at most ``MASTER_SHARE`` of the time left (it proves
   optimality on small instances well within it); its answer is
   realised cluster by cluster (:mod:`placer.solver.packer`); a unit ``u`` that does not pack
   after the units ``P`` packed before it in ``c`` adds the no-good
   ``Σ_{w∈P∪{u}} x_{w,c} ≤ |P|`` (or ``x_{u,c} = 0`` when ``u`` does not pack alone), up to
   ``MAX_ROUNDS`` rounds. At 400 units × 8 clusters the aggregate master neither proves nor
   improves within a second and its answers often do not pack, so large models skip it.
4. **Ruin and recreate** (:mod:`placer.solver.recreate`) until the deadline, from the best
   answer so far: take some units off one cluster — those on a few nodes that still have
   free GPUs, or just enough cheaper ones to make room for an unplaced unit, or a few at
   random — or *swap* across two clusters (a unit needing more cpu or memory per GPU than
   its cluster offers goes to one that offers more, whose lightest units come back in its
   place), or *exchange* pods within a cluster (a cpu-heavy pod on a node with an idle GPU
   trades places with a lighter pod of the same GPU need elsewhere, so the idle GPU gets
   cores); pack them and the unplaced units again in a randomised order, and keep the
   result when the value does not drop; it ends early when the placed GPUs reach an upper
   bound (the node-class LP's, else the capacity or demand) or gains stop coming. This
   repairs what no one- or two-unit move can: GPUs stranded by cpu-heavy pods, heavy units
   in clusters short of cpu, and big gangs kept out by small units.

The realiser packs a unit's pods largest first, each on the best-scoring node that fits:
best-fit in batch mode (least GPU, then cpu and memory, left), FGD's fragmentation score in
online mode (:mod:`placer.solver.fragmentation`; it targets pods arriving one by one; in a
batch it placed about as much as best-fit, at several times the cost), ``spread`` when the
policy asks for it.

Status: ``optimal`` when the master was proven optimal and realised completely (or a hint
placed every unit in its first-choice cluster, or a level of one unit went to the
best-ranked cluster where it packs, as greedy finds it, or nothing was placed and the
tightest GPU bound is below every unit's GPUs, so nothing can be), ``feasible`` when CP-SAT or the
search improved on the hint (and for baselines and online mode), ``fallback`` when the
portfolio's best hint was kept, ``trivial`` when there was nothing to decide.

Online mode places units one at a time in input order; with ``cpsat`` each step solves the
single-unit master exactly (the best-ranked cluster where the unit packs, ties broken by the
least GPU fragmentation added, FGD-style).

Bounds (benchmark-design B.5), in every decision's ``summary.bound``, all in GPUs and all
valid upper bounds on what any node-feasible placement of the decision places
(:mod:`placer.solver.bounds`): ``capacity_gpu`` (B0, always), ``cluster_lp_gpu`` (B2),
``node_lp_gpu`` (B3) and ``class_lp_gpu`` (the node-class LP) when the time limit affords
the LPs (above), and ``tightest_gpu`` (the least of those present); when every unit is
placed and the LPs were not solved, each LP bound is the placed GPUs. The LPs model elastic
runs at ``lo_r``: every bound adds, per unit ``u``, the most GPUs its extra pods can take in one
allowed cluster ``c`` (a placement less its extra pods is one they bound), ``max_{c∈A(u)}
min(Σ_r g_r · max(0, min(hi_r, copies_c(r)) − lo_r), free_c − G_u)`` with ``copies_c(r)``
the copies of run ``r``'s pod ``c``'s usable nodes hold one by one and ``free_c`` their free
GPU thousandths (:func:`placer.solver.elastic.elastic_slack`). In batch CP-SAT with one
priority level and a small master also ``cpsat_value``, the master's proven bound on placed
value (before any no-good cut; the value of the units at ``lo_r``).

Time: ``time_limit`` covers the whole decision, the LP bounds included (they are solved
before the search, so the search simply gets what is left). The search stops at the limit
minus ``SAFETY`` (2 %) minus a reserve for what follows it — the explanations, for the
number of units unplaced at that moment, and the Decision's assembly — measured per
(unplaced unit, cluster) pair and per pod (:mod:`placer.solver.decide`). The limit is
measured on the process's CPU clock (:mod:`placer.solver.clock`), so other processes on a
busy machine do not change how far the search goes; wall time is a safety net at
``WALL_SAFETY`` times the limit. Python's cyclic garbage collector is paused during a
decision (restored after): a full collection of a large process would land anywhere in the
limit.

Determinism: CP-SAT runs with ``CPSAT_WORKERS = 2`` threads and ``interleave_search`` (its
parallel search is reproducible for a fixed worker count), the caller's ``random_seed`` and a
**deterministic** time budget; every other loop is bounded by counts and breaks ties by input
and snapshot order (node signatures are numbered in order of appearance, never hashed).
Identical input and seed give identical decisions whenever the searches end by their work
bounds; when the time limit cuts a search short, the answer depends on how far it got.

Baselines (``SOLVERS``): ``greedy``, ``first-fit``, ``best-fit``, ``worst-fit``, ``karmada``
(:mod:`placer.solver.heuristics`), all realised by the same packer.

Public API: :func:`solve`, ``SOLVERS``, ``MODES``, :func:`verify`, :func:`charge`,
:func:`release`.
"""

from typing import TYPE_CHECKING

from placer._lazy import lazy_exports

#: every solver by name: CP-SAT and the baselines (:mod:`placer.solver.heuristics`).
SOLVERS = ("cpsat", "greedy", "first-fit", "best-fit", "worst-fit", "karmada")
#: how a decision takes its workloads: jointly, or one at a time in input order.
MODES = ("batch", "online")

__all__ = ["MODES", "SOLVERS", "charge", "release", "solve", "verify"]

if TYPE_CHECKING:
    from placer.solver.charging import charge, release
    from placer.solver.decide import solve
    from placer.solver.verifier import verify
else:
    __getattr__ = lazy_exports(
        __name__,
        __all__,
        ("placer.solver.decide", "placer.solver.charging", "placer.solver.verifier"),
    )
