"""Acceptance: gathering from loopback clusters through real kubeconfig files.

Three healthy clusters give free = allocatable − bound non-terminal requests per node; broken
ones (down, wrong token, no CA, forbidden, slow past their timeout, bad fleet entry) are each
reported with their reason while the others are still gathered. No credential leaks anywhere.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.fleet import fleet_from_kubeconfigs, gather_fleet, load_fleet_file
from placer.fleet.config import FleetConfig
from placer.model import Fleet
from placer.quantity import GPU
from placer.snapshot import dumps_snapshot
from placer.testing import ApiServer
from tests.builders import objects

MIG = "nvidia.com/mig-3g.40gb"


def node(name: str, **options: Any) -> dict[str, Any]:
    return objects.node(name, labels=LABELS | {"kubernetes.io/hostname": name}, **options)


LABELS = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "topology.kubernetes.io/region": "r1"}
#: the pods of these tests: 2 GiB each, in team-a.
pod = partial(objects.pod, namespace="team-a", memory="2Gi")


def seed_cluster(server: ApiServer, prefix: str) -> None:
    """Two GPU nodes and a mix of pods in every state."""
    server.store.seed(
        [
            node(f"{prefix}-0", extra={MIG: "2"}),
            node(f"{prefix}-1", spec={"unschedulable": True}),
            pod("train", node=f"{prefix}-0", gpus=4, cpu="8"),
            pod("mig", node=f"{prefix}-0", extra={MIG: "1"}),
            pod(
                "with-init",
                node=f"{prefix}-0",
                cpu="500m",
                initContainers=[
                    {"name": "i", "image": "x", "resources": {"requests": {"cpu": "6"}}}
                ],
            ),
            pod("done", node=f"{prefix}-0", phase="Succeeded", gpus=2),
            pod("crashed", node=f"{prefix}-0", phase="Failed", gpus=2),
            pod("stopping", node=f"{prefix}-1", gpus=1, deleting=True),
            pod("bound-pending", node=f"{prefix}-1", phase="Pending", gpus=2),
            pod("waiting", phase="Pending", gpus=8),
        ]
    )


@pytest.fixture
def three_clusters(
    start_apiserver: Callable[..., ApiServer], kubeconfig_for: Callable[..., Path]
) -> tuple[dict[str, ApiServer], Path, Path]:
    """east and west in one kubeconfig file, central in another."""
    servers = {name: start_apiserver(name) for name in ("east", "west", "central")}
    for name, server in servers.items():
        seed_cluster(server, name)
    first = kubeconfig_for({"east": servers["east"], "west": servers["west"]})
    second = kubeconfig_for({"central": servers["central"]})
    return servers, first, second


def free(fleet: Fleet, cluster: str) -> dict[str, dict[str, int]]:
    return {n.name: n.free for n in fleet.cluster(cluster).nodes}


def test_free_per_node_is_allocatable_minus_bound_non_terminal_requests(
    three_clusters: tuple[dict[str, ApiServer], Path, Path],
) -> None:
    _, first, second = three_clusters
    fleet = gather_fleet(fleet_from_kubeconfigs([first, second]))
    assert fleet.names == ("east", "west", "central")
    assert fleet.captured_at.endswith("Z")
    for name in fleet.names:
        cluster = fleet.cluster(name)
        assert cluster.reachable and cluster.reason == ""
        n0, n1 = free(fleet, name)[f"{name}-0"], free(fleet, name)[f"{name}-1"]
        # train 4 GPUs/8 cpu, mig 1 cpu + 1 MIG, with-init max(6, 0.5) cpu; Succeeded and
        # Failed pods hold nothing
        assert n0[GPU] == 4 and n0[MIG] == 1
        assert n0["cpu"] == 64000 - 8000 - 1000 - 6000
        assert n0["memory"] == 512 * 2**30 - 3 * 2 * 2**30
        assert n0["pods"] == 110 - 3
        # the terminating pod still holds its GPU, the bound Pending pod too
        assert n1[GPU] == 8 - 1 - 2 and n1["pods"] == 110 - 2
        assert cluster.pending.count == 1 and cluster.pending.requests[GPU] == 8
        assert cluster.labels["region"] == "r1"
        assert cluster.labels["gpu-products"] == "NVIDIA-A100-SXM4-80GB"
        # the cordoned node's GPUs are not usable
        assert cluster.free()[GPU] == 4


def test_gathering_paginates_with_the_non_terminal_field_selector(
    start_apiserver: Callable[..., ApiServer], kubeconfig_for: Callable[..., Path]
) -> None:
    server = start_apiserver("big")
    server.store.seed(
        [node("n0", gpus=8)] + [pod(f"p{i}", node="n0", cpu="10m") for i in range(1203)]
    )
    from placer.kube import ClientSettings

    config = fleet_from_kubeconfigs([kubeconfig_for(server)])
    fleet = gather_fleet(config, settings=lambda _source: ClientSettings(page_size=500))
    assert fleet.cluster("big").nodes[0].requested["pods"] == 1203
    pod_lists = [r for r in server.requests if r.verb == "list" and r.resource == "pods"]
    assert [r.query.get("limit") for r in pod_lists] == ["500", "500", "500"]
    assert [bool(r.query.get("continue")) for r in pod_lists] == [False, True, True]
    assert {r.query.get("fieldSelector") for r in pod_lists} == {
        "status.phase!=Succeeded,status.phase!=Failed"
    }


def test_broken_clusters_are_reported_and_the_others_still_gathered(
    start_apiserver: Callable[..., ApiServer],
    kubeconfig_for: Callable[..., Path],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    names = ("healthy", "down", "badtoken", "noca", "forbidden", "slow")
    servers = {name: start_apiserver(name) for name in names}
    for name, server in servers.items():
        seed_cluster(server, name)
    servers["down"].stop()
    servers["forbidden"].faults.fail(
        403, times=None, resource="nodes", message='nodes is forbidden: User "x" cannot list'
    )
    servers["slow"].faults.latency = 5.0
    kubeconfig = kubeconfig_for(servers, tokens={"badtoken": "wrong-token"}, without_ca=["noca"])
    fleet_file = tmp_path / "fleet.yaml"
    entries: list[dict[str, Any]] = [
        {"name": n, "kubeconfig": str(kubeconfig), "context": n} for n in names
    ]
    entries[-1]["timeout"] = 1.0
    entries.append({"name": "stale", "kubeconfig": str(kubeconfig), "context": "gone"})
    fleet_file.write_text(yaml.safe_dump({"clusters": entries}), encoding="utf-8")

    started = time.monotonic()
    fleet = gather_fleet(load_fleet_file(fleet_file, timeout=20))
    elapsed = time.monotonic() - started

    reasons = {c.name: c.reason for c in fleet.clusters if not c.reachable}
    assert fleet.cluster("healthy").reachable and len(fleet.cluster("healthy").nodes) == 2
    assert set(reasons) == {"down", "badtoken", "noca", "forbidden", "slow", "stale"}
    assert "connection refused" in reasons["down"]
    assert "401 Unauthorized" in reasons["badtoken"]
    assert "certificate verify failed" in reasons["noca"]
    assert "403 Forbidden" in reasons["forbidden"] and "cannot list" in reasons["forbidden"]
    assert "timed out" in reasons["slow"]
    assert (
        "clusters[6].context" in reasons["stale"] and "unknown context 'gone'" in reasons["stale"]
    )
    # the slow cluster's 1 s timeout holds: nobody waits for its 5 s latency
    assert elapsed < 4.0
    # no credential anywhere: reasons, snapshot, logs (urllib3 and kubernetes at DEBUG)
    text = dumps_snapshot(fleet) + repr(fleet) + caplog.text
    assert "127.0.0.1" in caplog.text  # the logs did record the requests
    for server in servers.values():
        assert server.token not in text
    assert "wrong-token" not in text


def test_missing_context_from_the_command_line_is_an_error(
    three_clusters: tuple[dict[str, ApiServer], Path, Path],
) -> None:
    from placer.errors import FleetConfigError

    _, first, _ = three_clusters
    with pytest.raises(FleetConfigError, match="unknown context 'north'"):
        fleet_from_kubeconfigs([first], ["east", "north"])


def test_empty_config_gathers_nothing() -> None:
    assert gather_fleet(FleetConfig(())).clusters == ()
