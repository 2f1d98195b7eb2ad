"""The dispatched copy of an elastic workload carries the replica counts the decision chose.

An elastic component (:mod:`placer.definitions.elastic`) is placed at some count in its range;
the copy applied to the member gets that count through the definition's ``replicasPath``
(:func:`placer.definitions.elastic.write_replicas`, no framework code), so the framework starts
exactly the pods the decision found room for. Components at their declared count are left as
written. Read back, a dispatched copy's declared counts are what runs
(:func:`running_workload`): what its queue is charged for, not the minimum.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from placer.definitions.decompose import Decomposition
from placer.definitions.elastic import write_replicas
from placer.model import Placement, Workload

__all__ = ["chosen_replicas", "running_workload", "with_chosen_replicas"]


def running_workload(copy: Decomposition, workload: Workload | None = None) -> Workload:
    """The workload of a dispatched ``copy`` (its decomposition, read from the member) with each
    elastic component at the count the copy carries — the count its decision chose, or its
    growth wrote since (within its range) — rather than at its minimum. ``workload``: the
    workload to give those counts (default: the copy's own; the controller passes the hub
    object's)."""
    workload = copy.workload if workload is None else workload
    counts = {
        (c.name, c.instance): min(max(c.replicas, c.elastic[0]), c.elastic[1])
        for c in copy.components
        if c.elastic is not None
    }
    if not counts:
        return workload
    components = tuple(
        replace(c, replicas=max(c.replicas, counts[(c.name, c.instance)]))
        if (c.name, c.instance) in counts and c.elastic
        else c
        for c in workload.components
    )
    return replace(workload, components=components)


def chosen_replicas(
    decomposition: Decomposition, placement: Placement
) -> dict[tuple[str, str], int]:
    """``(component, instance) -> count`` of the elastic components whose count in
    ``placement`` differs from the object's declared one."""
    placed = Counter((p.component, p.instance) for p in placement.pods)
    return {
        (c.name, c.instance): placed[(c.name, c.instance)]
        for c in decomposition.components
        if c.elastic is not None and placed[(c.name, c.instance)] != c.replicas
    }


def with_chosen_replicas(
    body: Mapping[str, Any], decomposition: Decomposition, placement: Placement
) -> dict[str, Any]:
    """``body`` with the chosen counts written (a copy; ``body`` itself when none differs)."""
    counts = chosen_replicas(decomposition, placement)
    if not counts:
        return dict(body)
    where = f"{decomposition.ref.kind}/{decomposition.ref.name}: {decomposition.definition.label}"
    return write_replicas(body, decomposition.definition, counts, where=where)
