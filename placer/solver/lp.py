"""A small sparse LP builder solved with GLOP through OR-Tools' model protocol buffer.

The bounds build LPs with thousands of variables and rows on every decision; setting
coefficients one by one through ``pywraplp`` costs more than solving. Rows here are added as
whole index and coefficient lists (one protocol-buffer ``extend`` each), and the model is
solved with ``pywraplp.Solver.SolveWithProto``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["LinearProgram", "Solution"]

FloatArray = npt.NDArray[np.float64]
#: GLOP's "no bound".
INFINITY = float("inf")
#: one ``MPModelProto.variable`` entry on the wire: tag and length, then lower bound, upper
#: bound and objective coefficient, each a tag and a little-endian double.
_VARIABLE = np.dtype(
    [
        ("tag", "u1"),
        ("size", "u1"),
        ("lower_tag", "u1"),
        ("lower", "<f8"),
        ("upper_tag", "u1"),
        ("upper", "<f8"),
        ("objective_tag", "u1"),
        ("objective", "<f8"),
    ]
)


class Solution:
    """An optimal LP solution: objective value and variable values."""

    def __init__(self, objective: float, values: FloatArray) -> None:
        self.objective = objective
        self.values = values


class LinearProgram:
    """``max c·v`` subject to rows ``lb ≤ a·v ≤ ub`` and variable bounds."""

    def __init__(self) -> None:
        # imported here: the protocol buffers (and protobuf itself) cost a plan or submit
        # command ~10 ms, and a decision whose every unit is placed builds no LP
        from ortools.linear_solver import linear_solver_pb2

        self._model = linear_solver_pb2.MPModelProto()
        self._model.maximize = True

    @property
    def variables(self) -> int:
        return len(self._model.variable)

    @property
    def rows(self) -> int:
        return len(self._model.constraint)

    def var(self, upper: float, objective: float = 0.0) -> int:
        """A new variable in ``[0, upper]``; returns its index."""
        variable = self._model.variable.add()
        variable.lower_bound = 0.0
        variable.upper_bound = upper
        variable.objective_coefficient = objective
        return len(self._model.variable) - 1

    def vars(self, upper: FloatArray, objective: FloatArray) -> int:
        """New variables in ``[0, upper[i]]`` with objective ``objective[i]``, in one step;
        returns the index of the first (the others follow in order).

        Written as the protocol buffer's wire format (each a ``variable`` entry with its
        three double fields) and merged in: the same model as :meth:`var` one at a time, at a
        fraction of the cost for tens of thousands of variables."""
        first = len(self._model.variable)
        entries = np.zeros(len(upper), dtype=_VARIABLE)
        entries["tag"] = 0x1A  # field 3 (variable), length-delimited
        entries["size"] = _VARIABLE.itemsize - 2
        entries["lower_tag"] = 0x09  # field 1 (lower_bound), 64-bit
        entries["upper_tag"] = 0x11  # field 2 (upper_bound), 64-bit
        entries["objective_tag"] = 0x19  # field 3 (objective_coefficient), 64-bit
        entries["upper"] = upper
        entries["objective"] = objective
        self._model.MergeFromString(entries.tobytes())
        return first

    def set_objective(self, index: int, coefficient: float) -> None:
        self._model.variable[index].objective_coefficient = coefficient

    def row(
        self,
        indices: Sequence[int],
        coefficients: Sequence[float],
        *,
        lower: float = -INFINITY,
        upper: float = INFINITY,
    ) -> None:
        """Add ``lower ≤ Σ coefficients[i] · v[indices[i]] ≤ upper``."""
        constraint = self._model.constraint.add()
        constraint.var_index.extend(indices)
        constraint.coefficient.extend(coefficients)
        constraint.lower_bound = lower
        constraint.upper_bound = upper

    def solve(self) -> Solution | None:
        """The optimum, or ``None`` if GLOP found none (infeasible, unbounded, error)."""
        from ortools.linear_solver import linear_solver_pb2

        if not self._model.variable:
            return Solution(0.0, np.zeros(0))
        request = linear_solver_pb2.MPModelRequest(
            model=self._model,
            solver_type=linear_solver_pb2.MPModelRequest.GLOP_LINEAR_PROGRAMMING,
        )
        response = linear_solver_pb2.MPSolutionResponse()
        # imported here: loading GLOP's wrapper costs a tenth of a second, and a decision
        # whose every unit is placed solves no LP (``DecisionBounds.report``)
        from ortools.linear_solver import pywraplp

        pywraplp.Solver.SolveWithProto(request, response)
        if response.status != linear_solver_pb2.MPSOLVER_OPTIMAL:
            return None
        return Solution(response.objective_value, np.array(response.variable_value))
