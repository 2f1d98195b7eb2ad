"""A workload asking only MIG slices (``nvidia.com/mig-1g.10gb``, the device plugin's ``mixed``
strategy) shows them in every GPU cell — ``plan``, ``submit``, ``get``, ``describe`` (live and
``-f``) — as ``2×mig-1g.10gb``, not as 0 GPUs. Over HTTPS to a virtual member."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from placer.accelerators import default_accelerators, gpu_text, mig_slices
from placer.cli import main
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup
from tests.builders import fleets

MIG = "nvidia.com/mig-1g.10gb"


def mig_job(name: str, parallelism: int = 2) -> dict[str, object]:
    container = {"name": "main", "image": "x", "resources": {"limits": {MIG: 1}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


@pytest.mark.parametrize(
    ("requests", "text"),
    [
        ({}, "0"),
        ({"nvidia.com/gpu": 12}, "12"),
        ({"placer.dev/gpu-milli": 500}, "0.5"),
        ({MIG: 2}, "2×mig-1g.10gb"),
        (
            {"nvidia.com/gpu": 1, MIG: 2, "nvidia.com/mig-3g.40gb": 1},
            "1+2×mig-1g.10gb+1×mig-3g.40gb",
        ),
        ({"cpu": 4000, MIG: 0}, "0"),
    ],
)
def test_gpu_text(requests: dict[str, int], text: str) -> None:
    assert gpu_text(requests) == text


def test_time_sliced_gpus_show_as_their_share_given_the_table() -> None:
    """``nvidia.com/gpu.shared`` at 4 replicas per GPU (placer/accelerators.yaml)."""
    assert gpu_text({"nvidia.com/gpu.shared": 2}, default_accelerators()) == "0.5"
    assert mig_slices({MIG: 3, "nvidia.com/gpu": 1}) == {"mig-1g.10gb": 3}


@pytest.fixture(scope="module")
def member(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A member with one MIG node (7 slices) and the Job file; (kubeconfig, file)."""
    model = fleets.fleet(fleets.cluster("a", fleets.node("a-0", gpus=0, extra={MIG: 7})))
    folder = tmp_path_factory.mktemp("mig")
    manifest = folder / "mig.yaml"
    manifest.write_text(yaml.safe_dump(mig_job("migjob")))
    with VirtualFleet(model, setup=realism_setup(pods=True)) as virtual:
        yield virtual.write_kubeconfig(folder / "kubeconfig"), manifest


def run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_mig_slices_show_in_every_gpu_cell(
    member: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig, manifest = member
    fleet = ("--kubeconfig", str(kubeconfig))
    out = run(capsys, "plan", "-f", str(manifest), *fleet)
    row = next(line for line in out.splitlines() if line.startswith("Job/default/migjob"))
    assert row.split()[2:4] == ["2", "2×mig-1g.10gb"]
    assert "0 GPUs of at most 0 (tightest bound), 2×mig-1g.10gb;" in out

    out = run(capsys, "submit", "-f", str(manifest), *fleet)
    row = next(line for line in out.splitlines() if line.startswith("Job/default/migjob"))
    assert row.split()[2:4] == ["2", "2×mig-1g.10gb"] and row.split()[-1] == "dispatched"

    out = run(capsys, "get", "-A", *fleet)
    header, row = out.splitlines()
    assert row.split()[header.split().index("GPU")] == "2×mig-1g.10gb"

    data = json.loads(run(capsys, "get", "-A", "-o", "json", *fleet))
    (item,) = data["items"]
    assert item["gpus"] == 0 and item["migSlices"] == {"mig-1g.10gb": 2}

    out = run(capsys, "describe", "job/migjob", "-n", "default", *fleet)
    assert "gpu: 2×mig-1g.10gb" in out  # the component
    assert out.count("gpu: 1×mig-1g.10gb") == 2  # each pod
    total = next(line for line in out.splitlines() if line.startswith("TOTAL"))
    assert total.split()[:3] == ["TOTAL", "2", "2×mig-1g.10gb"]

    out = run(capsys, "describe", "-f", str(manifest))
    assert "`-- job   replicas: 2   gpu: 2×mig-1g.10gb" in out
