"""The controller's HTTP endpoints, ``placer fleet show --server``, and the command line."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from placer.cli import main
from placer.controller import Endpoints, HttpServer
from placer.snapshot import fleet_from_dict


@pytest.fixture
def served(hubfleet: Any) -> Any:
    running = hubfleet.controller()
    controller = running.controller
    server = HttpServer(
        Endpoints(
            healthy=controller.healthy,
            ready=controller.ready,
            metrics=controller.metrics.exposition,
            fleet=controller.fleet_document,
            placements=controller.placements_document,
        ),
        host="127.0.0.1",
        port=0,
    ).start()
    yield server
    server.stop()


def test_probes_metrics_and_read_only_api(hubfleet: Any, served: Any) -> None:
    url = served.url
    hubfleet.hub.store.create(hubfleet.job("p1", gpus=8, pods=2))
    hubfleet.hub.store.create(hubfleet.job("huge", gpus=64))  # no node has 64 GPUs
    hubfleet.wait_for(
        lambda: hubfleet.placed_cluster(hubfleet.hub.store.get("jobs", "p1", "team-a")),
        what="p1 placed",
    )
    hubfleet.wait_for(
        lambda: (
            (hubfleet.condition(hubfleet.hub.store.get("jobs", "huge", "team-a")) or {}).get(
                "reason"
            )
            == "Unschedulable"
        ),
        what="huge refused",
    )
    assert httpx.get(f"{url}/healthz").text == "ok\n"
    ready = httpx.get(f"{url}/readyz")
    assert ready.status_code == 200 and ready.text == "leading\n"

    metrics = httpx.get(f"{url}/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    assert "placer_leader 1.0" in text
    assert 'placer_cluster_reachable{cluster="m1"} 1.0' in text
    assert 'placer_unschedulable_total{reason="InsufficientCapacity"}' in text
    assert "placer_decision_seconds_bucket" in text and "placer_queue_depth" in text
    assert "placer_placement_latency_seconds_count" in text

    placements = httpx.get(f"{url}/v1/placements").json()["placements"]
    by_name = {p["name"]: p for p in placements}
    assert by_name["p1"]["state"] == "placed" and by_name["p1"]["cluster"] in hubfleet.MEMBERS
    assert by_name["huge"]["state"] == "waiting"
    assert "64" in by_name["huge"]["condition"]["message"]

    # the in-flight placement is charged (from the next gather on): 16 GPUs of its member
    total = hubfleet.NODES * hubfleet.GPUS

    def free_gpus() -> int:
        document = httpx.get(f"{url}/v1/fleet").json()
        fleet = fleet_from_dict(document, source=f"{url}/v1/fleet")
        assert sorted(fleet.names) == list(hubfleet.MEMBERS)
        return int(fleet.cluster(by_name["p1"]["cluster"]).free()["nvidia.com/gpu"])

    hubfleet.wait_for(lambda: free_gpus() == total - 16, what="the placement charged")
    assert httpx.get(f"{url}/nope").status_code == 404


def test_fleet_show_server(hubfleet: Any, served: Any, capsys: pytest.CaptureFixture[str]) -> None:
    hubfleet.wait_for(
        lambda: httpx.get(f"{served.url}/v1/fleet").status_code == 200, what="a gathered fleet"
    )
    assert main(["fleet", "show", "--server", served.url, "-o", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in shown["clusters"]] == list(hubfleet.MEMBERS)
    assert main(["fleet", "show", "--server", served.url]) == 0
    table = capsys.readouterr().out
    assert "m1" in table and "m3" in table
    assert main(["fleet", "show", "--server", "http://127.0.0.1:9"]) == 1
    assert "cannot reach" in capsys.readouterr().err


def test_command_line_refuses_the_hub_as_a_member(
    hubfleet: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    both = hubfleet.tmp / "both.kubeconfig"
    from placer.testing import write_kubeconfig

    write_kubeconfig(
        both, {"hub": hubfleet.hub, "m1": hubfleet.members["m1"], "copy": hubfleet.hub}
    )
    code = main(
        ["controller", "--hub-context", "hub", "--kubeconfig", str(both), "--metrics-port", "0"]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "member copy is the hub itself" in err
    code = main(["controller", "--hub-context", "nope", "--kubeconfig", str(both)])
    assert code == 1 and "nope" in capsys.readouterr().err
