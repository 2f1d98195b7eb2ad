"""Workload specs: every source resolves; every mistake is a clear InputError."""

from __future__ import annotations

import pytest

from placer.errors import InputError
from placer.model import Fleet
from placer.quantity import CPU
from placer.traces.specs import is_workload_spec, resolve_workloads
from placer.traces.workloads import fleet_gpu_milli, gpu_milli, total_gpu_milli
from simulations.build_fleets import EXAMPLE_FLEETS, build


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return build(next(s for s in EXAMPLE_FLEETS if s.file == "openb-4.yaml"))


def test_is_workload_spec() -> None:
    assert is_workload_spec("trace:openb:default") and is_workload_spec("synthetic:gangs")
    assert not is_workload_spec("examples/jobset-demo.yaml")


def test_openb_trace_and_fgd_replay(fleet: Fleet) -> None:
    assert len(resolve_workloads("trace:openb:gpuspec33")) == 8152
    replay = resolve_workloads("trace:openb:default?load=1.3", fleet=fleet, seed=44)
    assert total_gpu_milli(replay) <= 1.3 * fleet_gpu_milli(fleet)
    assert total_gpu_milli(replay) > 1.3 * fleet_gpu_milli(fleet) - 8000
    # the spec's seed wins over the run's seed; the run's seed wins over the default
    same = resolve_workloads("trace:openb:default?load=1.3&seed=44", fleet=fleet, seed=1)
    assert same == replay
    assert resolve_workloads("trace:openb:default?load=1.3", fleet=fleet) != replay
    fast = resolve_workloads("trace:openb:default?time_scale=0.001&departures=false")
    assert max(i.arrival_s for i in fast) < 13_000 and all(i.duration_s is None for i in fast)


def test_kalos_and_synthetic(fleet: Fleet) -> None:
    kalos = resolve_workloads("trace:kalos?shape=fit&time_scale=0.01", fleet=fleet)
    assert len(kalos) == 319
    assert max(i.workload.components[0].pod.requests[CPU] for i in kalos) <= 64_000
    gangs = resolve_workloads("synthetic:gangs?seed=3&count=40&components=1", fleet=fleet)
    assert len(gangs) == 40 and all(len(i.workload.components) == 1 for i in gangs)
    largest = max(
        sum(n.allocatable.get("nvidia.com/gpu", 0) for n in c.nodes) for c in fleet.clusters
    )
    assert max(gpu_milli(i.workload) for i in gangs) <= 0.15 * largest * 1000 + 1000
    loaded = resolve_workloads("synthetic:gangs?load=1.2&max_gpus=64&seed=3", fleet=fleet)
    assert total_gpu_milli(loaded) >= 1.2 * fleet_gpu_milli(fleet)
    assert resolve_workloads("synthetic:gangs?max_gpus=16&count=5&seed=9") == resolve_workloads(
        "synthetic:gangs?max_gpus=16&count=5", seed=9
    )


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("trace:openb:gpuspec99", "unknown openb task list 'gpuspec99'"),
        ("trace:philly", "unknown workload source 'trace:philly'"),
        ("trace:openb:default?load=high", "load: 'high' is not a number"),
        ("trace:openb:default?load=-1", "load: '-1' is out of range"),
        ("trace:openb:default?seed=3", "seed: only applies with load="),
        ("trace:openb:default?load=1.3&time_scale=2", "time_scale: does not apply with load="),
        ("trace:openb:default?load=1&load=2", "load: given twice"),
        ("trace:openb:default?load", "'load' is not key=value"),
        ("trace:kalos?shape=huge", "shape: 'huge' is not one of trace, fit"),
        ("trace:kalos?speed=2", "speed: unknown parameter for trace:kalos"),
        ("synthetic:gangs?count=3&load=1", "give count= or load=, not both"),
        ("synthetic:gangs?max_gpus=8&count=0", "count: 0 is not between 1 and 100000"),
        ("synthetic:gangs?max_gpus=8&components=4", "components: 4 is not between 1 and 3"),
        ("synthetic:gangs?max_gpus=8&fractional=maybe", "'maybe' is not true or false"),
        ("synthetic:gangs?max_gpus=8&source=nope", "source: 'nope' is not one of default"),
    ],
)
def test_mistakes_name_the_spec_and_the_parameter(fleet: Fleet, spec: str, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        resolve_workloads(spec, fleet=fleet)
    message = str(err.value)
    assert f"workloads {spec!r}" in message and fragment in message


def test_unknown_names_list_the_valid_ones() -> None:
    with pytest.raises(InputError) as err:
        resolve_workloads("trace:alibaba")
    assert "trace:openb:<variant>, trace:kalos, synthetic:gangs" in str(err.value)
    assert "multigpu50" in str(err.value)


@pytest.mark.parametrize(
    "spec", ["trace:openb:default?load=1.3", "trace:kalos?shape=fit", "synthetic:gangs"]
)
def test_specs_that_need_a_fleet_say_so(spec: str) -> None:
    with pytest.raises(InputError, match="needs the fleet's capacity") as err:
        resolve_workloads(spec)
    assert "--snapshot" in str(err.value)
