"""The heavy packages export lazily: a command's parser loads no solver, and every export is
the object its submodule defines, whatever was imported before."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import placer.dispatch
import placer.simulate
import placer.solver
import placer.solver.decide
import placer.solver.verifier
from placer.solver.verifier import verify as verify_function

REPO = Path(__file__).resolve().parents[2]


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


def loaded_after(code: str) -> list[str]:
    """The top-level packages among numpy, ortools, pandas and kubernetes that a fresh
    interpreter has loaded after running ``code``."""
    probe = (
        f"{code}\nimport json, sys\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules}"
        " & {'numpy', 'ortools', 'pandas', 'kubernetes'})))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    names: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return names


def test_kube_and_fleet_export_lazily() -> None:
    import placer.fleet
    import placer.fleet.config
    import placer.kube
    import placer.kube.client

    for package in (placer.kube, placer.fleet):
        for name in package.__all__:
            value = getattr(package, name)
            assert not isinstance(value, type(sys)), f"{package.__name__}.{name} is a module"
    assert placer.kube.KubeClient is placer.kube.client.KubeClient
    assert placer.fleet.load_fleet_file is placer.fleet.config.load_fleet_file
    # reading a fleet file needs no Kubernetes client
    assert loaded_after("import placer.fleet; placer.fleet.load_fleet_file") == []


def test_the_solver_loads_cp_sat_without_pandas() -> None:
    code = (
        "from placer.solver.master import cp_model\n"
        "model = cp_model.CpModel(); x = model.new_int_var(0, 3, 'x'); model.maximize(x)\n"
        "solver = cp_model.CpSolver(); assert solver.solve(model) == cp_model.OPTIMAL\n"
        "assert solver.value(x) == 3"
    )
    assert "pandas" not in loaded_after(code)
    assert "ortools" in loaded_after(code)


def test_cp_sat_pandas_helpers_still_work() -> None:
    pytest.importorskip("pandas")
    code = (
        "from placer.solver.master import cp_model\n"
        "import pandas\n"
        "model = cp_model.CpModel()\n"
        "xs = model.new_int_var_series('x', pandas.Index(['a', 'b']), 0, 2)\n"
        "assert isinstance(xs, pandas.Series) and list(xs.index) == ['a', 'b']\n"
        "model.maximize(xs.sum()); solver = cp_model.CpSolver()\n"
        "assert solver.solve(model) == cp_model.OPTIMAL\n"
        "assert list(solver.values(xs)) == [2, 2]"
    )
    assert "pandas" in loaded_after(code)


def test_a_command_loads_what_it_needs() -> None:
    # `placer get --help` builds the parser of `get` alone: no solver, no client
    code = (
        "import contextlib, io, placer.cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert placer.cli.main(['get', '--help']) == 0"
    )
    assert loaded_after(code) == []


def test_inventory_exports_lazily() -> None:
    import placer.inventory
    import placer.inventory.describe

    for name in placer.inventory.__all__:
        value = getattr(placer.inventory, name)
        assert not isinstance(value, type(sys)), f"placer.inventory.{name} is a module"
    assert placer.inventory.live_view is placer.inventory.describe.live_view


def test_plan_on_a_snapshot_loads_no_client_protobuf_or_dispatch() -> None:
    """``placer plan --snapshot`` decides with CP-SAT; it loads neither a Kubernetes client
    nor protobuf (an LP is built only when a unit is left unplaced) nor the dispatch steps."""
    code = (
        "import contextlib, io, sys, placer.cli\n"
        "out, err = io.StringIO(), io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
        "    assert placer.cli.main(['plan', '-f', 'examples/jobset-demo.yaml',"
        " '--snapshot', 'clusters/demo.yaml']) == 0\n"
        "print(sorted(m for m in ('google.protobuf', 'urllib3', 'placer.dispatch.handoff',"
        " 'placer.dispatch.claims') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert loaded_after("import placer.inventory; placer.inventory.list_workloads") == []
