"""Dynamic Resource Allocation: claims counted on the pods that name them, devices counted on
the nodes whose ResourceSlices publish them (issue 20, acceptance: a pod asking 2 GPUs through
a claim template fits only where ResourceSlices show 2 free devices; an unmappable claim warns).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.accelerators import ClaimIndex, accelerators_from_dict
from placer.cli import main
from placer.definitions import Catalog, decompose
from placer.errors import InterpretationError
from placer.fleet.devices import node_device_groups
from placer.quantity import GPU
from tests.accelerators.conftest import (
    H100,
    Gather,
    allocated_claim,
    claim_template,
    gpu_node,
    pod,
    resource_slice,
)


def training_job(template: str = "two-gpus", namespace: str = "team-a") -> dict[str, Any]:
    """A Job whose pod asks for GPUs only through a claim template (no GPU resource)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": namespace},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": template}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "trainer:1",
                            "resources": {
                                "requests": {"cpu": "4", "memory": "16Gi"},
                                "claims": [{"name": "gpus"}],
                            },
                        }
                    ],
                }
            }
        },
    }


def write(path: Path, *documents: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    return path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_a_claim_template_asks_for_its_devices() -> None:
    claims = ClaimIndex([(claim_template("two-gpus", count=2), "job.yaml#1")])
    result = decompose(training_job(), Catalog.builtin(), claims=claims)
    (component,) = result.components
    assert component.pod.requests[GPU] == 2
    (source,) = component.sources
    assert source.kind == "claim" and source.requests == {GPU: 2}
    assert "ResourceClaimTemplate team-a/two-gpus" in source.text
    assert "DeviceClass gpu.nvidia.com" in source.text
    assert result.warnings == ()


def test_a_two_gpu_claim_fits_only_where_slices_show_two_free_devices(
    gathered: Gather, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # no device plugin: the GPUs exist only as DRA devices
    fleet, kubeconfig = gathered(
        [
            gpu_node("busy"),
            gpu_node("roomy"),
            resource_slice("busy", 4),
            resource_slice("roomy", 4),
            allocated_claim("held-busy", "busy", ["gpu-0", "gpu-1", "gpu-2"]),
            allocated_claim("held-roomy", "roomy", ["gpu-0", "gpu-1"]),
        ]
    )
    nodes = {n.name: n for n in fleet.clusters[0].nodes}
    assert nodes["busy"].free[GPU] == 1 and nodes["roomy"].free[GPU] == 2
    manifests = write(tmp_path / "job.yaml", claim_template("two-gpus", count=2), training_job())
    code, out, err = run(
        ["plan", "-f", str(manifests), "--kubeconfig", str(kubeconfig), "-o", "json"], capsys
    )
    assert code == 0, err
    (placement,) = json.loads(out)["placements"]
    assert [p["node"] for p in placement["pods"]] == ["roomy"]
    # three devices: no node has them
    three = write(tmp_path / "three.yaml", claim_template("two-gpus", count=3), training_job())
    code, out, _ = run(
        ["plan", "-f", str(three), "--kubeconfig", str(kubeconfig), "-o", "json"], capsys
    )
    assert code == 1 and json.loads(out)["placements"] == []  # exit 1: a workload unplaced
    (unplaced,) = json.loads(out)["unplaced"]
    assert "nvidia.com/gpu" in unplaced["reasons"]["gpu"]


def test_an_unmappable_claim_warns_naming_the_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests = write(
        tmp_path / "job.yaml", claim_template("two-gpus", "mig.nvidia.com"), training_job()
    )
    code, out, err = run(["describe", "-f", str(manifests)], capsys)
    assert code == 0
    assert "warning: " in err and "DeviceClass 'mig.nvidia.com'" in err
    assert "ResourceClaimTemplate team-a/two-gpus" in err and "job.yaml#2: Job/train" in err
    assert "not counted" in err
    code, out, err = run(["describe", "-f", str(manifests), "-o", "json"], capsys)
    (item,) = json.loads(out)
    assert len(item["warnings"]) == 1 and "mig.nvidia.com" in item["warnings"][0]
    # once the fleet file maps the class, it counts
    table = accelerators_from_dict(
        {
            "deviceClasses": [
                {"deviceClass": "mig.nvidia.com", "driver": "gpu.nvidia.com", "resource": "mig"}
            ]
        },
        source="fleet.yaml",
    )
    claims = ClaimIndex([(claim_template("two-gpus", "mig.nvidia.com"), "job.yaml#1")])
    mapped = decompose(training_job(), Catalog.builtin().with_accelerators(table), claims=claims)
    assert mapped.components[0].pod.requests["mig"] == 1 and mapped.warnings == ()


def test_a_claim_template_missing_from_the_input_warns() -> None:
    result = decompose(training_job(), Catalog.builtin(), claims=ClaimIndex())
    (warning,) = result.warnings
    assert "ResourceClaimTemplate team-a/two-gpus is not in the input" in warning
    assert GPU not in result.components[0].pod.requests


def test_claim_request_shapes() -> None:
    v1beta1 = claim_template("old")
    request = v1beta1["spec"]["spec"]["devices"]["requests"][0]
    request.update(request.pop("exactly"))  # v1beta1 puts the fields on the request
    alternatives = claim_template("choice")
    alternatives["spec"]["spec"]["devices"]["requests"] = [
        {
            "name": "gpu",
            "firstAvailable": [
                {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 2},
                {"name": "small", "deviceClassName": "gpu.nvidia.com", "count": 1},
            ],
        }
    ]
    claims = ClaimIndex([(v1beta1, "a"), (alternatives, "b")])
    old = decompose(training_job("old"), Catalog.builtin(), claims=claims)
    assert old.components[0].pod.requests[GPU] == 1
    choice = decompose(training_job("choice"), Catalog.builtin(), claims=claims)
    assert choice.components[0].pod.requests[GPU] == 2
    assert "the first of 2 alternatives" in choice.components[0].sources[0].text
    broken = claim_template("broken")
    broken["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 0
    with pytest.raises(InterpretationError, match=r"requests\[0\]\.exactly\.count"):
        ClaimIndex([(broken, "claims.yaml#1")])


def test_devices_of_the_latest_pool_generation_only() -> None:
    table = Catalog.builtin().accelerators
    groups = node_device_groups(
        [
            resource_slice("n", 8, generation=1),
            resource_slice("n", 4, generation=2),
            resource_slice("n", 2, kind="mig", generation=2),  # not a gpu.nvidia.com GPU
        ],
        [allocated_claim("c", "n", ["gpu-0"])],
        table,
    )
    (gpu, mig) = sorted(groups["n"], key=lambda g: g.attributes["type"])
    assert (gpu.count, gpu.allocated, gpu.resource) == (4, 1, GPU)
    assert gpu.attributes == {"productName": H100, "type": "gpu"}
    assert (mig.count, mig.resource) == (2, "")  # published, counted as nothing


def test_a_pod_bound_with_an_allocated_claim_is_not_counted_twice(gathered: Gather) -> None:
    fleet, _ = gathered(
        [
            gpu_node("n"),
            resource_slice("n", 2),
            allocated_claim("train-gpus", "n", ["gpu-0"]),
            pod("train", node="n", claims=[{"name": "g", "resourceClaimName": "train-gpus"}]),
        ]
    )
    (node,) = fleet.clusters[0].nodes
    assert node.allocatable[GPU] == 2 and node.requested[GPU] == 1


@pytest.mark.kubectl
def test_kubectl_reads_the_dra_objects_of_the_loopback_server(gathered: Gather) -> None:
    kubectl = shutil.which("kubectl") or "/usr/bin/kubectl"
    if not Path(kubectl).exists():
        pytest.skip("kubectl is not installed")
    _, kubeconfig = gathered([gpu_node("n"), resource_slice("n", 2)])
    listed = subprocess.run(
        [kubectl, "--kubeconfig", str(kubeconfig), "get", "resourceslices", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    (item,) = json.loads(listed.stdout)["items"]
    assert item["spec"]["nodeName"] == "n" and len(item["spec"]["devices"]) == 2
