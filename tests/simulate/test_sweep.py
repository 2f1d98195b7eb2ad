"""``placer simulate`` sweeps: seeds × loads × drained sets, in worker processes or on Ray, with
the figures of a serial run and of one ``placer simulate`` per point.

The figures compared are those of the deterministic solvers (greedy, karmada). CP-SAT's search
stops on the process's CPU time (placer/solver/clock.py), which varies from run to run, so its
figures differ a little between two serial runs too; a sweep with it is checked for completing
with every decision verified."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from placer.cli import main
from placer.cli._sweep import outcomes, seed_list, with_load

ROOT = Path(__file__).resolve().parents[2]
OPENB4 = str(ROOT / "clusters" / "openb-4.yaml")
DEMO = str(ROOT / "clusters" / "demo.yaml")
SPEC = "synthetic:gangs"
SWEEP = [
    "--snapshot",
    DEMO,
    "--workloads",
    SPEC,
    "--solver",
    "greedy,karmada",
    "--seed",
    "1,2",
    "--load",
    "0.6,1.2",
    "--drain-sweep",
    "none",
    "--drain-sweep",
    "central",
    "--time-limit",
    "1",
    "-o",
    "json",
]


def simulate(capsys: Any, *args: str) -> tuple[int, dict[str, Any], str]:
    code = main(["simulate", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else {}, err


def without_seconds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if not k.endswith("_s") and k != "seconds"} for r in rows]


def test_a_sweep_in_processes_equals_the_serial_one(capsys: Any) -> None:
    code, serial, _ = simulate(capsys, *SWEEP, "--jobs", "1")
    assert code == 0
    code, parallel, _ = simulate(capsys, *SWEEP, "--jobs", "2")
    assert code == 0
    assert serial["sweep"]["backend"] == "serial"
    assert parallel["sweep"]["backend"] == "processes"
    assert (serial["sweep"]["points"], serial["sweep"]["runs"]) == (8, 16)
    assert outcomes(parallel) == outcomes(serial)
    grid = [(p["seed"], p["load"], p["drained"]) for p in serial["points"]]
    assert grid[:3] == [(1, 0.6, []), (2, 0.6, []), (1, 1.2, [])]
    assert grid[-1] == (2, 1.2, ["central"])
    # the loads and drains took effect: more asked at 1.2, less placed with two clusters out
    by_point = {
        (p["seed"], p["load"], tuple(p["drained"])): p["comparison"] for p in serial["points"]
    }
    light, heavy = by_point[(1, 0.6, ())][0], by_point[(1, 1.2, ())][0]
    assert heavy["workloads"] > light["workloads"]
    drained = by_point[(1, 1.2, ("central",))][0]
    assert drained["gpus_placed"] < heavy["gpus_placed"]


def test_every_point_is_what_one_simulate_gives(capsys: Any) -> None:
    code, sweep, _ = simulate(capsys, *SWEEP, "--jobs", "2")
    assert code == 0
    point = sweep["points"][-1]  # seed 2, load 1.2, central drained
    code, single, _ = simulate(
        capsys,
        "--snapshot",
        DEMO,
        "--workloads",
        f"{SPEC}?load=1.2",
        "--solver",
        "greedy,karmada",
        "--seed",
        "2",
        "--drain",
        "central",
        "--time-limit",
        "1",
        "-o",
        "json",
    )
    assert code == 0
    assert without_seconds(point["comparison"]) == without_seconds(single["comparison"])


def test_a_sweep_with_cp_sat_in_processes(capsys: Any) -> None:
    args = ["--snapshot", DEMO, "--workloads", SPEC, "--solver", "cpsat,greedy", "--seed", "1,2"]
    code, sweep, _ = simulate(capsys, *args, "--load", "0.6,1.2", "-o", "json", "--jobs", "2")
    assert code == 0
    assert sweep["sweep"]["backend"] == "processes"
    rows = [row for point in sweep["points"] for row in point["comparison"]]
    assert [r["solver"] for r in rows] == ["cpsat", "greedy"] * 4
    assert all(r["verifier_problems"] == 0 for r in rows)
    for cpsat, greedy in zip(rows[::2], rows[1::2], strict=True):
        assert cpsat["workloads"] == greedy["workloads"]
        assert cpsat["gpus_placed"] >= greedy["gpus_placed"] - 1e-9


def test_a_stream_sweep_keeps_its_bounds(capsys: Any) -> None:
    args = [
        "--snapshot",
        OPENB4,
        "--workloads",
        "synthetic:gangs?count=20&time_scale=60",
        "--mode",
        "stream",
        "--solver",
        "greedy",
        "--seed",
        "3-4",
        "-o",
        "json",
    ]
    code, serial, _ = simulate(capsys, *args, "--jobs", "1")
    assert code == 0
    code, parallel, _ = simulate(capsys, *args, "--jobs", "2")
    assert code == 0
    assert outcomes(parallel) == outcomes(serial)
    assert all(p["comparison"][0]["gpu_time_of_bound_pct"] is not None for p in serial["points"])


def test_the_text_has_a_row_per_point_and_solver(capsys: Any) -> None:
    args = ["--snapshot", DEMO, "--workloads", SPEC, "--solver", "greedy,karmada"]
    code = main(["simulate", *args, "--seed", "1,2", "--jobs", "1"])
    out, _ = capsys.readouterr()
    assert code == 0
    assert out.startswith("Sweep: 2 points × 2 solver(s) = 4 runs")
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["1"], ["2"])]
    assert [(r[0], r[3]) for r in rows] == [
        ("1", "greedy"),
        ("1", "karmada"),
        ("2", "greedy"),
        ("2", "karmada"),
    ]


def test_bad_sweeps_are_refused(capsys: Any, tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n"
        "spec: {containers: [{name: c, image: busybox}]}\n"
    )
    base = ["--snapshot", DEMO, "--solver", "greedy"]
    code = main(["simulate", *base, "--workloads", str(manifest), "--load", "1,1.2"])
    assert code == 2
    assert "--load applies to trace and generator specs" in capsys.readouterr().err
    code = main(["simulate", *base, "--workloads", SPEC, "--drain-sweep", "mars", "--seed", "1,2"])
    assert code != 0
    assert "mars" in capsys.readouterr().err
    assert main(["simulate", *base, "--workloads", SPEC, "--seed", "5-1"]) == 2
    assert "bad seed range" in capsys.readouterr().err
    for bad in (["--jobs", "0"], ["--report", str(tmp_path / "r")]):
        code = main(["simulate", *base, "--workloads", SPEC, "--seed", "1,2", *bad])
        assert code == 2, bad
        capsys.readouterr()


def test_lists_and_specs() -> None:
    assert seed_list("1-3,7,2") == [1, 2, 3, 7]
    with pytest.raises(argparse.ArgumentTypeError):
        seed_list("x")
    assert with_load("synthetic:gangs?seed=1&load=0.5", 1.3) == "synthetic:gangs?seed=1&load=1.3"
    assert with_load("trace:openb:default", 1.1) == "trace:openb:default?load=1.1"


def test_a_sweep_on_ray_in_local_mode_equals_the_serial_one(capsys: Any) -> None:
    pytest.importorskip("ray")  # an optional extra: placer[ray]
    args = [*SWEEP[:8], "--seed", "1,2", "--time-limit", "1", "-o", "json"]
    code, serial, _ = simulate(capsys, *args, "--jobs", "1")
    assert code == 0
    code, on_ray, _ = simulate(capsys, *args, "--ray", "local")
    assert code == 0
    assert on_ray["sweep"]["backend"] == "ray"
    assert outcomes(on_ray) == outcomes(serial)


def test_ray_missing_is_a_clear_error(capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    code = main(["simulate", "--snapshot", DEMO, "--workloads", SPEC, "--solver", "greedy",
                 "--seed", "1,2", "--ray", "local"])  # fmt: skip
    assert code == 2
    assert "pip install 'placer[ray]'" in capsys.readouterr().err
