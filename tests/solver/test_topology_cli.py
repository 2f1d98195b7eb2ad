"""``placer plan`` with topology: the rack a gang lands in, refusals naming the short domain,
snapshots keeping topology labels, a fleet file's topologies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placer.cli import main
from placer.snapshot import dump_snapshot, load_snapshot

ROOT = Path(__file__).resolve().parents[2]
RACKS = str(ROOT / "clusters" / "racks.yaml")
TRAINING = str(ROOT / "deploy" / "examples" / "rack-training.yaml")
LEAF = "network.topology.nvidia.com/leaf"


def test_plan_keeps_the_gang_in_one_rack(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-f", TRAINING, "--snapshot", RACKS, "-o", "json"]) == 0
    (placement,) = json.loads(capsys.readouterr().out)["placements"]
    # dc1 has 16 free GPUs but 8 per rack; dc2's rack r3 holds the 12
    assert placement["cluster"] == "dc2"
    assert {p["node"] for p in placement["pods"]} <= {"dc2-r3-0", "dc2-r3-1"}
    assert placement["topology"] == [
        {"group": "workload", "level": LEAF, "required": True, "domains": ["r3"]}
    ]
    assert placement["refused"]["dc1"].startswith(
        f"no {LEAF} domain with 12 free GPUs for the 3 pods"
    )
    assert f"8 free GPUs in {LEAF}=r1" in placement["refused"]["dc1"]
    assert main(["plan", "-f", TRAINING, "--snapshot", RACKS]) == 0
    out = capsys.readouterr().out
    assert f"pod group 'workload' in {LEAF}=r3 (required)" in out


def test_without_topology_the_same_job_spans_racks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text(
        Path(TRAINING).read_text().replace("kai.scheduler/topology-required", "example/x")
    )
    assert main(["plan", "-f", str(plain), "--snapshot", RACKS, "-o", "json"]) == 0
    (placement,) = json.loads(capsys.readouterr().out)["placements"]
    assert placement["cluster"] == "dc1"  # the fuller cluster, across its two racks
    assert "topology" not in placement


def test_unknown_level_fails_plan_naming_the_annotation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path(TRAINING).read_text().replace(LEAF, "example.com/rack"))
    assert main(["plan", "-f", str(bad), "--snapshot", RACKS]) == 1
    err = capsys.readouterr().err
    assert 'metadata.annotations["kai.scheduler/topology-required-placement"]' in err
    assert "unknown topology level 'example.com/rack'" in err


def test_snapshot_keeps_topology_labels(tmp_path: Path) -> None:
    fleet = load_snapshot(RACKS)
    again = tmp_path / "again.yaml"
    dump_snapshot(fleet, again)
    back = load_snapshot(again)
    assert back == fleet
    labels = {n.name: n.labels[LEAF] for c in back.clusters for n in c.nodes}
    assert labels == {
        "dc1-r1-0": "r1",
        "dc1-r1-1": "r1",
        "dc1-r2-0": "r2",
        "dc1-r2-1": "r2",
        "dc2-r3-0": "r3",
        "dc2-r3-1": "r3",
        "dc2-r4-0": "r4",
    }


def test_live_fleet_with_a_fleet_file_topology(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Gathered over HTTPS from the virtual fleet: the nodes' rack labels arrive, and a level
    the fleet file's topologies: section names is accepted (placer's defaults lack it)."""
    import yaml

    from placer.virtual.fleet import VirtualFleet

    custom = "example.com/rack"
    text = Path(RACKS).read_text().replace(LEAF, custom)
    snapshot = tmp_path / "racks.yaml"
    snapshot.write_text(text)
    job = tmp_path / "job.yaml"
    job.write_text(Path(TRAINING).read_text().replace(LEAF, custom))
    with VirtualFleet(load_snapshot(snapshot)) as virtual:
        kubeconfig = virtual.write_kubeconfig(tmp_path / "kubeconfig")
        fleet_file = virtual.write_fleet_file(tmp_path / "fleet.yaml", kubeconfig=kubeconfig)
        # without the section the level is unknown
        assert main(["plan", "-f", str(job), "--fleet", str(fleet_file)]) == 1
        assert "unknown topology level 'example.com/rack'" in capsys.readouterr().err
        data = yaml.safe_load(fleet_file.read_text())
        data["topologies"] = [
            {"name": "dc", "levels": [{"nodeLabel": "example.com/block"}, {"nodeLabel": custom}]}
        ]
        fleet_file.write_text(yaml.safe_dump(data))
        assert main(["plan", "-f", str(job), "--fleet", str(fleet_file), "-o", "json"]) == 0
    (placement,) = json.loads(capsys.readouterr().out)["placements"]
    assert placement["cluster"] == "dc2"
    assert placement["topology"][0]["domains"] == ["r3"]


def test_malformed_topologies_section_names_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet_file = tmp_path / "fleet.yaml"
    fleet_file.write_text("clusters: [{name: a}]\ntopologies: [{name: dc, levels: [{label: x}]}]\n")
    assert main(["plan", "-f", TRAINING, "--fleet", str(fleet_file)]) != 0
    err = capsys.readouterr().err
    assert "fleet.yaml" in err and "topologies[0].levels[0].nodeLabel" in err


def test_describe_shows_the_topology_constraints(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe", "-f", TRAINING]) == 0
    text = capsys.readouterr().out
    assert "Topology:" in text
    assert f"workload   {LEAF}" in text and "KAI annotations" in text
    assert main(["describe", "-f", TRAINING, "-o", "json"]) == 0
    (item,) = json.loads(capsys.readouterr().out)
    assert item["topology"] == [
        {
            "group": "workload",
            "members": ["replicatedjob/worker"],
            "required": LEAF,
            "preferred": "",
            "from": "KAI annotations",
        }
    ]


def test_a_snapshot_keeps_the_fleet_files_topologies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A level only a fleet file's topologies: section names: `placer snapshot` records the
    section, and `plan --snapshot` and `simulate` on that snapshot accept the level (they
    refused it, and a snapshot had no way to carry it); `fleet up --fleet-out` writes it back."""
    import yaml

    from placer.virtual.fleet import VirtualFleet

    custom = "example.com/rack"
    section = [{"name": "dc", "levels": [{"nodeLabel": custom}]}]
    racks = tmp_path / "racks.yaml"
    racks.write_text(Path(RACKS).read_text().replace(LEAF, custom))
    job = tmp_path / "job.yaml"
    job.write_text(Path(TRAINING).read_text().replace(LEAF, custom))
    captured = tmp_path / "captured.yaml"
    with VirtualFleet(load_snapshot(racks)) as virtual:
        kubeconfig = virtual.write_kubeconfig(tmp_path / "kubeconfig")
        fleet_file = virtual.write_fleet_file(tmp_path / "fleet.yaml", kubeconfig=kubeconfig)
        data = yaml.safe_load(fleet_file.read_text())
        data["topologies"] = section
        fleet_file.write_text(yaml.safe_dump(data))
        assert main(["snapshot", "--fleet", str(fleet_file), "-o", str(captured)]) == 0
    assert yaml.safe_load(captured.read_text())["topologies"] == section
    capsys.readouterr()
    assert main(["plan", "-f", str(job), "--snapshot", str(captured), "-o", "json"]) == 0
    (placement,) = json.loads(capsys.readouterr().out)["placements"]
    assert placement["cluster"] == "dc2" and placement["topology"][0]["domains"] == ["r3"]
    assert main(["simulate", "--snapshot", str(captured), "--workloads", str(job)]) == 0
    assert "unknown topology level" not in capsys.readouterr().err
    # without the section, the snapshot's plan refuses the level, naming where to add it
    assert main(["plan", "-f", str(job), "--snapshot", str(racks)]) == 1
    assert "topologies: section of the fleet file (or of the snapshot)" in capsys.readouterr().err
    with VirtualFleet(load_snapshot(captured)) as virtual:
        written = virtual.write_fleet_file(tmp_path / "again.yaml", kubeconfig=kubeconfig)
    assert yaml.safe_load(written.read_text())["topologies"] == section
