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
from ortools.linear_solver import linear_solver_pb2, pywraplp

__all__ = ["LinearProgram", "Solution"]

FloatArray = npt.NDArray[np.float64]
#: GLOP's "no bound".
INFINITY = float("inf")


class Solution:
    """An optimal LP solution: objective value and variable values."""

    def __init__(self, objective: float, values: FloatArray) -> None:
        self.objective = objective
        self.values = values


class LinearProgram:
    """``max c·v`` subject to rows ``lb ≤ a·v ≤ ub`` and variable bounds."""

    def __init__(self) -> None:
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
        if not self._model.variable:
            return Solution(0.0, np.zeros(0))
        request = linear_solver_pb2.MPModelRequest(
            model=self._model,
            solver_type=linear_solver_pb2.MPModelRequest.GLOP_LINEAR_PROGRAMMING,
        )
        response = linear_solver_pb2.MPSolutionResponse()
        pywraplp.Solver.SolveWithProto(request, response)
        if response.status != linear_solver_pb2.MPSOLVER_OPTIMAL:
            return None
        return Solution(response.objective_value, np.array(response.variable_value))
