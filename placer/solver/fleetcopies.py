"""The decision shapes' copies in every cluster side by side, for choices across clusters.

Each :class:`~placer.solver.state.ClusterState` keeps, for every pod shape of the decision,
how many pods of it its usable nodes hold, node by node (:class:`~placer.solver.state.
CopiesTable`). :class:`FleetCopies` lays those sums out as one ``[clusters, shapes]``
matrix — each state's totals become a row view of it, so they stay current as the states
change — and answers, for a unit and every cluster at once, how many complete copies of the
unit the nodes hold (Karmada's node-by-node estimate, as an upper bound for units of several
pod shapes). With it a pass over thousands of units and dozens of clusters looks at the
clusters in one array operation per unit instead of one call per cluster.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from placer.solver.problem import Unit
from placer.solver.state import ClusterState, CopiesTable, IntArray

__all__ = ["FleetCopies"]


class FleetCopies:
    """The copies tables of ``states`` as one matrix (see the module docstring)."""

    def __init__(self, states: Mapping[str, ClusterState]) -> None:
        self.names = list(states)
        #: cluster name -> row.
        self.position = {name: row for row, name in enumerate(self.names)}
        self.states = [states[name] for name in self.names]
        tables = [state.table for state in self.states]
        self.tables: list[CopiesTable] | None = None
        if tables and all(t is not None for t in tables):
            ready = [t for t in tables if t is not None]
            if all(t.index == ready[0].index for t in ready):
                self.tables = ready
                shared = ready[0].fleet
                if shared is not None and all(
                    t.fleet is not None and t.fleet[0] is shared[0] and t.fleet[1] == row
                    for row, t in enumerate(ready)
                ):
                    self.matrix: IntArray = shared[0]  # these states side by side already
                else:
                    for state in self.states:
                        state.tracked()  # up to date before the totals move into the matrix
                    self.matrix = np.stack([t.total for t in ready])
                    for row, table in enumerate(ready):
                        table.total = self.matrix[row]  # a view: refreshes write here
                        table.fleet = (self.matrix, row)

    @property
    def usable(self) -> bool:
        """Whether every state tracks the same shapes (else nothing here applies)."""
        return self.tables is not None

    def sets(self, unit: Unit) -> IntArray:
        """Per cluster: complete copies of ``unit`` its nodes hold, each node alone
        (``min_r copies(s_r) // n_r``; -1 for a pod shape the states do not track)."""
        assert self.tables is not None
        for state in self.states:
            if state.table is not None and state.table.dirty:
                state.tracked()
        index = self.tables[0].index
        result: IntArray | None = None
        for run in unit.runs:
            column = index.get(id(run.shape))
            if column is None:
                return np.full(len(self.names), -1, dtype=np.int64)
            sets = self.matrix[:, column] // max(run.count, 1)
            result = sets if result is None else np.minimum(result, sets)
        return result if result is not None else np.zeros(len(self.names), dtype=np.int64)
