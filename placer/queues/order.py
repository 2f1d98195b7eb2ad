"""The order of a queue: which of its waiting workloads comes first.

Kueue's ClusterQueue and KAI Scheduler's queues order their pending workloads by priority,
then creation time (Kueue's ``queueingStrategy`` ``StrictFIFO`` and ``BestEffortFIFO`` share
this order; they differ in whether a head that cannot be admitted blocks the rest). placer's
key for workload ``w``, compared as a tuple, smallest first:

    key(w) = (−p_w, t_w, i_w, name_w)

* ``p_w``: its priority under the queues (:func:`placer.queues.membership`);
* ``t_w``: its creation time — ``metadata.creationTimestamp`` of a hub or file object
  (:attr:`placer.model.Workload.created`), the arrival time in a simulated stream — with
  ``+∞`` when it has none (an object not created yet comes after every created one);
* ``i_w``: its position in the input (the order of the documents in the files and of the
  arguments), so that objects without timestamps keep the order they were given in;
* ``name_w``: ``namespace/name``, so that equal keys never depend on anything else.

:mod:`placer.solver.fairshare` offers each queue's workloads in this order and keeps it in the
decision (BestEffortFIFO: docs/queues.md).
"""

from __future__ import annotations

import math

from placer.model import Workload

__all__ = ["OrderKey", "order_key"]

#: ``(−priority, creation time, input position, namespace/name)``.
OrderKey = tuple[int, float, int, str]


def order_key(
    workload: Workload, priority: int, position: int, created: float | None = None
) -> OrderKey:
    """``key(w)`` of the module docstring. ``priority``: the workload's under the queues;
    ``position``: its index in the input; ``created``: its creation or arrival time when the
    caller knows better than ``workload.created`` (a simulated stream's arrival)."""
    moment = created if created is not None else workload.created
    ref = workload.ref
    return (
        -priority,
        moment if moment is not None else math.inf,
        position,
        f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name,
    )
