"""Fleet splits keep every node and GPU; the committed example fleets are the builder's output."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from placer.errors import InputError
from placer.model import Node
from placer.quantity import GPU
from placer.snapshot import load_snapshot
from placer.traces.nodes import GPU_PRODUCT_LABEL, REGION_LABEL, gpu_model
from placer.traces.openb import read_openb_nodes
from simulations.build_fleets import EXAMPLE_FLEETS, ExampleFleet, build, main, render
from simulations.fleets import SPLITS, helios_vc_gpus, make_fleet, read_pai_nodes, split_nodes

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def nodes() -> tuple[Node, ...]:
    return read_openb_nodes("gpu")


def _gpus(nodes: list[Node] | tuple[Node, ...]) -> int:
    return sum(n.allocatable.get(GPU, 0) for n in nodes)


@pytest.mark.parametrize("method", SPLITS)
@pytest.mark.parametrize("clusters", [2, 4, 8, 16])
def test_every_split_keeps_each_node_once(
    nodes: tuple[Node, ...], method: str, clusters: int
) -> None:
    groups = split_nodes(nodes, clusters, method, seed=3)
    assert len(groups) == clusters and all(groups)
    names = [n.name for group in groups for n in group]
    assert sorted(names) == sorted(n.name for n in nodes)
    assert sum(_gpus(g) for g in groups) == 6212
    assert split_nodes(nodes, clusters, method, seed=3) == groups  # deterministic


def test_by_model_is_gpu_balanced_and_nearly_homogeneous(nodes: tuple[Node, ...]) -> None:
    groups = split_nodes(nodes, 8, "by-model")
    sizes = [_gpus(g) for g in groups]
    assert max(sizes) - min(sizes) <= 8  # contiguous cuts: within one 8-GPU node
    assert sum(len({gpu_model(n) for n in g}) == 1 for g in groups) >= 4


def test_stratified_spreads_each_model_within_one_node(nodes: tuple[Node, ...]) -> None:
    groups = split_nodes(nodes, 4, "stratified", seed=1)
    for model in {gpu_model(n) for n in nodes}:
        counts = [sum(gpu_model(n) == model for n in g) for g in groups]
        assert max(counts) - min(counts) <= 1
    assert split_nodes(nodes, 4, "stratified", seed=2) != groups


def test_skewed_follows_helios_vc_sizes(nodes: tuple[Node, ...]) -> None:
    sizes = helios_vc_gpus("2020-09-28")
    assert sizes[:3] == [256, 160, 88] and len(sizes) == 16 and min(sizes) == 8
    groups = split_nodes(nodes, 4, "skewed", seed=0)
    shares = sorted(_gpus(g) / 6212 for g in groups)
    expected = sorted(s / sum(sizes[:4]) for s in sizes[:4])
    assert shares == pytest.approx(expected, abs=0.01)
    with pytest.raises(InputError, match="fewer than 17"):
        split_nodes(nodes, 17, "skewed")


def test_bad_split_requests(nodes: tuple[Node, ...]) -> None:
    with pytest.raises(InputError, match="unknown split"):
        split_nodes(nodes, 4, "random")
    with pytest.raises(InputError, match="cannot split 3 nodes into 4"):
        split_nodes(nodes[:3], 4)


def test_clusters_get_site_labels_and_node_topology(nodes: tuple[Node, ...]) -> None:
    fleet = make_fleet(split_nodes(nodes, 20, "by-model"))
    names = fleet.names
    assert len(set(names)) == 20 and names[16] == "aws-use1-2"
    for cluster in fleet.clusters:
        assert set(cluster.labels) == {"region", "provider", "cost"}
        assert float(cluster.labels["cost"]) > 0
        assert {n.labels[REGION_LABEL] for n in cluster.nodes} == {cluster.labels["region"]}


def test_pai_machines(tmp_path: Path) -> None:
    gpu_nodes = read_pai_nodes()
    assert len(gpu_nodes) == 1814 and _gpus(gpu_nodes) == 6742
    models = Counter(n.labels[GPU_PRODUCT_LABEL] for n in gpu_nodes)
    assert models == {"P100": 798, "T4": 497, "MISC": 280, "V100M32": 135, "V100": 104}
    everything = read_pai_nodes(gpu_only=False)
    assert len(everything) == 1897
    t4 = everything[83]  # row 84: ...,T4,96,512,2
    assert (t4.name, t4.allocatable["cpu"], t4.allocatable["memory"], t4.allocatable[GPU]) == (
        "pai-node-0083",
        96_000,
        512 * 2**30,
        2,
    )


@pytest.mark.parametrize("spec", EXAMPLE_FLEETS, ids=lambda s: s.file)
def test_committed_fleet_files_are_the_builders_output(spec: ExampleFleet) -> None:
    path = ROOT / "clusters" / spec.file
    assert path.read_text(encoding="utf-8") == render(spec), (
        f"{path} is stale: run python -m simulations.build_fleets"
    )
    fleet = load_snapshot(path)
    assert fleet == build(spec)
    nodes = [n for c in fleet.clusters for n in c.nodes]
    expected = (1213, 6212) if spec.source == "openb" else (1814, 6742)
    assert (len(nodes), _gpus(nodes)) == expected
    assert len(fleet.clusters) == spec.clusters
    assert all(n.gpu_devices == (1000,) * n.allocatable[GPU] for n in nodes)
    assert path.stat().st_size < 64 * 1024  # identical nodes grouped


def test_build_script_check_mode_and_custom_fleet(tmp_path: Path) -> None:
    assert main(["--check"]) == 0
    assert main(["--check", "--dir", str(tmp_path)]) == 1  # nothing there: all stale
    out = tmp_path / "custom.yaml"
    assert (
        main(["--source", "openb", "--clusters", "3", "--split", "stratified", "-o", str(out)]) == 0
    )
    fleet = load_snapshot(out)
    assert len(fleet.clusters) == 3
