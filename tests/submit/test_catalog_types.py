"""One submission per catalog type: the sample lands on a cluster with its placement record,
and the virtual cluster runs it (pods bound, the definition's status mapping says Running)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.cli import main
from placer.definitions import Catalog, decompose, phases_of
from placer.dispatch.record import PlacementRecord
from placer.model import Cluster, Fleet, Node
from placer.quantity import CPU, GPU, MEMORY, PODS
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "tests" / "definitions" / "samples"
CATALOG = Catalog.builtin()


def _smallest_samples() -> dict[str, dict[str, Any]]:
    """Per definition name, its sample with the fewest GPUs and pods."""
    best: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}
    for path in sorted(SAMPLES.glob("*.yaml")):
        if path.name == "status.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict) or "kind" not in doc:
                continue
            d = decompose(doc, CATALOG)
            key = (d.workload.gpus, d.workload.pod_count)
            name = d.definition.name
            if name not in best or key < best[name][0]:
                best[name] = (key, doc)
    return {name: doc for name, (_, doc) in best.items()}


SAMPLE_BY_TYPE = _smallest_samples()


def _cluster(name: str, count: int, product: str) -> Cluster:
    labels = {"nvidia.com/gpu.product": product, "nvidia.com/gpu.present": "true"}
    nodes = tuple(
        Node(
            name=f"{name}-{i}",
            allocatable={
                CPU: 192_000,
                MEMORY: 2 * 2**40,
                GPU: 8,
                PODS: 110,
                "ephemeral-storage": 4 * 2**40,
                "nvidia.com/mig-1g.10gb": 7,
                "google.com/tpu": 8,
            },
            labels={**labels, "kubernetes.io/hostname": f"{name}-{i}"},
        )
        for i in range(count)
    )
    return Cluster(name=name, nodes=nodes)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[VirtualFleet, Path]]:
    model = Fleet(
        (
            _cluster("small", 2, "NVIDIA-H100-80GB-HBM3"),
            _cluster("a100", 8, "NVIDIA-A100-SXM4-80GB"),
            _cluster("h100", 6, "NVIDIA-H100-80GB-HBM3"),
        )
    )
    with VirtualFleet(model, setup=realism_setup(CATALOG)) as virtual:
        yield virtual, virtual.write_kubeconfig(tmp_path_factory.mktemp("kc") / "kubeconfig")


def test_every_catalog_type_has_a_sample() -> None:
    assert sorted(SAMPLE_BY_TYPE) == sorted(d.name for d in CATALOG.definitions)


@pytest.mark.parametrize("definition", sorted(SAMPLE_BY_TYPE))
def test_submit_each_catalog_type(
    definition: str,
    fleet: tuple[VirtualFleet, Path],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    virtual, kubeconfig = fleet
    doc = SAMPLE_BY_TYPE[definition]
    manifest = tmp_path / "sample.yaml"
    manifest.write_text(yaml.safe_dump(doc))
    code = main(["submit", "-f", str(manifest), "--kubeconfig", str(kubeconfig), "-o", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0, json.dumps(data["unplaced"])
    [placement] = data["placements"]
    assert placement["dispatched"] is True
    cluster = placement["cluster"]
    d = decompose(doc, CATALOG)
    ref = d.ref
    store = virtual.server(cluster).store
    [resource] = [
        r for r in store.resources() if r.kind == ref.kind and r.api_version == ref.api_version
    ]
    obj = store.get(resource, ref.name, ref.namespace)
    record = PlacementRecord.from_object(obj)
    assert record is not None and record.cluster == cluster
    assert record.decision == data["decision"]
    assert obj["metadata"]["namespace"] == ref.namespace
    for other in virtual.servers:
        if other != cluster:
            found = virtual.server(other).store.list(resource, ref.namespace)
            assert ref.name not in [o["metadata"]["name"] for o in found]
    # realism: the workload runs on the virtual cluster
    assert "Running" in phases_of(obj, CATALOG)
    uid = obj["metadata"]["uid"]
    pods = [
        p
        for p in store.list("pods", ref.namespace)
        if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences", []))
    ]
    if ref.kind == "Pod":
        assert obj["spec"]["nodeName"]
    else:
        # an elastic workload's copy carries the counts placer chose (tests/elastic): its pods
        placed = decompose(obj, CATALOG)
        assert len(pods) == sum(c.replicas for c in placed.components)
        assert len(pods) >= d.workload.pod_count
    # an elastic sample grows into every free node it may use: it leaves the room to the others
    if d.workload.elastic:
        assert main(["delete", "-f", str(manifest), "--kubeconfig", str(kubeconfig)]) == 0
        capsys.readouterr()
        assert all(p["spec"].get("nodeName") for p in pods)
