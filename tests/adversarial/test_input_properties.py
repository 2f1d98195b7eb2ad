"""Properties over hostile input (issue 12, item 7): quantities, manifests, snapshots, fleet
files and command-line numbers.

No input may produce a traceback, a hang, or the silent acceptance of an invalid value: every
one is either accepted (and then valid) or refused with placer's own error naming where.
"""

from __future__ import annotations

import argparse
import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from placer.cli import build_parser, main
from placer.cli._types import MAX_SECONDS
from placer.errors import FleetConfigError, PlacerError, SnapshotError
from placer.fleet import load_fleet_file
from placer.quantity import (
    MAX_AMOUNT,
    is_extended_resource,
    parse_quantity,
    resource_amount,
    to_canonical,
)
from placer.snapshot import fleet_from_dict, loads_snapshot

REPO = Path(__file__).resolve().parents[2]
DEMO = str(REPO / "clusters" / "demo.yaml")

# --------------------------------------------------------------------------------------------
# quantities

suffixes = st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "Ei", "n", "u", "E"])
numbers = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.decimals(allow_nan=False, allow_infinity=False, places=4).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
quantity_texts = st.one_of(
    st.tuples(numbers, suffixes).map("".join),
    st.tuples(st.integers(0, 999), st.integers(-(10**12), 10**12)).map(lambda p: f"{p[0]}e{p[1]}"),
    st.text(max_size=12),
)
quantities: st.SearchStrategy[Any] = st.one_of(
    quantity_texts,
    st.integers(-(10**40), 10**40),
    st.floats(),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
)
resources = st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu", "rdma/ib", "hugepages-2Mi"])


@given(resource=resources, value=quantities)
def test_a_quantity_is_read_or_refused_with_a_value_error(resource: str, value: Any) -> None:
    try:
        amount = to_canonical(resource, value)
    except ValueError as exc:
        assert str(exc)  # says what is wrong
    else:
        assert isinstance(amount, int) and abs(amount) <= MAX_AMOUNT
    try:
        amount = resource_amount(resource, value)
    except ValueError:
        return
    assert 0 <= amount <= MAX_AMOUNT
    if is_extended_resource(resource):
        assert parse_quantity(value).denominator == 1  # never rounded up silently


@given(value=st.fractions(min_value=Fraction(-100), max_value=Fraction(100), max_denominator=8))
def test_negative_and_fractional_extended_amounts_are_refused(value: Fraction) -> None:
    text = str(float(value))
    if value < 0 or value.denominator != 1:
        with pytest.raises(ValueError):
            resource_amount("nvidia.com/gpu", text)
    else:
        assert resource_amount("nvidia.com/gpu", text) == int(value)


# --------------------------------------------------------------------------------------------
# manifests through `placer plan`


def _job(name: str, resources: dict[str, Any], parallelism: Any, labels: dict[str, Any]) -> Any:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "c", "resources": resources}],
                }
            },
        },
    }


resource_maps = st.dictionaries(resources, quantities, max_size=3)
jobs = st.builds(
    _job,
    name=st.sampled_from(["a", "b"]),
    resources=st.fixed_dictionaries({"requests": resource_maps, "limits": resource_maps}),
    parallelism=st.one_of(st.integers(-5, 10**12), st.text(max_size=3), st.none()),
    labels=st.dictionaries(
        st.sampled_from(["placer.dev/priority", "app"]),
        st.one_of(st.integers(-(10**30), 10**30).map(str), st.text(max_size=5)),
        max_size=2,
    ),
)


def _valid_resources(job: Any) -> bool:
    res = job["spec"]["template"]["spec"]["containers"][0]["resources"]
    try:
        requests = {k: resource_amount(k, v) for k, v in res["requests"].items()}
        limits = {k: resource_amount(k, v) for k, v in res["limits"].items()}
    except ValueError:
        return False
    for name, request in requests.items():
        if name in limits and request > limits[name]:
            return False
    return True


@pytest.fixture(scope="module")
def manifest_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("manifests")


@given(documents=st.lists(jobs, min_size=1, max_size=2))
def test_plan_never_crashes_nor_accepts_invalid_resources(
    documents: list[Any], manifest_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = manifest_dir / "jobs.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    code = main(["plan", "-f", str(path), "--snapshot", DEMO, "--time-limit", "0.2", "-o", "json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "Traceback" not in out
    assert code in (0, 1, 2, 4), (code, err)
    decided = code == 1 and out.strip().startswith("{")  # 1 also means: something unplaced
    if decided:
        assert json.loads(out)["placements"] is not None
    elif code != 0:
        assert err.startswith("error:") or "\nerror:" in err, err
    if not all(_valid_resources(d) for d in documents):
        assert code != 0 and "error:" in err, "an invalid request was accepted"


def test_the_same_object_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    job = _job("twice", {"limits": {"nvidia.com/gpu": "1"}}, 1, {})
    path = tmp_path / "twice.yaml"
    path.write_text(yaml.safe_dump_all([job, job]))
    code = main(["plan", "-f", str(path), "--snapshot", DEMO])
    err = capsys.readouterr().err
    assert code != 0
    assert "Job/default/twice is given twice" in err


# --------------------------------------------------------------------------------------------
# snapshots and fleet files

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.floats(), st.text(max_size=6)
)
snapshot_groups = st.fixed_dictionaries(
    {},
    optional={
        "namePrefix": st.one_of(st.just("n"), scalars),
        "names": st.one_of(st.lists(st.sampled_from(["a", "b", ""]), max_size=3), scalars),
        "count": st.one_of(st.integers(-3, 10**9), scalars),
        "allocatable": st.one_of(resource_maps, scalars),
        "requested": st.one_of(resource_maps, scalars),
        "labels": st.one_of(st.dictionaries(st.text(max_size=3), scalars, max_size=2), scalars),
        "taints": st.one_of(st.lists(st.dictionaries(st.text(max_size=6), scalars)), scalars),
        "ready": scalars,
        "gpuDevices": st.one_of(st.lists(scalars, max_size=3), scalars),
    },
)
snapshots = st.fixed_dictionaries(
    {
        "apiVersion": st.just("placer.dev/v1alpha1"),
        "kind": st.just("FleetSnapshot"),
        "clusters": st.lists(
            st.fixed_dictionaries(
                {"name": st.one_of(st.sampled_from(["c1", "c2"]), scalars)},
                optional={
                    "nodeGroups": st.one_of(st.lists(snapshot_groups, max_size=2), scalars),
                    "reachable": scalars,
                    "pending": st.one_of(
                        st.fixed_dictionaries({"pods": scalars, "requests": resource_maps}),
                        scalars,
                    ),
                },
            ),
            max_size=2,
        ),
    }
)


@given(data=snapshots)
def test_a_snapshot_is_read_or_refused_naming_the_field(data: Any) -> None:
    try:
        fleet = fleet_from_dict(data, source="s.yaml")
    except SnapshotError as exc:
        assert str(exc).startswith("s.yaml: ")
        return
    for cluster in fleet.clusters:
        for node in cluster.nodes:
            for amount in node.allocatable.values():
                assert 0 <= amount <= MAX_AMOUNT


@given(text=st.text(max_size=200))
def test_any_text_as_a_snapshot_gives_a_snapshot_error(text: str) -> None:
    try:
        loads_snapshot(text, source="s.yaml")
    except SnapshotError:
        pass


fleet_files = st.fixed_dictionaries(
    {},
    optional={
        "clusters": st.one_of(
            st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "name": st.one_of(st.sampled_from(["a", "b"]), scalars),
                        "kubeconfig": st.one_of(st.just("kc.yaml"), scalars),
                        "context": scalars,
                        "timeout": scalars,
                        "labels": st.one_of(st.dictionaries(st.text(max_size=3), scalars), scalars),
                        "taints": st.one_of(st.lists(scalars, max_size=2), scalars),
                    },
                ),
                max_size=3,
            ),
            scalars,
        ),
        "kind": scalars,
    },
)


@given(data=fleet_files)
def test_a_fleet_file_is_read_or_refused_naming_the_field(data: Any, tmp_path_factory: Any) -> None:
    folder = tmp_path_factory.mktemp("fleet")
    path = folder / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        config = load_fleet_file(path)
    except FleetConfigError as exc:
        assert str(path) in str(exc)
        return
    for cluster in config.clusters:
        assert math.isfinite(cluster.timeout) and cluster.timeout > 0


# --------------------------------------------------------------------------------------------
# command-line numbers

number_texts = st.one_of(
    st.floats().map(repr),
    st.integers(-(10**40), 10**40).map(str),
    st.sampled_from(["nan", "inf", "-inf", "1e300", "0", "-0", "0x10", "", " ", "1_000", "½"]),
    st.text(max_size=8),
)
OPTIONS = {
    ("plan", "--time-limit"): "time_limit",
    ("plan", "--seed"): "seed",
    ("plan", "--timeout"): "timeout",
    ("controller", "--time-limit"): "time_limit",
    ("controller", "--max-batch"): "max_batch",
    ("controller", "--batch-window"): "batch_window",
    ("controller", "--metrics-port"): "metrics_port",
    ("controller", "--workers"): "workers",
    ("controller", "--lease-duration"): "lease_duration",
    ("simulate", "--interval"): "interval",
}


@given(option=st.sampled_from(sorted(OPTIONS)), text=number_texts)
def test_command_line_numbers_are_valid_or_refused_while_parsing(
    option: tuple[str, str], text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    command, flag = option
    required = {
        "plan": ["-f", "x.yaml"],
        "controller": ["--hub-context", "hub"],
        "simulate": ["--snapshot", "s.yaml", "--workloads", "w"],
    }[command]
    try:
        args = build_parser().parse_args([command, *required, f"{flag}={text}"])
    except SystemExit as exc:
        assert exc.code == 2
        err = capsys.readouterr().err
        assert f"error: argument {flag}" in err and "Traceback" not in err
        return
    value = getattr(args, OPTIONS[option])
    assert isinstance(value, int | float) and math.isfinite(value)
    assert value >= 0
    if isinstance(value, float):
        assert value <= MAX_SECONDS
    if flag in ("--time-limit", "--batch-window", "--lease-duration", "--timeout"):
        assert value > 0
    if flag in ("--max-batch", "--workers"):
        assert value >= 1
    if flag == "--metrics-port":
        assert value <= 65535
    if flag == "--seed":
        assert value < 2**31


def test_argument_type_errors_name_the_rule() -> None:
    from placer.cli._types import count, seconds

    with pytest.raises(argparse.ArgumentTypeError, match="positive number of seconds"):
        seconds("nan")
    with pytest.raises(argparse.ArgumentTypeError, match="from 1 to 5"):
        count(1, 5)("0")


def test_placer_errors_are_the_only_failures_of_main(capsys: pytest.CaptureFixture[str]) -> None:
    """``main`` turns every usage problem into an exit code (no SystemExit escapes)."""
    assert main(["plan", "-f", "x.yaml", "--time-limit", "nan"]) == 2
    assert main(["--version"]) == 0
    capsys.readouterr()
    assert issubclass(SnapshotError, PlacerError)


def test_an_object_nested_thousands_deep_is_an_interpretation_error() -> None:
    """Hub objects come as JSON (no YAML bound): a deep one is refused, not a RecursionError."""
    from placer.definitions import Catalog, decompose
    from placer.errors import InterpretationError

    deep: dict[str, Any] = {}
    cursor = deep
    for _ in range(5000):
        cursor["a"] = {}
        cursor = cursor["a"]
    job = _job("deep", {}, 1, {})
    job["x"] = deep
    with pytest.raises(InterpretationError, match="nested too deeply"):
        decompose(job, Catalog.builtin())
