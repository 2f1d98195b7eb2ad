"""The heavy packages export lazily: a command's parser loads no solver, and every export is
the object its submodule defines, whatever was imported before."""

from __future__ import annotations

import subprocess
import sys

import placer.dispatch
import placer.simulate
import placer.solver
import placer.solver.decide
import placer.solver.verifier
from placer.solver.verifier import verify as verify_function


def test_exports_are_the_submodules_objects() -> None:
    for package in (placer.solver, placer.dispatch, placer.simulate):
        for name in package.__all__:
            value = getattr(package, name)
            assert not isinstance(value, type(sys)), f"{package.__name__}.{name} is a module"
    assert placer.solver.verify is verify_function
    assert placer.solver.SOLVERS == placer.solver.decide.SOLVERS


def test_building_the_cli_parser_loads_no_solver() -> None:
    code = (
        "import sys, placer.cli; placer.cli.build_parser(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('ortools', 'pandas')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
