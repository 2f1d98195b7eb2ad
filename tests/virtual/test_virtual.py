"""The virtual fleet as a library: setup seam, unreachable clusters, files it writes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from placer.fleet import fleet_from_kubeconfigs, gather_fleet, load_fleet_file
from placer.model import Cluster, Taint
from placer.snapshot import load_snapshot
from placer.testing import ApiServer
from placer.virtual.fleet import VirtualFleet

ROOT = Path(__file__).resolve().parents[2]


def test_setup_seam_unreachable_cluster_and_fleet_file(tmp_path: Path) -> None:
    demo = load_snapshot(ROOT / "clusters" / "demo.yaml")
    east, west, central = demo.clusters
    fleet = replace(
        demo,
        clusters=(
            replace(east, taints=(Taint("reserved", "team-a", "NoSchedule"),)),
            replace(west, reachable=False, reason="was down", nodes=()),
            central,
        ),
    )
    seen: list[tuple[str, int, bool]] = []

    def setup(cluster: Cluster, server: ApiServer) -> None:
        nodes = server.store.list("nodes")
        seen.append((cluster.name, len(nodes), server.running))

    with VirtualFleet(fleet, setup=setup) as virtual:
        # called once per reachable cluster, seeded, before it serves
        assert seen == [("east", 5, False), ("central", 4, False)]
        assert all(server.running for name, server in virtual.servers.items() if name != "west")
        assert not virtual.server("west").running
        kubeconfig = virtual.write_kubeconfig(tmp_path / "kc")
        virtual.write_fleet_file(tmp_path / "fleet.yaml", kubeconfig=kubeconfig)
        data = yaml.safe_load((tmp_path / "fleet.yaml").read_text())
        assert data["clusters"][0]["taints"] == [
            {"key": "reserved", "value": "team-a", "effect": "NoSchedule"}
        ]
        assert data["clusters"][2]["labels"]["provider"] == "onprem"
        through_file = gather_fleet(load_fleet_file(tmp_path / "fleet.yaml"))
        through_kubeconfig = gather_fleet(fleet_from_kubeconfigs([kubeconfig]))
        servers = list(virtual.servers.values())
    assert not any(server.running for server in servers)

    for gathered in (through_file, through_kubeconfig):
        assert [c.reachable for c in gathered.clusters] == [True, False, True]
        assert "connection refused" in gathered.cluster("west").reason
    assert through_file.cluster("east").taints == (Taint("reserved", "team-a", "NoSchedule"),)
    assert through_file.cluster("east").labels["cost"] == "3"
    assert "cost" not in through_kubeconfig.cluster("east").labels
