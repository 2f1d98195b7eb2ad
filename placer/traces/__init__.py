"""Public traces and workload generators: what ``placer simulate --workloads SPEC`` replays.

A spec names a trace or generator (``trace:openb:default``, ``trace:kalos``,
``synthetic:gangs?seed=7&count=500``; :mod:`~placer.traces.specs` lists them with their
parameters) and resolves to :class:`TimedWorkload` s — ordinary :class:`placer.model.Workload`
s with an arrival time and a run time. The trace files are carried as package data
(``placer/traces/data/``, with their sources, licenses and checksums), so specs work from an
installed wheel alone. The benchmarks (``simulations/``) build on these readers.

* :mod:`~placer.traces.specs` — parsing and resolving specs (:func:`resolve_workloads`);
* :mod:`~placer.traces.workloads` — :class:`TimedWorkload` and GPU-demand sums;
* :mod:`~placer.traces.openb` — Alibaba's openb nodes and tasks, and FGD's replay protocol;
* :mod:`~placer.traces.kalos` — the Acme Kalos LLM gangs;
* :mod:`~placer.traces.synthetic` — synthetic gangs of openb pod shapes and Kalos gang sizes;
* :mod:`~placer.traces.nodes` — trace machines as nodes (labels, units);
* :mod:`~placer.traces.datasets` — where the files are, and a CSV reader whose errors name the
  file, line and column.
"""

from placer.traces.specs import (
    SOURCES,
    WorkloadSpec,
    is_workload_spec,
    parse_spec,
    resolve_workloads,
)
from placer.traces.workloads import TimedWorkload

__all__ = [
    "SOURCES",
    "TimedWorkload",
    "WorkloadSpec",
    "is_workload_spec",
    "parse_spec",
    "resolve_workloads",
]
