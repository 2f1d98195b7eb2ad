"""Simulation: where would these workloads go, and how good is that — on capacity snapshots.

``placer simulate`` and the benchmark suite (``simulations/bench_*.py``) run the real solver
(:func:`placer.solver.solve`) on a fleet snapshot and timed workloads, in one of three modes
(``batch``, ``online``, ``stream``: :mod:`placer.simulate.engine`), and judge the outcome with
the metrics of :mod:`placer.simulate.metrics` (placed GPU against the tightest bound, gang
admission by size, fragmentation, decision time, stream waits and allocation over time).
:mod:`placer.simulate.export` turns runs into the JSON document the CLI prints and the report
(:mod:`placer.simulate.report`) draws from, so text, JSON and report always say the same thing.

Why a simulator of its own rather than a replay of events through the controller: the
questions are what-ifs ("cluster B drained", "is CP-SAT worth it over first-fit") and
benchmarks against published numbers, which need the same input decided by several solvers
side by side, deterministically, without clusters and in seconds. Every decision still goes
through the same ``solve``, the independent verifier and the same ``charge``/``release``
bookkeeping a live ledger uses.

Pure: no I/O, no globals; progress is reported through an optional callback. The one
exception is :mod:`placer.simulate.report`, which writes the ``--report`` files (and imports
matplotlib only when asked).
"""

from typing import TYPE_CHECKING

from placer._lazy import lazy_exports

#: batch (one joint decision), online (one at a time), stream (arrivals and departures).
MODES = ("batch", "online", "stream")

__all__ = [
    "MODES",
    "DecisionRecord",
    "Outcome",
    "Progress",
    "Run",
    "Sample",
    "Settings",
    "Summary",
    "Timed",
    "cluster_usage",
    "gpu_bound",
    "simulate",
    "summarize",
]

if TYPE_CHECKING:
    from placer.simulate.engine import (
        DecisionRecord,
        Outcome,
        Progress,
        Run,
        Sample,
        Settings,
        Timed,
        gpu_bound,
        simulate,
    )
    from placer.simulate.metrics import Summary, cluster_usage, summarize
else:
    __getattr__ = lazy_exports(
        __name__, __all__, ("placer.simulate.engine", "placer.simulate.metrics")
    )
